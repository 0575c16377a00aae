"""The backtest (``threshold-bot backtest``, docs/backtest.md) for people and for scripts: a
terminal table per gate (Rich), the same as Markdown, and the JSON document whose shape
docs/backtest.md#json---format-json fixes.

Pure: every function takes the :class:`BacktestRun` the command built and returns text or a
renderable.  Each gate shows one row per model (the current one marked): its false-alarm rate
with the counts behind it, the median runs to catch a harmful change (``never`` when the
median is a miss, ``—`` without harmful change), how many harmful changes it caught within the
``rule.backtest.detect_within`` runs, then the recommendation or why there is none.  Skipped
gates are listed with the reason.  Terminal text is ``plain`` (no Rich markup interpreted, no
terminal control printed); Markdown escapes outside text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table

from bot.core.analysis.backtest import Caught, GateBacktest, Score
from bot.core.formatting import DASH, day_month_year, percent, plural
from bot.core.models import RuleSettings, Sides
from bot.core.render.markdown import Markdown, code, escape
from bot.core.render.terminal_parts import heading, item, text

__all__ = ["BacktestRun", "backtest_json", "backtest_markdown", "backtest_table"]

JSON_VERSION = 1  # docs/backtest.md: bumped when a field changes meaning or goes
SIDES: dict[Sides, str] = {"lower": "lower bound", "upper": "upper bound", "both": "band"}
COLUMNS = ("model", "false alarms", "median runs to detect")


@dataclass(frozen=True)
class BacktestRun:
    """What one backtest read and found: the threshold file, the history's finished runs
    and the regime changes detected in it, the rule (window, harm, ``detect_within``,
    ``min_runs``) and the gates backtested, in file order."""

    file: str
    runs: int
    changes: int
    rule: RuleSettings
    gates: tuple[GateBacktest, ...]


# --------------------------------------------------------------------------- words


def _rate_text(score: Score) -> str:
    """``3.1% (9 of 290)``; ``— (no run judged)`` when no healthy run was judged."""
    if score.rate is None:
        return f"{DASH} (no run judged)"
    value = f"{score.rate * 100:.1f}".removesuffix(".0")
    return f"{value}% ({score.false_alarms} of {score.judged})"


def _median_text(score: Score) -> str:
    """``1``, ``1.5``, ``never`` (the median is a miss) or ``—`` (no harmful change)."""
    runs = score.median_runs
    if runs is None:
        return DASH
    return "never" if math.isinf(runs) else f"{runs:g}"


def _caught_text(score: Score, within: int) -> str:
    """``2 of 2`` harmful changes caught within ``within`` runs; ``—`` without any."""
    if not score.caught:
        return DASH
    return f"{sum(_in_time(c, within) for c in score.caught)} of {len(score.caught)}"


def _in_time(caught: Caught, within: int) -> bool:
    return caught.runs is not None and caught.runs <= within


def _model_cell(gate: GateBacktest, score: Score) -> str:
    words = score.rule.describe_model()
    return f"{words} (current)" if score is gate.current else words


def _changes_phrase(gate: GateBacktest) -> str:
    """``1 harmful change: 30 Jun 2026 (−7%)`` or ``no harmful change``."""
    caught = gate.current.caught if gate.current else ()
    if not caught:
        return "no harmful change"
    moves = ", ".join(f"{day_month_year(c.at)} ({_signed(c.moved)})" for c in caught)
    return f"{plural(len(caught), 'harmful change')}: {moves}"


def _signed(moved: float) -> str:
    if math.isinf(moved):
        return "from 0"
    sign = "−" if moved < 0 else "+"
    return f"{sign}{abs(moved) * 100:.1f}%"


def _recommendation(gate: GateBacktest) -> str:
    """The gate's verdict in one sentence, the model's name in backticks."""
    best = gate.recommended
    if best is None:
        return f"No recommendation: {gate.note}."
    name = f"`{best.model.describe()}`"
    counts = f"({best.false_alarms} of {best.judged})"
    if gate.tied and len(gate.tied) + 1 == len(gate.scores):
        fewest = f"a tie: every model has the fewest false alarms {counts}"
    elif gate.tied:
        others = ", ".join(f"`{s.model.describe()}`" for s in gate.tied)
        fewest = f"fewest false alarms {counts}, tied with {others}"
    else:
        fewest = f"fewest false alarms {counts}"
    if not best.caught:
        reason = f"{fewest}; {gate.note}" if gate.note else fewest
        return f"Recommended: {name} — {reason}{_tie_break(gate)}."
    count = len(best.caught)
    changes = "the harmful change" if count == 1 else f"all {count} harmful changes"
    return (
        f"Recommended: {name} — {fewest} among the models catching {changes}"
        f" within {plural(gate.within, 'run')}{_tie_break(gate)}."
    )


def _tie_break(gate: GateBacktest) -> str:
    """``; the tie goes to the current model`` (or to the first in ``--models``), or ``""``
    without a tie."""
    if not gate.tied:
        return ""
    if gate.recommended is gate.current:
        return "; the tie goes to the current model"
    return "; the tie goes to the first of them in the --models list"


def _header(run: BacktestRun) -> str:
    """The history and the yardsticks, in one sentence."""
    rule = run.rule
    return (
        f"Backtest of {run.file} over {plural(run.runs, 'finished run')},"
        f" {plural(run.changes, 'regime change')} found. A change is harmful when it moved a"
        f" gate's metric the bad way by more than {percent(rule.harm)} of its level; a model"
        f" must catch it within {plural(rule.backtest.detect_within, 'run')}. Each run is"
        f" judged by the limit from the {plural(rule.window.runs, 'run')} before it, once"
        f" {plural(rule.backtest.min_runs, 'run')} precede it."
    )


def _gate_title(gate: GateBacktest) -> str:
    return f"{gate.name} ({gate.file} line {gate.line}): {gate.metric}, {SIDES[gate.sides]}"


def _skipped(gates: Sequence[GateBacktest]) -> list[GateBacktest]:
    return [g for g in gates if g.skipped]


# --------------------------------------------------------------------------- terminal


def _score_table(gate: GateBacktest) -> Table:
    table = Table(show_edge=False, pad_edge=False, expand=False)
    for column in (*COLUMNS, f"caught within {gate.within}"):
        table.add_column(column, overflow="fold")
    for score in gate.scores:
        style = "bold" if score is gate.current else ""
        cells = (
            _model_cell(gate, score),
            _rate_text(score),
            _median_text(score),
            _caught_text(score, gate.within),
        )
        table.add_row(*(text(cell, style) for cell in cells))
    return table


def _terminal_gate(gate: GateBacktest) -> Iterator[RenderableType]:
    yield heading(_gate_title(gate))
    yield text(f"{plural(gate.runs, 'run')} with the metric; {_changes_phrase(gate)}.")
    yield _score_table(gate)
    yield text(_recommendation(gate), "green" if gate.recommended else "yellow")
    hint = gate.hint()
    if hint is not None:
        yield item(hint, "note:", "yellow")


def backtest_table(run: BacktestRun) -> Group:
    """The backtest for a terminal: the header, a table per gate, the skipped gates."""
    parts: list[RenderableType] = [text(_header(run), "bold")]
    for gate in run.gates:
        if not gate.skipped:
            parts += list(_terminal_gate(gate))
    skipped = _skipped(run.gates)
    if skipped:
        parts.append(heading(f"Not backtested ({len(skipped)})"))
    parts += [item(f"{g.name} ({g.file} line {g.line}): {g.skipped}") for g in skipped]
    if all(g.skipped for g in run.gates):
        parts.append(text("\nNo gate could be backtested.", "yellow"))
    return Group(*parts)


# --------------------------------------------------------------------------- markdown


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _markdown_gate(gate: GateBacktest) -> Iterator[str]:
    title = (
        f"{code(gate.name)} ({escape(gate.file)} line {gate.line}):"
        f" {code(gate.metric)}, {SIDES[gate.sides]}"
    )
    yield f"### {title}"
    yield ""
    yield escape(f"{plural(gate.runs, 'run')} with the metric; {_changes_phrase(gate)}.")
    yield ""
    yield _md_row((*COLUMNS, f"caught within {gate.within}"))
    yield _md_row(("---",) * 4)
    for score in gate.scores:
        name = escape(_model_cell(gate, score))
        if score is gate.current:
            name = Markdown(f"**{name}**")
        yield _md_row(
            (name, _rate_text(score), _median_text(score), _caught_text(score, gate.within))
        )
    yield ""
    yield _recommendation_md(gate)
    hint = gate.hint()
    if hint is not None:
        yield ""
        yield f"> {_ticks_to_code(hint)}"
    yield ""


def _recommendation_md(gate: GateBacktest) -> str:
    """The recommendation with the model names in ``<code>`` (escaped)."""
    return _ticks_to_code(_recommendation(gate))


def _ticks_to_code(sentence: str) -> str:
    """A sentence of ours with `model` names: the names in ``<code>``, the rest escaped."""
    parts = sentence.split("`")
    return "".join(code(p) if i % 2 else _spaced(p) for i, p in enumerate(parts))


def _spaced(words: str) -> str:
    """``words`` escaped, the spaces around them kept (``escape`` strips them)."""
    core = words.strip()
    if not core:
        return words
    start = words.index(core)
    return f"{words[:start]}{escape(core)}{words[start + len(core) :]}"


def backtest_markdown(run: BacktestRun) -> str:
    """The backtest as GitHub Markdown: the header, a table per gate, the skipped gates."""
    lines = ["## Threshold model backtest", "", escape(_header(run)), ""]
    for gate in run.gates:
        if not gate.skipped:
            lines += _markdown_gate(gate)
    skipped = _skipped(run.gates)
    if skipped:
        lines += [f"### Not backtested ({len(skipped)})", ""]
        lines += [
            f"- {code(g.name)} ({escape(g.file)} line {g.line}): {escape(g.skipped)}"
            for g in skipped
        ]
        lines.append("")
    if all(g.skipped for g in run.gates):
        lines += ["No gate could be backtested.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# --------------------------------------------------------------------------- JSON


def _caught_json(caught: Caught, within: int) -> dict[str, Any]:
    return {
        "at": caught.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "index": caught.index,
        "moved": None if math.isinf(caught.moved) else caught.moved,
        "runs": caught.runs,
        "within": _in_time(caught, within),
    }


def _score_json(gate: GateBacktest, score: Score) -> dict[str, Any]:
    runs = score.median_runs
    return {
        "model": score.model.describe(),
        "description": score.rule.describe_model(),
        "current": score is gate.current,
        "judged": score.judged,
        "false_alarms": score.false_alarms,
        "false_alarm_rate": score.rate,
        "median_runs_to_detect": None if runs is None or math.isinf(runs) else runs,
        "caught_within": sum(_in_time(c, gate.within) for c in score.caught),
        "catches_all": score.catches_all(gate.within),
        "changes": [_caught_json(c, gate.within) for c in score.caught],
    }


def _tie_json(gate: GateBacktest) -> dict[str, Any] | None:
    """The models tied for the recommendation, the recommended first, and what broke the
    tie: ``current_model`` or ``models_order``; None without a tie."""
    if gate.recommended is None or not gate.tied:
        return None
    models = [s.model.describe() for s in (gate.recommended, *gate.tied)]
    broken_by = "current_model" if gate.recommended is gate.current else "models_order"
    return {"models": models, "broken_by": broken_by}


def _gate_json(gate: GateBacktest) -> dict[str, Any]:
    current = gate.current
    return {
        "name": gate.name,
        "file": gate.file,
        "line": gate.line,
        "metric": gate.metric,
        "sides": gate.sides,
        "runs": gate.runs,
        "skipped": gate.skipped or None,
        "harmful_changes": len(current.caught) if current else 0,
        "detect_within": gate.within,
        "harm": current.rule.harm if current else None,
        "models": [_score_json(gate, s) for s in gate.scores],
        "recommended": gate.recommended.model.describe() if gate.recommended else None,
        "tie": _tie_json(gate),
        "note": gate.note,
        "hint": gate.hint(),
    }


def backtest_json(run: BacktestRun) -> str:
    """The backtest as the JSON document of docs/backtest.md#json---format-json."""
    rule = run.rule
    data = {
        "version": JSON_VERSION,
        "file": run.file,
        "history": {"runs": run.runs, "regime_changes": run.changes},
        "settings": {
            "window": rule.window.runs,
            "harm": rule.harm,
            "detect_within": rule.backtest.detect_within,
            "min_runs": rule.backtest.min_runs,
            "model": rule.model.describe(),
        },
        "gates": [_gate_json(g) for g in run.gates],
    }
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
