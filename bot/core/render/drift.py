"""The drift watch's words: the issue or PR body, its titles, branch, marker and JSON (pure).

One item per threshold file, found again by :func:`drift_marker` (its first line).  The
body's layout and wording are ``templates/drift.md.j2``, the values it prints are made here.
Outside text (file, gate and metric names, PR titles, the config's values) is escaped; the
regime table and a gate's cells are the PR comment's (``bot.core.render.view``).  See
docs/drift.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from bot.core.analysis.drift import DriftReport, GateDrift
from bot.core.config import CONFIG_PATH
from bot.core.formatting import day_month_year, plural
from bot.core.models import Change, GateReview, Review
from bot.core.render.conditions import rule_text
from bot.core.render.gates import metric_cell, proposed_text, where
from bot.core.render.loader import render_blocks, render_markdown
from bot.core.render.markdown import Markdown, code, escape, join, link, truncate
from bot.core.render.review import (
    GITHUB_TEXT_LIMIT,
    cli_rebaseline_commands,
    cli_rebaseline_words,
    command_block,
    regime_context,
)
from bot.core.render.shell import Argv
from bot.core.render.view import (
    MAX_PULLS,
    NO_CODE_CHANGE,
    gate_rule,
    prose,
    pull_link,
    rule_values,
    side_phrases,
    window_groups,
)
from bot.core.thresholds.edit import format_literal

__all__ = [
    "DRIFT_MARKER_PREFIX",
    "CliInstruction",
    "branch_name",
    "cli_instruction",
    "closing_comment",
    "drift_headline",
    "drift_json",
    "drift_marker",
    "drift_sections",
    "issue_title",
    "item_body",
    "pull_title",
]

DRIFT_MARKER_PREFIX = "<!-- threshold-bot:drift "
TITLE_LIMIT = 256  # GitHub's limit on an issue or PR title
BRANCH_PREFIX = "threshold-bot/rebaseline/"
BRANCH_PART_LIMIT = 100  # characters of one branch name component (file systems cap 255 bytes)
BRANCH_LIMIT = 250  # characters of a whole branch name (the store keeps up to 300)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_BRANCH_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_TRUNCATED = (
    "*Truncated to fit GitHub's size limit: run `threshold-bot drift --format json`"
    " for the whole report.*"
)
Mode = Literal["issue", "pull_request"]
_NO_DATA_LINES: dict[str | None, str] = {  # the gates without data, by GateReview.no_data_reason
    "empty_history": "the history is empty: nothing to judge {} on",
    "no_finished_runs": "the history has no finished run to judge {} on",
    "not_numbers": "no finished run has a number for the metric of {} (text, null or NaN)",
}


# --------------------------------------------------------------------------- names


def drift_marker(file: str) -> str:
    """The hidden first line of ``file``'s item: ``<!-- threshold-bot:drift file=ci/a%20b.sh
    -->``, the path percent-encoded (one marker per path; nothing in it ends the comment)."""
    return f"{DRIFT_MARKER_PREFIX}file={quote(file, safe='/')} -->"


def _title(text: str, file: str) -> str:
    """``text`` with ``{}`` as ``file`` (control characters as spaces), within the title
    limit: a long path keeps its end."""
    clean = _CONTROL.sub(" ", file)
    room = TITLE_LIMIT - len(text.format(""))
    if len(clean) > room:
        clean = "…" + clean[-(room - 1) :]
    return text.format(clean)


def issue_title(file: str) -> str:
    """``Nightly thresholds failing: <file>`` (at most 256 characters)."""
    return _title("Nightly thresholds failing: {}", file)


def pull_title(file: str) -> str:
    """``Rebaseline <file> after nightly failures`` (at most 256 characters)."""
    return _title("Rebaseline {} after nightly failures", file)


def _branch_part(part: str) -> str:
    """One path component as a git ref component: ASCII letters, digits, ``._-``, never
    starting with ``.``, ending with ``.`` or ``.lock``, nor holding ``..``."""
    text = _BRANCH_UNSAFE.sub("-", part).replace("..", "-.")
    if text.startswith("."):
        text = "-" + text[1:]
    if text.endswith(".lock") or text.endswith("."):
        text += "-"
    return text[:BRANCH_PART_LIMIT] or "-"


def branch_name(file: str) -> str:
    """``threshold-bot/rebaseline/<file>``, made a valid git ref (``git check-ref-format``);
    a path that had to change (characters outside ``A-Za-z0-9._-``, dots in the wrong place,
    a long component) ends with ``-`` and 8 hex digits of its hash, so distinct paths get
    distinct branches.  A name over ``BRANCH_LIMIT`` characters keeps only the file's
    name and that hash."""
    parts = [p for p in file.split("/") if p]
    safe = [_branch_part(p) for p in parts] or ["-"]
    digest = hashlib.sha256(file.encode("utf-8")).hexdigest()[:8]
    if safe != parts:
        safe[-1] = f"{safe[-1][: BRANCH_PART_LIMIT - 9]}-{digest}"
    name = BRANCH_PREFIX + "/".join(safe)
    if len(name) > BRANCH_LIMIT:
        last = safe[-1] if safe != parts else f"{safe[-1][: BRANCH_PART_LIMIT - 9]}-{digest}"
        name = BRANCH_PREFIX + last
    return name


# --------------------------------------------------------------------------- the body


@dataclass(frozen=True)
class GateWords:
    """One watched gate, its words ready for ``templates/drift.md.j2``."""

    name: str
    metric: str
    condition: Markdown  # what CI checks: ``metric ≥ 0.32``
    where: Markdown
    reason: str  # its drift status in one plain line (analysis.drift)
    change: Markdown | None  # the regime change it is tied to, with its PRs
    value: str | None  # the rule's new value; None: no run of its window has the metric
    same: bool  # the rule's value is the one the file has
    rule: Markdown  # how the rule computes it (the bot's words)
    window: str  # the window it computes it over


def _change_words(change: Change, review: Review, repo_url: str | None) -> Markdown:
    """``the regime change of 3 Jul 2026, started by #12 Title``."""
    text = f"the regime change of {day_month_year(change.at)}"
    if change.pulls:
        shown = [pull_link(n, review, repo_url) for n in change.pulls[:MAX_PULLS]]
        more = len(change.pulls) - len(shown)
        return Markdown(f"{text}, started by {', '.join(shown)}{f' +{more} more' if more else ''}")
    before, after = change.before_commit, change.after_commit
    if before and before == after:  # one commit on both sides: no range to compare
        return Markdown(f"{text}, {NO_CODE_CHANGE} ({code(before[:7])})")
    if before and after:  # outside text: escaped (a commit is only hex once validated)
        commits = f"{escape(before[:7])}…{escape(after[:7])}"
        url = f"{repo_url.rstrip('/')}/compare/{before}...{after}" if repo_url else None
        return Markdown(f"{text}, between commits {link(Markdown(commits), url)}")
    return Markdown(text)


