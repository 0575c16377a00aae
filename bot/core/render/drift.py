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
from bot.core.render.loader import render_markdown
from bot.core.render.markdown import Markdown, escape, link, truncate
from bot.core.render.review import GITHUB_TEXT_LIMIT, cli_rebaseline_commands, regime_context
from bot.core.render.view import (
    MAX_PULLS,
    gate_rule,
    prose,
    pull_link,
    side_phrases,
    window_groups,
)
from bot.core.thresholds.edit import format_literal

__all__ = [
    "DRIFT_MARKER_PREFIX",
    "branch_name",
    "closing_comment",
    "drift_json",
    "drift_marker",
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


def item_body(
    report: DriftReport,
    *,
    mode: Mode,
    repo_url: str | None,
    pull: int | None = None,
    cli_options: str | None = None,
) -> str:
    """The Markdown body of ``report``'s issue (``mode`` ``issue``) or rebaseline PR
    (``templates/drift.md.j2``), starting with :func:`drift_marker`; cut to GitHub's size
    limit with a note.

    Per drifting gate: what CI checks, failures and streak, since when and the change it is
    tied to with its PRs, the rule's new value and how it is computed; then the regime table,
    one line of what to do, the flaky gates, the rest, and the drift settings that fell back.
    ``pull``: in an issue, the rebaseline PR opened for it (named instead of ``/rebaseline``).
    ``cli_options``: worded for the command line instead (``threshold-bot rebaseline`` with
    these options, shell-quoted), without the App's footer.
    """
    review = report.review
    windows = {name: phrase for phrase, names in window_groups(review) for name in names}

    def said(gates: Iterable[GateDrift]) -> list[GateWords]:
        return [_words(d, review, windows, repo_url) for d in gates]

    passing = [d for d in report.gates if d.status == "passing"]
    values = [(d.gate, rule_text(d.gate)) for d in report.drifting if d.gate.recomputed is not None]
    pull_url = f"{repo_url.rstrip('/')}/pull/{pull}" if repo_url and pull is not None else None
    context: dict[str, object] = {
        "marker": Markdown(drift_marker(report.file)),
        "file": report.file,
        "judged": plural(len(report.gates), "gate"),
        "drifting": said(report.drifting),
        "flaky": said(report.flaky),
        "watched": said(d for d in passing if d.failed + d.streak),  # failing, not drifting
        "passing": said(d for d in passing if not d.failed + d.streak),
        "missing": said(d for d in report.gates if d.status == "no_data"),
        **regime_context(review, repo_url),
        "mode": mode,
        "pull": None if pull is None else link(Markdown(f"#{pull}"), pull_url),
        "cli": cli_options is not None,
        "cli_commands": [] if cli_options is None else cli_rebaseline_commands(values, cli_options),
        "problems": [prose(p) for p in report.settings.problems],
        "settings": report.settings,
        "config_path": CONFIG_PATH,
    }
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
    gate's status, with ``drifting``, the number of drifting gates in all."""
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
    data = {"drifting": sum(len(r.drifting) for r in reports), "files": files}
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
