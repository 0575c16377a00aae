"""Rendering of a Review: the PR comment, the check-run output and the JSON review.

Pure functions over ``bot.core.models.Review``.  Layout lives in the Jinja templates of the
top-level ``templates/`` folder, the values they print in ``bot.core.render.view``.  Their
environment (``bot.core.render.loader``) escapes every ``{{ … }}`` output through
``bot.core.render.markdown.escape`` unless the value is already ``Markdown``, so a template
cannot forget to escape outside text.  Outputs are cut to GitHub's size limits.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import PurePath
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.core.analysis.verdicts import needs_action
from bot.core.formatting import day_month_year
from bot.core.models import GateReview, Review
from bot.core.render.charts import ChartView, chart_view
from bot.core.render.conditions import tolerance_too_tight
from bot.core.render.gates import hints, judged, placeholder_rows
from bot.core.render.loader import render_markdown
from bot.core.render.markdown import (
    Markdown,
    code,
    fenced,
    join,
    link,
    safe_url,
    truncate,
)
from bot.core.render.shell import Argv, one_line
from bot.core.render.sources import source_lines
from bot.core.render.view import (
    TREND_KEY,
    check_title,
    checked_phrase,
    gate_row,
    headline,
    history_phrase,
    is_audit,
    prose,
    rebaseline_command,
    regime_metrics,
    regime_notes,
    regime_rows,
    rule_groups,
    rule_values,
    unverified,
    window_groups,
)

MARKER = "<!-- threshold-bot:review -->"
GITHUB_TEXT_LIMIT = 65_535  # check-run summary / text, and (minus one) an issue comment body
TITLE_LIMIT = 100
FOLD_GATES = 12  # more gates than this: the gates table is folded into <details>
FOLD_REGIMES = 8  # likewise for the regime table
# how the history adapters word a settings hint for the App's operator; the CLI reads the
# same settings from its own environment (or ``.env``)
_APP_ONLY_WORDS = (" on the server",)
_TRUNCATED = (
    "*Truncated to fit GitHub's size limit: run `threshold-bot review --format json`"
    " for the whole review.*"
)


class CheckOutput(BaseModel):
    """The ``output`` of a GitHub check run."""

    model_config = ConfigDict(frozen=True)

    title: str
    summary: str
    text: str


def cli_wording(text: str) -> str:
    """``text`` (a history error or warning) worded for the command line: without the
    App's "… on the server" (the CLI's settings are its own environment)."""
    for words in _APP_ONLY_WORDS:
        text = text.replace(words, "")
    return text


def _for_cli(review: Review) -> Review:
    """The review with its history error, warnings and gate explanations in the command
    line's words."""
    gates = tuple(
        g.model_copy(
            update={
                "explanation": cli_wording(g.explanation),
                "warnings": tuple(cli_wording(w) for w in g.warnings),
            }
        )
        for g in review.gates
    )
    update: dict[str, object] = {
        "gates": gates,
        "warnings": tuple(cli_wording(w) for w in review.warnings),
    }
    if review.error:
        update["error"] = cli_wording(review.error)
    return review.model_copy(update=update)


def rebaseline_options(
    history: PurePath | None,
    wandb: str | None,
    config: PurePath | None,
    window: str | None,
    allowance: object | None,
) -> str:
    """The options of a CLI ``review`` that ``rebaseline`` needs to write the same values,
    shell-quoted: ``--history runs.jsonl --window regime``."""
    pairs = [
        ("--history", history.as_posix() if history else None),
        ("--wandb", wandb),
        ("--config", config.as_posix() if config else None),
        ("--window", window),
        ("--allowance", None if allowance is None else str(allowance)),
    ]
    return " ".join(f"{flag} {shlex.quote(value)}" for flag, value in pairs if value is not None)