def _rule_phrase(g: GateReview, review: Review) -> Markdown:
    """How the rule computes ``g``'s value: ``by minmax, 5% allowance: the window's minimum
    less 5% of its magnitude, rounded down`` (the gate's own model, ``gate_rule``)."""
    if g.kind == "reference":
        return Markdown(f"the window's {review.rule.reference}, at the literal's decimals")
    rule = gate_rule(g, review)
    lower, upper = side_phrases(rule)
    if rule.model.name == "absolute":
        return Markdown(f"by {rule.describe_model()}: {lower if g.op in ('>=', '>') else upper}")
    if g.op in (">=", ">"):
        return Markdown(f"by {rule.describe_model()}: {lower}, rounded down")
    return Markdown(f"by {rule.describe_model()}: {upper}, rounded up")


def _condition(g: GateReview) -> Markdown:
    """``metric ≥ 0.32`` (a limit), ``metric ≈ 0.95 ±8% (≥ 0.874)`` (a reference)."""
    cell = metric_cell(g)
    return cell if g.kind == "reference" else Markdown(f"{cell} {escape(proposed_text(g))}")


def drift_headline(report: DriftReport) -> Markdown:
    """The item's first line: which gates drift, or why none does."""
    file, drifting, flaky = code(report.file), report.drifting, report.flaky
    judged = plural(len(report.gates), "gate")
    if drifting:
        verb = "keeps" if len(drifting) == 1 else "keep"
        names = join(code(d.gate.name) for d in drifting)
        return Markdown(
            f"❌ **{len(drifting)} of {judged} in {file} {verb} failing** the newest runs on the"
            f" default branch: {names}."
        )
    missing = report.no_data
    if missing and len(missing) == len(report.gates):
        return Markdown(f"⚪ **No data to judge {file}**: {_no_data_phrase(report)}.")
    some = ""
    if missing:
        some = f"; {len(missing)} of {judged} {'has' if len(missing) == 1 else 'have'} no data"
    if flaky:
        return Markdown(
            f"⚠️ **No gate of {file} drifts**; {len(flaky)} of {judged} fail now and then{some}."
        )
    if missing:
        return Markdown(f"⚪ **No gate of {file} drifts**{some} to judge.")
    return Markdown(f"✅ **No gate of {file} drifts**: {judged} watched.")


