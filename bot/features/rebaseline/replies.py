"""Replies of ``/rebaseline``, as Markdown: old → new per gate, and the suggestion review.

Pure text functions; outside text (gate names, paths, errors) is escaped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from bot.core.config import CONFIG_PATH
from bot.core.models import RuleSettings
from bot.core.render.markdown import code, escape
from bot.features.rebaseline.literals import GateEdit, ToleranceNote
from bot.features.rebaseline.plan import FilePlan, RebaselineResult, limit_gates
from bot.features.rebaseline.provenance import GateId, describe_limits
from bot.features.rebaseline.suggestions import unified
from bot.features.replies import mention

MAX_NAMES = 20  # gate names listed in a hint
MAX_STEPS = 5  # steps of one golden curve listed in the reply (the rest are counted)


def describe_rule(rule: RuleSettings, gates: Sequence[GateId] = ()) -> str:
    """``5% allowance from the min/max of the last 20 runs``; the models of ``gates`` (the
    limit gates changed) when not every one is the plain minmax (``describe_limits``)."""
    window = rule.window
    if window.kind == "last":
        span = f"the last {window.runs} runs"
    elif window.kind == "regime":
        span = "the current regime"
    else:
        span = f"runs since {window.since}"
    return describe_limits(rule, gates, span, code)


def _rows(path: str, edits: Sequence[GateEdit]) -> list[str]:
    """The table rows of one file's edits: at most ``MAX_STEPS`` steps of each curve, then
    how many more."""
    total = Counter(e.gate.name for e in edits if e.part.startswith("step "))
    seen: Counter[str] = Counter()
    rows: list[str] = []
    for edit in edits:
        name = edit.gate.name
        if edit.part.startswith("step "):
            seen[name] += 1
            if seen[name] > MAX_STEPS:
                if seen[name] == MAX_STEPS + 1:
                    more = f"and {total[name] - MAX_STEPS} more steps"
                    rows.append(f"| {code(path)} | {code(name)} | {more} |")
                continue
        what = f"{code(name)} {escape(edit.part)}" if edit.part else code(name)
        change = f"{escape(edit.old_literal)} → **{escape(edit.new_literal)}**"
        rows.append(f"| {code(path)} | {what} | {change} |")
    return rows


_TOLERANCE_NOTES = {
    "not_asked": "is too tight for the window (the rule needs {needed}); "
    "`/rebaseline --tolerance` also widens it",
    "config": "is not written in the threshold file (the config or its default sets it): "
    "change it to {needed} in `" + CONFIG_PATH + "`",
    "unwritable": "is written in a form /rebaseline cannot rewrite: change it to {needed} by hand",
}


def _tolerance_note(path: str, note: ToleranceNote) -> str:
    what = _TOLERANCE_NOTES[note.reason].format(needed=escape(note.needed))
    return f"- The tolerance of {code(note.gate)} ({code(path)}) {what}."


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
    if result.changed:
        lines += ["| file | gate | old → new |", "|---|---|---|"]
        for plan in result.changed:
            lines += _rows(plan.path, plan.edits)
        lines.append("")
    elif result.plans and result.mode in ("dry_run", "nothing"):
        lines += ["Every gate already has the value the rule gives.", ""]
    references = ""
    if any(e.is_reference for p in result.changed for e in p.edits):
        references = f"; references: the {result.rule.reference} of the same runs"
    gates = limit_gates([e for p in result.changed for e in p.edits])
    lines.append(f"Rule: {describe_rule(result.rule, gates)}{references}.")
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
    ignored = [(p.path, n) for p in result.plans for n in p.ignored]
    if ignored:
        names = ", ".join(code(n) for _, n in ignored)
        notes.append(f"- Placeholders, never rewritten: {names}.")
    notes += [_tolerance_note(p.path, n) for p in result.plans for n in p.tolerances]
    if result.history_error:
        notes.append(f"- The run history could not be read: {escape(result.history_error, 300)}")
    for error in result.errors:
        notes.append(f"- Not changed, the file cannot be read: {escape(error, 300)}")
    if not result.plans and not result.errors:
        notes.append("- This PR changes no threshold file.")
    for path in result.manual:
        notes.append(f"- {code(path)}: the change lies outside the PR's diff; see the review.")
    return ["", *notes] if notes else []


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
