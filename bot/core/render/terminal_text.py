"""The review's words as plain terminal text: outside text made safe to print (``plain``),
the view model's Markdown unmarked (``unmark``), and the phrases only the terminal uses
(a gate's verdict without its icon, the "what to do" in command-line words).

Pure text over ``Review``; the layout is ``bot.core.render.terminal``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.core.analysis.verdicts import needs_action
from bot.core.models import GateReview, Review
from bot.core.render.review import cli_rebaseline_commands, cli_rebaseline_words, cli_wording
from bot.core.render.shell import Argv
from bot.core.render.view import attention_words, is_audit, rule_values, unverified
from bot.core.render.view import verdict_words as view_verdict_words

# ESC or C1 introducers: OSC/DCS/SOS/PM/APC strings up to BEL or ST (or the end), CSI
# sequences, other two-character escapes; then every other C0/C1 control character except
# newline and tab, and the bidi overrides that reorder what the terminal shows.
_TERMINAL_CONTROLS = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)

# What bot.core.render.markdown writes around text: a backslash escape (its character
# kept), the zero-width space it inserts, code and bold marks, a link's brackets and target.
_MARKS = re.compile(r"\\(.)|&#8203;|</?code>|\*\*|\]\([^)\s]*\)|\[", re.DOTALL)


def plain(text: str) -> str:
    """``text`` without terminal escape sequences or control characters (newline and tab
    kept): printed, it cannot retitle the window, clear the screen or move the cursor."""
    return _TERMINAL_CONTROLS.sub("", text)


def unmark(markdown: str) -> str:
    """Markdown built by ``bot.core.render.markdown`` (escaped outside text, ``<code>``,
    bold, links) as the plain text it shows, safe to print (``plain``)."""
    return plain(_MARKS.sub(lambda m: m.group(1) or "", markdown))


def for_cli(review: Review) -> Review:
    """``review`` with its history error and warnings in the command line's words, and the
    outside text that reaches the terminal through the view's Markdown (PR titles, history
    sources) already ``plain``: an escape sequence is dropped whole, not left half-escaped."""
    update: dict[str, object] = {
        "warnings": tuple(cli_wording(w) for w in review.warnings),
        "pulls": {
            n: ref.model_copy(update={"title": plain(ref.title)}) for n, ref in review.pulls.items()
        },
        "gates": tuple(_plain_sources(g) for g in review.gates),
    }
    if review.error:
        update["error"] = cli_wording(review.error)
    return review.model_copy(update=update)


def _plain_sources(g: GateReview) -> GateReview:
    declared = g.declared_source
    if declared is not None:
        fields = ("entity", "project", "path", "experiment")
        declared = declared.model_copy(
            update={f: plain(v) for f in fields if isinstance(v := getattr(declared, f), str)}
        )
    return g.model_copy(update={"source": plain(g.source), "declared_source": declared})


def verdict_words(g: GateReview, audit: bool = False) -> str:
    """The verdict cell of the comment without its icon: ``too tight``, ``cannot be verified``
    (``audit``: ``is_audit``, the gates as they are: ``passing``, ``failing``)."""
    if g.proposed_source or (g.verdict == "no_data" and needs_action(g)):
        return attention_words(g, audit)
    return view_verdict_words(g, audit)


@dataclass(frozen=True)
class Action:
    """One item of what to do: its words, and the commands it shows for copying."""

    words: str
    commands: tuple[Argv, ...] = ()


def _no_data_items(missing: dict[str, list[GateReview]]) -> list[str]:
    """What to do for the gates without data (:func:`unverified`), by why they have none."""
    items = []
    if gates := missing.get("empty_history"):
        items.append(
            f"Nothing to check {', '.join(g.name for g in gates)} against: the history is"
            " empty. Fix the history source, or review again once runs are recorded."
        )
    if gates := missing.get("no_finished_runs"):
        items.append(
            f"Nothing to check {', '.join(g.name for g in gates)} against: the history has no"
            " finished run, and only finished runs are judged. Review again once one has"
            " finished."
        )
    if gates := missing.get("not_numbers"):
        named = "; ".join(f"{g.name} reads {g.metric}" for g in gates)
        items.append(
            f"Record numbers for the metric of each gate whose values are not numbers: {named}."
            " Fix what writes the history: a number per run, or no value at all rather than"
            " text."
        )
    if gates := missing.get("metric"):
        named = "; ".join(
            f"{g.name} reads {g.metric}"
            + (f" (the history has {', '.join(g.closest_keys)})" if g.closest_keys else "")
            for g in gates
        )
        items.append(
            f"Check the metric of each gate without data: {named}. Fix the metric name or"
            " the history source; a metric only new runs log is checked once they do."
        )
    return items


def actions(review: Review, cli_options: str) -> list[Action]:
    """What a command-line user does next, one item each: edit ``NAME = value`` at
    ``file:line``, or run ``threshold-bot rebaseline --file F`` with ``cli_options`` (the
    review's history and rule options, shell-quoted) to write the rule's values of exactly
    the gates that need it."""
    fixes = rule_values(review, flagged_only=True)
    every = rule_values(review, flagged_only=False)
    missing = unverified(review)
    items: list[str | Action] = []
    if review.error:
        items.append(
            "Nothing was checked: the run history could not be read."
            " Run the review again once it can be."
        )
    items += _no_data_items(missing)
    if fixes:
        edits = "\n".join(f"{g.name} = {value} at {g.file}:{g.line}" for g, value in fixes)
        items.append(f"To follow the rule, edit\n{edits}")
        commands = cli_rebaseline_commands(fixes, cli_options)
        items.append(Action(unmark(cli_rebaseline_words(fixes, every)), tuple(commands)))
        values = "current" if is_audit(review) else "proposed"
        items.append(
            f"Or keep the {values} values; --window regime or --window since:YYYY-MM-DD"
            " checks them against another window."
        )
    elif review.conclusion == "success":
        items.append("Nothing: the thresholds fit the recent runs.")
    elif not review.gates and review.hints:
        items.append(
            'Declare the values under "Not checked" that are thresholds in'
            " .github/threshold-bot.yml (the config lines above), or mark a placeholder"
            " # threshold-bot: ignore."
        )
    elif not review.error and not missing:
        items.append("Fix what the notes above name.")
    return [_plain_action(i if isinstance(i, Action) else Action(i)) for i in items]


def _plain_action(action: Action) -> Action:
    """``action`` safe to print: its words and each command's arguments ``plain``."""
    commands = tuple(tuple(plain(word) for word in command) for command in action.commands)
    return Action(plain(action.words), commands)