def _no_data_phrase(report: DriftReport) -> str:
    """Why no gate of ``report`` has data: the history's fault, or the metrics'."""
    reasons = {d.gate.no_data_reason for d in report.no_data}
    if reasons == {"empty_history"}:
        return "the history is empty"
    if reasons == {"no_finished_runs"}:
        return "the history has no finished run"
    gates = "its gate" if len(report.gates) == 1 else f"any of its {len(report.gates)} gates"
    return f"no finished run has a number for the metric of {gates}"


def _no_data_lines(report: DriftReport) -> list[Markdown]:
    """``No data (2): …`` per reason the gates without data have none."""
    by_reason: dict[str | None, list[GateDrift]] = {}
    for d in report.no_data:
        by_reason.setdefault(d.gate.no_data_reason, []).append(d)
    lines = []
    for reason, gates in by_reason.items():
        named = join(Markdown(f"{code(d.gate.name)} ({code(d.gate.metric)})") for d in gates)
        words = _NO_DATA_LINES.get(reason, "no finished run has the metric of {}")
        lines.append(Markdown(f"No data ({len(gates)}): {words.format(named)}."))
    return lines


@dataclass(frozen=True)
class CliInstruction:
    """The command line's "what to do": which gates the commands rewrite, and the commands."""

    words: Markdown
    commands: tuple[Argv, ...]


def cli_instruction(report: DriftReport, cli_options: str) -> CliInstruction | None:
    """The ``threshold-bot rebaseline`` commands (with ``cli_options``) that write the rule's
    values of the drifting gates the rule would change, named, and their words; None when
    the rule changes none of them."""
    every = rule_values(report.review, flagged_only=False)
    drifting = {_key(d.gate) for d in report.drifting}
    values = [(g, value) for g, value in every if _key(g) in drifting]
    if not values:  # the rule's values are those the gates have
        return None
    words = cli_rebaseline_words(values, every, lead="Run")
    return CliInstruction(words, tuple(cli_rebaseline_commands(values, cli_options)))


def _key(g: GateReview) -> tuple[str, str, str, str]:
    return g.file, g.name, g.metric, g.op


def _words(d: GateDrift, review: Review, windows: dict[str, str], url: str | None) -> GateWords:
    g = d.gate
    value = None if g.recomputed is None else rule_text(g)
    return GateWords(
        name=g.name,
        metric=g.metric,
        condition=_condition(g),
        where=where(g),
        reason=d.reason,
        change=None if d.change is None else _change_words(d.change, review, url),
        value=value,
        same=value == proposed_text(g),
        rule=_rule_phrase(g, review),
        window=windows.get(g.name, ""),
    )


def _context(
    report: DriftReport, mode: Mode, repo_url: str | None, pull: int | None, cli: str | None
) -> dict[str, object]:
    """What ``templates/drift.md.j2`` prints (see :func:`item_body`)."""
    review = report.review
    windows = {name: phrase for phrase, names in window_groups(review) for name in names}

    def said(gates: Iterable[GateDrift]) -> list[GateWords]:
        return [_words(d, review, windows, repo_url) for d in gates]

    passing = [d for d in report.gates if d.status == "passing"]
    pull_url = f"{repo_url.rstrip('/')}/pull/{pull}" if repo_url and pull is not None else None
    instruction = None if cli is None else cli_instruction(report, cli)
    return {
        "marker": Markdown(drift_marker(report.file)),
        "headline": drift_headline(report),
        "drifting": said(report.drifting),
        "flaky": said(report.flaky),
        "watched": said(d for d in passing if d.failed + d.streak),  # failing, not drifting
        "passing": said(d for d in passing if not d.failed + d.streak),
        "no_data_lines": _no_data_lines(report),
        **regime_context(review, repo_url),
        "mode": mode,
        "pull": None if pull is None else link(Markdown(f"#{pull}"), pull_url),
        "cli": cli is not None,
        "cli_words": None if instruction is None else instruction.words,
        "cli_block": None if instruction is None else command_block(instruction.commands),
        "problems": [prose(p) for p in report.settings.problems],
        "settings": report.settings,
        "config_path": CONFIG_PATH,
    }


