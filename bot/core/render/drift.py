"""The drift watch's words: the issue or PR body, its titles, branch, marker and JSON (pure).

One item per threshold file, found again by :func:`drift_marker` (its first line).  Outside
text (file, gate and metric names, PR titles, the config's values) is escaped; the regime
table and a gate's cells are the PR comment's (``bot.core.render.view``).  See docs/drift.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Literal
from urllib.parse import quote

from bot.core.analysis.drift import DriftReport, GateDrift
from bot.core.config import CONFIG_PATH
from bot.core.formatting import day_month_year, plural
from bot.core.models import Change, GateReview, Review
from bot.core.render.conditions import rule_text
from bot.core.render.gates import metric_cell, proposed_text, where
from bot.core.render.markdown import Markdown, code, escape, join, link, truncate
from bot.core.render.review import FOLD_REGIMES, GITHUB_TEXT_LIMIT, cli_rebaseline_commands
from bot.core.render.view import (
    MAX_PULLS,
    TREND_KEY,
    gate_rule,
    prose,
    pull_link,
    regime_metrics,
    regime_notes,
    regime_rows,
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


def _rule_phrase(g: GateReview, review: Review) -> str:
    """How the rule computes ``g``'s value: ``by minmax, 5% allowance: the window's minimum
    less 5% of its magnitude, rounded down`` (the gate's own model, ``gate_rule``)."""
    if g.kind == "reference":
        return f"the window's {review.rule.reference}, at the literal's decimals"
    rule = gate_rule(g, review)
    lower, upper = side_phrases(rule)
    if rule.model.name == "absolute":
        return f"by {rule.describe_model()}: {lower if g.op in ('>=', '>') else upper}"
    if g.op in (">=", ">"):
        return f"by {rule.describe_model()}: {lower}, rounded down"
    return f"by {rule.describe_model()}: {upper}, rounded up"


def _condition(g: GateReview) -> Markdown:
    """``metric ≥ 0.32`` (a limit), ``metric ≈ 0.95 ±8% (≥ 0.874)`` (a reference)."""
    cell = metric_cell(g)
    return cell if g.kind == "reference" else Markdown(f"{cell} {escape(proposed_text(g))}")


def _drifting(d: GateDrift, review: Review, windows: dict[str, str], url: str | None) -> str:
    g = d.gate
    lines = [
        f"#### {code(g.name)}: {_condition(g)}",
        "",
        f"- Where: {where(g)}.",
        f"- {escape(d.reason[:1].upper() + d.reason[1:])}.",
    ]
    if d.change is not None:
        lines.append(f"- Tied to {_change_words(d.change, review, url)}.")
    if g.recomputed is None:
        lines.append("- The rule gives no value: no run of its window has the metric.")
    else:
        value = rule_text(g)
        same = (
            " (the value it has: the window does not move it)" if value == proposed_text(g) else ""
        )
        window = windows.get(g.name, "")
        lines.append(
            f"- The rule's new value: **{escape(value)}**{same}, {_rule_phrase(g, review)},"
            f" over {escape(window)}."
        )
    return "\n".join(lines)


def _regimes(review: Review, repo_url: str | None) -> list[str]:
    """The regime table of the PR comment (``partials/regimes.md.j2``)."""
    if not review.regimes:
        return []
    metrics = regime_metrics(review)
    head = "| Period | Runs |" + "".join(f" {code(m)} |" for m in metrics) + " Started by |"
    rule = "|:--|--:|" + "--:|" * len(metrics) + ":--|"
    rows = [
        f"| {r.period} | {r.runs} |" + "".join(f" {m} |" for m in r.medians) + f" {r.started_by} |"
        for r in regime_rows(review, metrics, repo_url)
    ]
    notes = [f"- {note}" for note in regime_notes(review, metrics)]
    key = f"; {TREND_KEY}" if notes else ""
    table = [
        "Medians of each stretch of stable runs; **bold**: moved at the change that started"
        f" it{key}.",
        "",
        head,
        rule,
        *rows,
        *(["", *notes] if notes else []),
    ]
    if len(review.regimes) > FOLD_REGIMES:
        since = day_month_year(review.regimes[0].start)
        summary = f"<details><summary>{len(review.regimes)} regimes since {since}</summary>"
        table = [summary, "", *table, "", "</details>"]
    return ["#### Regimes", "", *table]


def _headline(report: DriftReport) -> str:
    file, drifting, flaky = code(report.file), report.drifting, report.flaky
    judged = plural(len(report.gates), "gate")
    if drifting:
        verb = "keeps" if len(drifting) == 1 else "keep"
        names = join(code(d.gate.name) for d in drifting)
        return (
            f"❌ **{len(drifting)} of {judged} in {file} {verb} failing** the newest runs on the"
            f" default branch: {names}."
        )
    if flaky:
        return f"⚠️ **No gate of {file} drifts**; {len(flaky)} of {judged} fail now and then."
    return f"✅ **No gate of {file} drifts**: {judged} watched."


def _instruction(
    report: DriftReport, mode: Mode, repo_url: str | None, pull: int | None, cli: str | None
) -> list[str]:
    """The one-line "what to do", for the App's item or the command line."""
    if not report.drifting:
        return []
    values = [(d.gate, rule_text(d.gate)) for d in report.drifting if d.gate.recomputed is not None]
    if cli is not None:
        commands = join((code(c) for c in cli_rebaseline_commands(values, cli)), " and ")
        line = (
            f"- Run {commands} to write the rule's values in place with a provenance comment"
            " (`--dry-run` prints the diff and writes nothing)."
        )
    elif mode == "pull_request":
        line = "- Merge this PR to apply them; its own review is the check below."
    elif pull is not None:
        url = f"{repo_url.rstrip('/')}/pull/{pull}" if repo_url else None
        named = link(Markdown(f"#{pull}"), url)
        line = f"- Pull request {named} applies these values: review and merge it."
    else:
        line = "- Comment `/rebaseline` on this issue to open a pull request with these values."
    return ["#### What to do", "", line]


def _flaky(report: DriftReport) -> list[str]:
    if not report.flaky:
        return []
    lines = ["#### Flaky, not rebaselined", ""]
    for d in report.flaky:
        lines.append(
            f"- {code(d.gate.name)} ({_condition(d.gate)}, {where(d.gate)}): {escape(d.reason)}."
        )
    return lines


def _others(report: DriftReport) -> list[str]:
    """Gates failing too few runs to drift (with their reason), then the rest by name."""
    watched = [d for d in report.gates if d.status == "passing" and d.failed + d.streak]
    passing = [d for d in report.gates if d.status == "passing" and not d.failed + d.streak]
    missing = [d for d in report.gates if d.status == "no_data"]
    lines = []
    if watched:
        lines += ["Failing, not (yet) drifting:", ""]
        lines += [f"- {code(d.gate.name)}: {escape(d.reason)}." for d in watched]
        lines.append("")
    if passing:
        lines.append(f"Passing ({len(passing)}): {join(code(d.gate.name) for d in passing)}.")
    if missing:
        named = join(Markdown(f"{code(d.gate.name)} ({code(d.gate.metric)})") for d in missing)
        lines.append(f"No data ({len(missing)}): no finished run has the metric of {named}.")
    return lines


def _problems(report: DriftReport) -> list[str]:
    problems = report.settings.problems
    if not problems:
        return []
    lines = ["#### Drift settings that fell back", "", f"Fix them in {code(CONFIG_PATH)}:", ""]
    return lines + [f"- {prose(p)}" for p in problems]


def item_body(
    report: DriftReport,
    *,
    mode: Mode,
    repo_url: str | None,
    pull: int | None = None,
    cli_options: str | None = None,
) -> str:
    """The Markdown body of ``report``'s issue (``mode`` ``issue``) or rebaseline PR,
    starting with :func:`drift_marker`; cut to GitHub's size limit with a note.

    Per drifting gate: what CI checks, failures and streak, since when and the change it is
    tied to with its PRs, the rule's new value and how it is computed; then the regime table,
    one line of what to do, the flaky gates, the rest, and the drift settings that fell back.
    ``pull``: in an issue, the rebaseline PR opened for it (named instead of ``/rebaseline``).
    ``cli_options``: worded for the command line instead (``threshold-bot rebaseline`` with
    these options, shell-quoted), without the App's footer.
    """
    review = report.review
    windows = {name: phrase for phrase, names in window_groups(review) for name in names}
    blocks: list[str] = [f"{drift_marker(report.file)}\n{_headline(report)}"]
    blocks += [_drifting(d, review, windows, repo_url) for d in report.drifting]
    if report.drifting:
        blocks.append("\n".join(_regimes(review, repo_url)))
    blocks.append("\n".join(_instruction(report, mode, repo_url, pull, cli_options)))
    blocks.append("\n".join(_flaky(report)))
    blocks.append("\n".join(_others(report)))
    blocks.append("\n".join(_problems(report)))
    if cli_options is None:
        s = report.settings
        blocks.append(
            f"<sub>Watched by threshold-bot on the default branch: min_failures {s.min_failures},"
            f" window {escape(str(s.window))}. This {'issue' if mode == 'issue' else 'PR'} updates"
            " itself as runs arrive and is closed when every gate passes again; settings:"
            f" `drift:` in {code(CONFIG_PATH)}.</sub>"
        )
    text = "\n\n".join(b for b in blocks if b) + "\n"
    return truncate(text, GITHUB_TEXT_LIMIT, _TRUNCATED)


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