def cli_rebaseline_commands(values: Sequence[tuple[GateReview, str]], options: str) -> list[Argv]:
    """The ``threshold-bot rebaseline`` commands that write ``values`` (:func:`rule_values`),
    as arguments: one per file, ``options`` (the review's history and rule options,
    shell-quoted) after ``--file``, then always the gates by name (without names the command
    would rewrite every gate the rule would change), and ``--tolerance`` when a reference's
    is too tight."""
    by_file: dict[str, list[GateReview]] = {}
    for g, _ in values:
        by_file.setdefault(g.file, []).append(g)
    commands = []
    for file, gates in by_file.items():
        words = ["threshold-bot", "rebaseline", "--file", file, *shlex.split(options)]
        words += dict.fromkeys(g.name for g in gates)
        if any(tolerance_too_tight(g) for g in gates):
            words.append("--tolerance")
        commands.append(tuple(words))
    return commands


def _listed(items: Sequence[Markdown]) -> Markdown:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) < 2:
        return join(items)
    return Markdown(f"{join(items[:-1])} and {items[-1]}")


def cli_rebaseline_words(
    values: Sequence[tuple[GateReview, str]],
    every: Sequence[tuple[GateReview, str]],
    lead: str = "Or run",
) -> Markdown:
    """What the :func:`cli_rebaseline_commands` of ``values`` do, to introduce them: which
    gates they rewrite (those and no other), and — when ``every`` (the rule's values of every
    gate) holds more — which other gates a run without gate names would rewrite too."""
    names = list(dict.fromkeys(g.name for g, _ in values))
    files = {g.file for g, _ in values}
    them = "this command" if len(files) == 1 else "these commands"
    of = "value" if len(names) == 1 else "values"
    text = (
        f"{lead} {them} to write the rule's {of} of {_listed([code(n) for n in names])} in"
        f" place, and no other gate's, with a provenance comment ({code('--dry-run')} prints"
        " the diff and writes nothing)"
    )
    others = [n for n in dict.fromkeys(g.name for g, _ in every) if n not in names]
    if others:
        text += (
            f"; without gate names it would also rewrite {_listed([code(n) for n in others])},"
            " which need no change"
        )
    if any(tolerance_too_tight(g) for g, _ in values):
        text += (
            f"; {code('--tolerance')} also widens a tolerance the runs do not fit, where the"
            " file writes it"
        )
    return Markdown(f"{text}:")


def command_block(commands: Sequence[Argv], indent: int = 2) -> Markdown:
    """``commands`` as a fenced ``sh`` block, one line each (GitHub gives it a copy button;
    the text inside is shown as written, never wrapped into several commands), indented
    by ``indent`` to sit in a list item."""
    block = fenced("\n".join(one_line(c) for c in commands), "sh")
    return Markdown("\n".join(" " * indent + line for line in block.splitlines()))


def regime_context(review: Review, repo_url: str | None) -> dict[str, object]:
    """What ``partials/regime_table.md.j2`` prints: ``review``'s regimes, the PRs that
    started them linked under ``repo_url``."""
    metrics = regime_metrics(review)
    return {
        "regime_metrics": metrics,
        "regimes": regime_rows(review, metrics, repo_url),
        "regime_notes": regime_notes(review, metrics),
        "trend_key": TREND_KEY,
        "fold_regimes": len(review.regimes) > FOLD_REGIMES,
        "regimes_since": day_month_year(review.regimes[0].start) if review.regimes else "",
    }


def _context(
    review: Review,
    repo_url: str | None,
    app_mode: bool,
    approved: str | None = None,
    cli_options: str = "",
) -> dict[str, object]:
    gates = judged(review)
    fixes = rule_values(review, flagged_only=True)
    every = rule_values(review, flagged_only=False)
    audit = is_audit(review)
    return {
        "marker": Markdown(MARKER),
        "review": review,
        "headline": headline(review, approved),
        "rows": [gate_row(g, audit) for g in gates],
        "audit": audit,
        "fold_gates": len(gates) > FOLD_GATES,
        "placeholders": placeholder_rows(review),
        "hints": hints(review),
        "warnings": [prose(w) for w in review.warnings],
        "references": any(g.kind == "reference" for g in gates),
        **regime_context(review, repo_url),
        "windows": window_groups(review),
        "checked": checked_phrase(review),
        "history": history_phrase(review),
        "sources": source_lines(review),
        "rules": rule_groups(review),
        "fixes": fixes,
        "fix_command": rebaseline_command(fixes, named=True),
        "rule_values": every,
        "every_command": rebaseline_command(every, named=False),
        "cli_words": cli_rebaseline_words(fixes, every),
        "cli_block": command_block(cli_rebaseline_commands(fixes, cli_options)),
        "unverified": unverified(review),
        "new_sources": [g for g in gates if g.proposed_source],
        "approved": approved,
        "app_mode": app_mode,
    }


