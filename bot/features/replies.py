"""The App's replies to commands and approvals, as Markdown: pure text functions.

Every reply carries a hidden marker naming the delivery and the command it answers,
so a retried delivery edits its reply instead of posting a second one.  Outside text
(gate names, file paths, option text) is escaped with ``bot.core.render.markdown``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from bot.core.commands import CommandProblem
from bot.core.models import RuleSettings
from bot.core.render.markdown import code, escape
from bot.features.rebaseline.plan import FilePlan
from bot.features.rebaseline.suggestions import unified

if TYPE_CHECKING:
    from bot.features.rebaseline.apply import RebaselineResult

_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")
ACTIONS = {"rebaseline": "`/rebaseline`", "approve": "approving thresholds"}
MAX_NAMES = 20  # gate names listed in a hint


def reply_marker(key: str) -> str:
    """The hidden marker of the reply to ``key`` (delivery id and command line)."""
    return f"<!-- threshold-bot:reply {escape(key, 120)} -->"


def mention(login: str) -> str:
    """``@login`` for a well-formed GitHub login, else the escaped text (no mention)."""
    return f"@{login}" if _LOGIN.match(login) else str(escape(login, 60))


def refusal(login: str, action: str, required: str, level: str) -> str:
    """A polite refusal naming the permission ``action`` needs."""
    what = ACTIONS.get(action, escape(action))
    return (
        f"Sorry {mention(login)}, {what} needs **{escape(required)}** permission on this "
        f"repository, and yours is **{escape(level)}**. A maintainer can do it for you."
    )


def problems(found: Sequence[CommandProblem]) -> str:
    """What was wrong with the commands of a comment, with a pointer to the help."""
    lines = ["I could not understand this:", ""]
    for problem in found:
        lines.append(f"- line {problem.line}: {code(problem.text)}: {escape(problem.message)}")
    lines += ["", "`/threshold-bot help` lists the commands and options."]
    return "\n".join(lines)


def describe_rule(rule: RuleSettings) -> str:
    """``5% allowance, window of the last 20 runs``."""
    window = rule.window
    if window.kind == "last":
        span = f"the last {window.runs} runs"
    elif window.kind == "regime":
        span = "the current regime"
    else:
        span = f"runs since {window.since}"
    return f"{rule.allowance_percent} allowance from the min/max of {span}"


_HEADINGS = {
    "dry_run": "**/rebaseline --dry-run**: nothing was committed; this is what would change.",
    "nothing": "**/rebaseline**: nothing to change.",
    "committed": "**/rebaseline**: committed the new values to this PR's branch.",
    "suggested": (
        "**/rebaseline**: the App may not push to this PR's branch, so the new values are "
        "in a review with suggestions."
    ),
}


def rebaseline_reply(result: RebaselineResult) -> str:
    """The reply to ``/rebaseline``: old → new per gate, and what was not done and why."""
    lines = [_HEADINGS[result.mode], ""]
    edits = [(p.path, e) for p in result.changed for e in p.edits]
    if edits:
        lines += ["| file | gate | old → new |", "|---|---|---|"]
        for path, edit in edits:
            change = f"{escape(edit.gate.literal)} → **{escape(edit.new_literal)}**"
            lines.append(f"| {code(path)} | {code(edit.gate.name)} | {change} |")
        lines.append("")
    elif result.plans and result.mode in ("dry_run", "nothing"):
        lines += ["Every gate already has the value the rule gives.", ""]
    lines.append(f"Rule: {describe_rule(result.rule)}.")
    if result.commits:
        shas = ", ".join(sha[:7] for sha in result.commits)
        lines.append(f"Commit{'s' if len(result.commits) > 1 else ''}: {shas}.")
    lines += _notes(result)
    return "\n".join(lines)


def _notes(result: RebaselineResult) -> list[str]:
    notes: list[str] = []
    if result.unknown:
        names = ", ".join(code(n) for n in result.unknown)
        known = sorted(set(result.gate_names))
        more = ", …" if len(known) > MAX_NAMES else ""
        listed = ", ".join(code(n) for n in known[:MAX_NAMES])
        hint = f" (this PR's gates: {listed}{more})" if known else ""
        notes.append(f"- Not found in this PR's threshold files: {names}{hint}.")
    no_data = [(p.path, n) for p in result.plans for n in p.no_data]
    if no_data and not result.history_error:
        names = ", ".join(code(n) for _, n in no_data)
        notes.append(f"- No finished run in the window has the metric of {names}: left as is.")
    if result.history_error:
        notes.append(f"- The run history could not be read: {escape(result.history_error, 300)}")
    for error in result.errors:
        notes.append(f"- Not changed, the file cannot be read: {escape(error, 300)}")
    if not result.plans and not result.errors:
        notes.append("- This PR changes no threshold file.")
    for path in result.manual:
        notes.append(f"- {code(path)}: the change lies outside the PR's diff; see the review.")
    return ["", *notes] if notes else []


def approval_not_applied(login: str, reason: str) -> str:
    """An approval that was stored but does not turn the check green (yet)."""
    return f"{mention(login)}, your approval is recorded, but {reason}"


def suggestion_review(
    plans: Sequence[FilePlan], texts: Mapping[str, str], manual: Sequence[str], by: str | None
) -> str:
    """The body of the review that carries ``/rebaseline``'s suggestions; changes outside
    the PR's diff (``manual``) are shown as a diff to apply by hand."""
    who = f" requested by {mention(by)}" if by else ""
    lines = [
        f"**/rebaseline**{who}: the App may not push to this PR's branch (a fork that does not "
        "allow edits from maintainers), so the new values are suggested here instead.",
    ]
    if len(manual) < len(plans):
        lines.append("Use **Add suggestion to batch** on each, then **Commit suggestions**.")
    for path in manual:
        file_plan = next(p for p in plans if p.path == path)
        lines += ["", f"Outside the PR's diff, apply by hand in {code(path)}:", ""]
        lines.append(unified(path, texts[path], file_plan.text))
    return "\n".join(lines)