Section = tuple[str, list[str]]
"""One section of the body: its name (a block of ``templates/drift.md.j2``) and its lines."""


def drift_sections(
    report: DriftReport,
    *,
    mode: Mode,
    repo_url: str | None,
    pull: int | None = None,
    cli_options: str | None = None,
) -> list[Section]:
    """The sections of ``report``'s body in order, the empty ones left out (the blocks of
    ``templates/drift.md.j2``): ``headline``; ``drifting`` (per drifting gate: what CI checks,
    failures and streak, since when and the change it is tied to with its PRs, the rule's new
    value and how it is computed); ``regimes`` (the table, when a gate drifts);
    ``instruction`` (what to do); ``flaky``; ``others`` (failing too little to drift,
    passing, no data); ``problems`` (the drift settings that fell back); ``footer`` (the
    App's).  ``pull`` and ``cli_options`` as for :func:`item_body`."""
    context = _context(report, mode, repo_url, pull, cli_options)
    return [
        (name, text.splitlines())
        for name, text in render_blocks("drift.md.j2", context)
        if text.strip()
    ]


def item_body(
    report: DriftReport,
    *,
    mode: Mode,
    repo_url: str | None,
    pull: int | None = None,
    cli_options: str | None = None,
) -> str:
    """The Markdown body of ``report``'s issue (``mode`` ``issue``) or rebaseline PR
    (``templates/drift.md.j2``), starting with :func:`drift_marker`, then the sections of
    :func:`drift_sections`; cut to GitHub's size limit with a note.
    ``pull``: in an issue, the rebaseline PR opened for it (named instead of ``/rebaseline``).
    ``cli_options``: worded for the command line instead (``threshold-bot rebaseline`` with
    these options, shell-quoted, in a block to copy), without the App's footer.
    """
    context = _context(report, mode, repo_url, pull, cli_options)
    return truncate(render_markdown("drift.md.j2", context), GITHUB_TEXT_LIMIT, _TRUNCATED)


def closing_comment(reason: Literal["passing", "merged"], *, pull: int | None = None) -> str:
    """The comment an item is closed with: every gate passes again, or the PR was merged."""
    if reason == "merged":
        named = f"#{pull}" if pull is not None else "The rebaseline"
        return f"{named} merged the rule's values: closing. A new drift opens a new item."
    return (
        "Every gate of this file passes its newest runs again: closing."
        " A new drift opens a new item."
    )


# --------------------------------------------------------------------------- JSON


def _gate_json(d: GateDrift) -> dict[str, object]:
    g = d.gate
    change = None
    if d.change is not None:
        change = {"at": d.change.at.isoformat(), "pulls": list(d.change.pulls)}
    return {
        "name": g.name,
        "file": g.file,
        "line": g.line,
        "metric": g.metric,
        "op": g.op,
        "kind": g.kind,
        "value": proposed_text(g),
        "status": d.status,
        "reason": d.reason,
        "no_data_reason": g.no_data_reason if d.status == "no_data" else None,
        "failed": d.failed,
        "total": d.total,
        "failure_rate": None if not d.total else round(d.failed / d.total, 4),
        "streak": d.streak,
        "since": d.since.isoformat() if d.since else None,
        "change": change,
        "new_value": None if g.recomputed is None else format_literal(g.recomputed, g.decimals),
    }


def drift_json(reports: Sequence[DriftReport]) -> str:
    """The reports as JSON (docs/drift.md): per file its settings, their problems and each
    gate's status, with the worst ``conclusion`` and, in all, the number of ``drifting``
    gates and of gates with ``no_data``."""
    files = []
    for report in reports:
        s = report.settings
        settings = s.model_dump(mode="json", exclude={"problems"}) | {"window": str(s.window)}
        files.append(
            {
                "file": report.file,
                "settings": settings,
                "problems": list(s.problems),
                "gates": [_gate_json(d) for d in report.gates],
            }
        )
    severity = ("success", "neutral", "action_required")
    data = {
        "conclusion": max((r.conclusion for r in reports), key=severity.index, default="success"),
        "drifting": sum(len(r.drifting) for r in reports),
        "no_data": sum(len(r.no_data) for r in reports),
        "files": files,
    }
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