ChartLevel = Literal["all", "attention", "none"]
"""Which gates' charts the comment shows: every gate's, only those needing attention, none."""


def _charts(review: Review, level: ChartLevel) -> dict[str, object]:
    """The charts of the gates that need attention, and of the others (folded together)."""
    views: list[tuple[GateReview, ChartView]] = []
    if level != "none":
        for g in judged(review):
            view = chart_view(g) if level == "all" or needs_action(g) else None
            if view is not None:
                views.append((g, view))
    return {
        "attention_charts": [v for g, v in views if needs_action(g)],
        "other_charts": [v for g, v in views if not needs_action(g)],
    }


def render_comment(
    review: Review,
    *,
    repo_url: str | None = None,
    app_mode: bool = False,
    approved: str | None = None,
    cli_options: str = "--history FILE",
    charts: bool = True,
    report_url: str | None = None,
) -> str:
    """The PR comment (docs/pr-comment.md), starting with the hidden marker.

    ``app_mode`` words the "what to do" part for the App (``/rebaseline``, the approve
    button, ``/threshold-bot retry``); otherwise for the command line: the edits to make
    by hand, or the ``threshold-bot rebaseline`` command that makes them, with
    ``cli_options`` (the review's history and rule options, shell-quoted) — and the history
    error without the App's "on the server".  ``approved`` is the note of a maintainer
    approval that covers the proposed values: the verdict then says who approved which
    values, and what the review found.

    ``charts``: each gate's Mermaid chart (docs/pr-comment.md#charts) — those of the gates
    that need attention, then the others folded together; when the comment would exceed
    GitHub's limit the other gates' charts go first, then all of them, before the text is
    cut. ``report_url``: a link to the interactive report, under the verdict.
    """
    if not app_mode:
        review = _for_cli(review)
    context = _context(review, repo_url, app_mode, approved, cli_options)
    usable = safe_url(report_url) if report_url else None  # http(s) only
    context["report_link"] = link("Open the interactive report", usable) if usable else None
    levels: tuple[ChartLevel, ...] = ("all", "attention", "none") if charts else ("none",)
    for level in levels:
        text = render_markdown("comment.md.j2", context | _charts(review, level))
        if len(text) <= GITHUB_TEXT_LIMIT:
            break
    return truncate(text, GITHUB_TEXT_LIMIT, _TRUNCATED)


def render_check(
    review: Review, *, repo_url: str | None = None, approved: str | None = None
) -> CheckOutput:
    """The check-run output: title, summary (verdict and gates) and text (regimes, method).

    ``approved``: as for :func:`render_comment`; it is also the title.
    """
    context = _context(review, repo_url, True, approved)
    title = approved or check_title(review)
    return CheckOutput(
        title=title if len(title) <= TITLE_LIMIT else title[: TITLE_LIMIT - 1] + "…",
        summary=truncate(
            render_markdown("check_summary.md.j2", context), GITHUB_TEXT_LIMIT, _TRUNCATED
        ),
        text=truncate(render_markdown("check_text.md.j2", context), GITHUB_TEXT_LIMIT, _TRUNCATED),
    )


_SPANS = {"rel_span", "abs_span"}  # where a tolerance is written: for /rebaseline, not JSON
_NOT_IN_JSON = {"gates": {"__all__": {"tolerance": _SPANS, "recomputed_tolerance": _SPANS}}}


def render_json(review: Review) -> str:
    """The JSON review (docs/json-review.md): the stable fields (``hints``: every literal that
    reaches a comparison and no gate binds, with its config lines), plus explanatory extras,
    and ``audit`` (:func:`is_audit`: nothing is proposed, ``old`` and ``proposed`` are both
    the current value).

    A tolerance is ``{"rel": …, "abs": …}``: where its literals are written in the file
    (``rel_span``, ``abs_span``) is left out, as the file's offsets are no contract."""
    data = review.model_dump(mode="json", exclude=_NOT_IN_JSON)
    data["audit"] = is_audit(review)
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
