"""The provenance comment that ``/rebaseline`` writes above the gates it changes.

It records what a maintainer would have written by hand: the rule, the window,
the date, how many runs, and the regime changes with the PRs that caused them.
The block is found again by its first line (``# threshold-bot: …``) and replaced
in place, so repeated rebaselines never stack up comments.  Pure text functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime

from bot.core.formatting import iso_date, significant_g
from bot.core.limit_model import LimitModel
from bot.core.models import Change, Frozen, ReferenceStatistic, RuleSettings

PREFIX = "threshold-bot:"
_BLOCK_START = re.compile(r"^(?P<indent>[ \t]*)#[ \t]*threshold-bot:")
_CONTINUATION = re.compile(r"^[ \t]*#[ \t]{2,}\S")
# formats without ``#`` comments: a provenance line would break them
_NO_COMMENTS = (".json", ".jsonl", ".json5", ".ipynb", ".csv", ".tsv")


GateId = tuple[str, str, str]
"""A limit gate's name, metric and file: what ``RuleSettings.for_gate`` matches."""


def _groups(
    rule: RuleSettings, gates: Iterable[GateId], label: Callable[[str], str]
) -> dict[str, list[str]] | None:
    """The models of ``gates`` (by ``describe_model``) with the gates' names; None when
    every gate's model is the plain minmax with one allowance (no gate: ``rule``'s)."""
    named = list(dict.fromkeys(gates))
    rules = [rule.for_gate(*g) for g in named] or [rule]
    if all(r.model == LimitModel() for r in rules) and len({r.allowance for r in rules}) == 1:
        return None
    groups: dict[str, list[str]] = {}
    for (name, _, _), gate_rule in zip(named, rules, strict=False):
        groups.setdefault(gate_rule.describe_model(), []).append(label(name))
    return groups or {rule.describe_model(): []}


def model_words(
    rule: RuleSettings, gates: Sequence[GateId], label: Callable[[str], str] = str
) -> str:
    """The rule of ``gates`` in a few words: ``5% allowance`` when each is the plain minmax
    with one allowance; else the model, or each model with its gates: ``zscore k=3 (A,
    B); minmax, 5% allowance (C)``; ``label`` writes a gate's name (quoted, escaped)."""
    groups = _groups(rule, gates, label)
    if groups is None:
        first = rule.for_gate(*gates[0]) if gates else rule
        return f"{first.allowance_percent} allowance"
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"{model} ({', '.join(names)})" for model, names in groups.items())


def describe_limits(
    rule: RuleSettings, gates: Sequence[GateId], span: str, label: Callable[[str], str] = str
) -> str:
    """How the limits of ``gates`` were set over ``span``: ``5% allowance from the min/max
    of {span}`` (the plain minmax), else ``zscore k=3 over {span}`` (:func:`model_words`)."""
    words = model_words(rule, gates, label)
    if _groups(rule, gates, label) is None:
        return f"{words} from the min/max of {span}"
    return f"{words} over {span}"


class Provenance(Frozen):
    """What the provenance block says."""

    rule: RuleSettings
    window_first: datetime | None
    window_last: datetime | None
    runs: int
    on: date
    by: str | None = None
    changes: tuple[Change, ...] = ()
    limits: bool = True  # a limit changed (the allowance rule)
    gates: tuple[GateId, ...] = ()  # the limit gates changed: their models are named
    # set when a reference gate changed: how its reference was recomputed
    reference: ReferenceStatistic | None = None
    tolerance: bool = False  # a tolerance was widened too (``--tolerance``)
    via: str = "/rebaseline"  # what wrote it: the App's command, or the CLI's


def supports_comments(path: str) -> bool:
    """Whether ``#`` starts a comment in the file's format: not in JSON (nor JSON Lines,
    notebooks) or CSV/TSV tables, where no provenance can be written.  Shell scripts,
    Python, YAML and TOML have ``#`` comments."""
    return not path.lower().endswith(_NO_COMMENTS)


def provenance_lines(prov: Provenance, *, indent: str = "") -> list[str]:
    """The comment lines of a provenance block (without line endings)."""
    rule = prov.rule
    window = rule.window
    if window.kind == "last":
        window_text = f"the last {window.runs} finished runs"
    elif window.kind == "regime":
        window_text = "the finished runs of the current regime"
    else:
        window_text = f"the finished runs since {window.since}"
    span = ""
    if prov.window_first and prov.window_last:
        span = f" ({iso_date(prov.window_first)} .. {iso_date(prov.window_last)})"
    who = f" by {_plain(prov.by)}" if prov.by else ""
    kept = "widened where the runs did not fit" if prov.tolerance else "kept"
    runs = f"{window_text}, {prov.runs} runs{span}"
    lines = [f"{PREFIX} rebaselined {iso_date(prov.on)}{who} with {prov.via}"]
    if prov.limits:
        lines.append(f"  rule: {describe_limits(rule, prov.gates, runs, _plain)}")
        if prov.reference:
            lines.append(f"  references: the {prov.reference} of the same runs; tolerance {kept}")
    elif prov.reference:
        lines.append(f"  rule: references are the {prov.reference} of {runs}; tolerance {kept}")
    if prov.changes:
        lines.append("  regime changes:")
        for change in prov.changes:
            lines.append(f"    {_describe_change(change)}")
    return [f"{indent}# {line}" for line in lines]


def _describe_change(change: Change) -> str:
    pulls = ", ".join(f"#{n}" for n in change.pulls) or "no PR found"
    moved = "; ".join(
        f"{_plain(metric)} {significant_g(shift.before)} -> {significant_g(shift.after)}"
        for metric, shift in list(change.metrics.items())[:3]
    )
    return (
        f"{iso_date(change.at)} ({pulls}): {moved}" if moved else f"{iso_date(change.at)} ({pulls})"
    )


def _plain(text: str) -> str:
    """Keep a comment on one line whatever an external string holds."""
    return " ".join(text.split())[:120]


def find_block(lines: Sequence[str]) -> tuple[int, int] | None:
    """Line range ``[start, end)`` of the existing provenance block, if any."""
    for start, line in enumerate(lines):
        if _BLOCK_START.match(line):
            end = start + 1
            while end < len(lines) and _CONTINUATION.match(lines[end]):
                end += 1
            return start, end
    return None


def write_provenance(text: str, prov: Provenance, *, first_gate_line: int) -> str:
    """Replace the provenance block, or insert one above ``first_gate_line`` (1-based).

    Every other line is kept byte for byte, including the file's line endings.
    """
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    bodies = [line.rstrip("\r\n") for line in lines]
    block = find_block(bodies)
    if block is not None:
        start, end = block
        indent = _BLOCK_START.match(bodies[start]).group("indent")  # type: ignore[union-attr]
    else:
        start = end = max(0, min(first_gate_line - 1, len(lines)))
        while start > 0 and bodies[start - 1].endswith("\\"):
            start = end = start - 1  # never between a line and its continuation
        target = bodies[start] if start < len(bodies) else ""
        indent = target[: len(target) - len(target.lstrip(" \t"))]
    new = [line + newline for line in provenance_lines(prov, indent=indent)]
    return "".join(lines[:start] + new + lines[end:])
