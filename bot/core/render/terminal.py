"""The review on a terminal (``threshold-bot review --format table``): what the PR comment
says, laid out for any width down to 80 columns.  Text is wrapped, never cut: a block per
gate (its cells as labelled lines, its explanation and warnings below), the placeholders,
the values not bound to a gate with their config lines, the review's warnings, the regime
table (``terminal_regimes``: the widest layout that fits), the method and what to do in
command-line words.

Every piece of text is a ``rich.text.Text`` of plain text (no Rich markup is interpreted,
terminal controls are dropped: ``plain``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from bot.core.analysis.verdicts import needs_action
from bot.core.formatting import plural
from bot.core.models import GateReview, Review
from bot.core.render.gates import judged, label_plain, metric_plain, placeholder_rows
from bot.core.render.sources import source_lines
from bot.core.render.sparkline import sparkline
from bot.core.render.terminal_parts import Command, Verbatim, heading, indent, item, text
from bot.core.render.terminal_regimes import MOVED, RegimeTable
from bot.core.render.terminal_text import actions, for_cli, plain, unmark, verdict_words
from bot.core.render.view import (
    TREND_KEY,
    checked_phrase,
    gate_row,
    headline,
    history_phrase,
    is_audit,
    regime_notes,
    rule_groups,
    window_groups,
)

__all__ = ["plain", "regime_section", "review_table"]

# glyphs of a gate's sparkline: with its label column and the run count, a row of 80 columns
SPARK_WIDTH = 32
# a gate's value and its failures: as the PR changes it, or (an audit) as the file has it
LABELS = ("old → proposed", "old value fails", "proposed fails")
AUDIT_LABELS = ("value", "fails recent runs", "fails in window")


def _verdict_style(g: GateReview) -> str:
    if needs_action(g):
        return "bold red"
    return "yellow" if g.verdict in ("looser_than_rule", "no_data") else "green"


def _history(g: GateReview) -> tuple[tuple[str, str, str], ...]:
    """The gate's chart as a sparkline row (none without chart data)."""
    values = [p.value for p in g.chart.points] if g.chart else []
    line = sparkline(values, SPARK_WIDTH)
    if not line:
        return ()
    return (("history", f"{line} ({plural(len(values), 'run')}, oldest first)", "cyan"),)


def _gate_block(g: GateReview, audit: bool) -> Group:
    """One gate: its name, its cells as labelled lines, its explanation and warnings; in an
    audit (``is_audit``), its one value and how that fares, never a proposed one."""
    row = gate_row(g, audit)
    cells = Table.grid(padding=(0, 2))
    cells.add_column(no_wrap=True, style="dim")
    cells.add_column(overflow="fold")
    where = f"{g.file} line {g.line}" + (
        f"; worst at step {g.worst_step}" if g.worst_step is not None else ""
    )
    labels = AUDIT_LABELS if audit else LABELS
    for label, value, style in (
        ("verdict", verdict_words(g, audit), _verdict_style(g)),
        ("metric", metric_plain(g), ""),
        (labels[0], unmark(row.change), ""),
        ("rule says", row.rule, ""),
        ("window min – max", row.window, ""),
        (labels[1], unmark(row.old_fails), ""),
        (labels[2], unmark(row.new_fails), ""),
        ("written at", where, ""),
        *_history(g),
    ):
        cells.add_row(Text(label), text(value, style))
    parts: list[RenderableType] = [
        text(label_plain(g).replace("\n", " "), "bold"),
        indent(cells),
    ]
    if g.explanation:
        parts.append(indent(text(f"{g.explanation}.")))
    parts += [indent(item(w, "warning:", "yellow")) for w in g.warnings]
    parts += [indent(item(n, "note:", "cyan")) for n in g.notes]
    if g.backtest_hint:
        parts.append(indent(item(g.backtest_hint)))
    return Group(*parts)


def _placeholders(review: Review) -> Iterator[RenderableType]:
    rows = placeholder_rows(review)
    if rows:
        yield heading(f"Placeholders, not judged ({len(rows)})")
    for r in rows:
        g = r.gate
        yield item(f"{g.name} = {r.value} ({g.file} line {g.line}): {g.ignored}")


def _unbound(review: Review) -> Iterator[RenderableType]:
    count = len(review.hints)
    if not count:
        return
    values = "value is" if count == 1 else "values are"
    yield heading(f"Not checked ({count} numeric {values} not bound to a gate)")
    for u in review.hints:
        yield item(f"{u.name} = {u.literal} ({u.file} line {u.line}): {u.reason}")
        if u.config.strip():
            yield indent(text("Config lines that would declare it:"))
            yield Verbatim(u.config, 4, "cyan")


def _warnings(review: Review) -> Iterator[RenderableType]:
    if review.warnings:
        yield heading("Warnings")
    for warning in review.warnings:
        yield item(warning, "warning:", "yellow")


def regime_section(review: Review) -> Iterator[RenderableType]:
    """The regime table under its heading, with its key and the trend notes (none without
    regimes)."""
    if review.regimes:
        table = RegimeTable(review)
        notes = regime_notes(review, table.columns)
        key = f"; {TREND_KEY}" if notes else ""
        yield heading("Regimes")
        yield text(
            "Medians of each stretch of stable runs;"
            f" {MOVED}: moved at the change that started it{key}."
        )
        yield table
        yield from (item(unmark(note)) for note in notes)


def _method(review: Review) -> Iterator[RenderableType]:
    yield heading("Method")
    rules = rule_groups(review)
    for phrase, names in rules:
        of = f" of {', '.join(names)}" if len(rules) > 1 else ""
        yield item(f"Rule{of}: {phrase}.")
    if any(g.kind == "reference" for g in judged(review)):
        yield item(
            "Rule for a reference ± tolerance: the reference is the window's"
            f" {review.rule.reference}, at the literal's decimals; the band around it"
            " (reference ± tolerance, on the sides CI checks) must hold every run of the"
            " window, else the rule gives the tolerance that would."
        )
    windows = window_groups(review)
    for phrase, names in windows:
        of = f" of {', '.join(names)}" if len(windows) > 1 else ""
        yield item(f"Window{of}: {phrase}. {checked_phrase(review)}.")
    for file, phrase in source_lines(review):
        yield item(f"Source of {file}: {unmark(phrase)}.")
    if review.history.total or review.source:
        source = f"{review.source}, " if review.source else ""
        yield item(f"History: {source}{history_phrase(review)}.")


def _actions(review: Review, cli_options: str) -> Iterator[RenderableType]:
    steps = actions(review, cli_options)
    if steps:
        yield heading("What to do")
    for step in steps:
        yield item(step.words)
        yield from (Command(argv) for argv in step.commands)


def review_table(review: Review, *, cli_options: str = "--history FILE") -> Group:
    """The whole review for a terminal, any width down to 80 columns: the verdict, a block
    per judged gate, then placeholders, unbound values, warnings, regimes, method and what
    to do.  ``cli_options``: the review's history and
    rule options, shell-quoted, for the ``threshold-bot rebaseline`` it suggests.  The
    history error and warnings are worded for the command line (``cli_wording``)."""
    review = for_cli(review)
    parts: list[RenderableType] = [text(unmark(headline(review)), "bold")]
    gates = judged(review)
    if gates:
        parts.append(heading("Gates"))
    audit = is_audit(review)
    for i, g in enumerate(gates):
        parts += [Text(""), _gate_block(g, audit)] if i else [_gate_block(g, audit)]
    sections: Iterable[RenderableType] = (
        *_placeholders(review),
        *_unbound(review),
        *_warnings(review),
        *regime_section(review),
        *_method(review),
        *_actions(review, cli_options),
    )
    return Group(*parts, *sections)
