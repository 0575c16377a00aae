"""Plan a ``/rebaseline``: which literals change, to what, and the file's new text.

Pure: the caller builds the ``Review`` (with the command's window and allowance,
and regime changes already attributed to PRs) and hands over the file text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from bot.adapters.github.api import PullInfo
from bot.core.commands import Command
from bot.core.config import CONFIG_PATH
from bot.core.formatting import percent
from bot.core.models import Frozen, Gate, GateReview, Review, RuleSettings, ThresholdFile
from bot.core.render.conditions import tolerance_text
from bot.core.thresholds.edit import replace_spans
from bot.features.rebaseline.literals import (
    GateEdit,
    PointValues,
    ToleranceNeed,
    ToleranceNote,
    agree,
    coupled_edits,
    limit_edit,
    merge_needs,
    reference_edits,
    tolerance_edit,
    tolerance_needs,
)
from bot.features.rebaseline.provenance import (
    GateId,
    Provenance,
    model_words,
    supports_comments,
    write_provenance,
)

__all__ = [
    "FilePlan",
    "GateEdit",
    "GateKey",
    "RebaselineResult",
    "commit_message",
    "gate_key",
    "limit_gates",
    "plan_file",
    "rule_for",
    "unknown_gates",
]


class FilePlan(Frozen):
    """What ``/rebaseline`` does to one threshold file."""

    path: str
    edits: tuple[GateEdit, ...] = ()
    text: str = ""  # the new file text (unchanged when there are no edits)
    no_data: tuple[str, ...] = ()  # named or eligible gates without data in the window
    provenance_written: bool = False
    ignored: tuple[str, ...] = ()  # placeholders the command named: never rewritten
    tolerances: tuple[ToleranceNote, ...] = ()  # tolerances too tight, left as they are


Mode = Literal["dry_run", "nothing", "committed", "suggested"]


@dataclass(frozen=True)
class RebaselineResult:
    """What ``/rebaseline`` did (or, for a dry run, would do)."""

    mode: Mode
    pull: PullInfo
    rule: RuleSettings
    plans: tuple[FilePlan, ...] = ()
    unknown: tuple[str, ...] = ()  # gate names asked for that the PR's files do not have
    gate_names: tuple[str, ...] = ()  # every gate of the PR's threshold files
    errors: tuple[str, ...] = ()  # threshold files the head leaves unparseable
    history_error: str | None = None
    commits: tuple[str, ...] = ()
    review_id: int | None = None
    manual: tuple[str, ...] = ()  # files whose change is in the review body, as a diff

    @property
    def changed(self) -> tuple[FilePlan, ...]:
        """The plans that change something."""
        return tuple(p for p in self.plans if p.edits)


def rule_for(command: Command, rule: RuleSettings) -> RuleSettings:
    """The repository rule with the command's ``--window`` / ``--allowance`` applied.

    A ``ValueError`` (its text for the reply) when ``--allowance`` is over the rule's
    ``max_allowance``.
    """
    if command.allowance is not None and command.allowance > rule.max_allowance:
        raise ValueError(
            f"`--allowance {percent(command.allowance)}` is over this repository's cap of "
            f"{percent(rule.max_allowance)} (`rule.max_allowance` in `{CONFIG_PATH}`)"
        )
    update: dict[str, object] = {}
    if command.window is not None:
        update["window"] = command.window
    if command.allowance is not None:
        rule = rule.with_allowance(command.allowance)
    return rule.model_copy(update=update)


def unknown_gates(command: Command, files: Sequence[ThresholdFile]) -> list[str]:
    """Gate names the command asks for that no threshold file of the PR has."""
    known = {gate.name for tf in files for gate in tf.gates}
    return [name for name in command.gates if name not in known]


GateKey = tuple[str, str, str, str]
"""A gate's file, name, metric and operator: how a gate and its review are paired."""


def gate_key(gate: Gate | GateReview) -> GateKey:
    """The key that pairs a gate with its review (and a curve with its steps' values)."""
    return gate.file, gate.name, gate.metric, gate.op


@dataclass
class _Edits:
    """The edits of one file as they are planned, and what is left alone."""

    edits: list[GateEdit] = field(default_factory=list)
    no_data: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    needs: list[ToleranceNeed] = field(default_factory=list)
    notes: list[ToleranceNote] = field(default_factory=list)

    def add(self, edits: Sequence[GateEdit]) -> None:
        """Add ``edits``, except of a literal already edited (a gate's own value first)."""
        taken = {(e.target.start, e.target.end) for e in self.edits}
        self.edits += [e for e in edits if (e.target.start, e.target.end) not in taken]


def _plan_literal(
    plan: _Edits,
    gates: Sequence[Gate],
    reviews: Mapping[GateKey, GateReview],
    command: Command,
    points: Mapping[GateKey, PointValues],
    digits: int,
) -> None:
    """Plan the edits of one literal and of the literals that depend on it."""
    gate = gates[0]
    found = [reviews.get(gate_key(g)) for g in gates]
    if any(r is None or r.recomputed is None for r in found):
        plan.no_data.append(gate.name)
        return
    if all(g.kind == "limit" for g in gates):  # a step check (one point) is a limit too
        edit = limit_edit(gates, found)
        plan.add([edit] if edit else [])
        if edit:
            plan.add(coupled_edits(gate, edit.new))
        return
    review = found[0]
    assert review is not None  # checked above
    edits = reference_edits(gate, review, points.get(gate_key(gate)), digits)
    if edits is None:
        plan.no_data.append(gate.name)
        return
    if len(gates) > 1 and not agree(gates, found):
        return  # one reference literal, several gates whose rules disagree: left alone
    plan.add(edits)
    needs, note = tolerance_needs(gate, review)
    if needs and not command.tolerance:
        needed = tolerance_text(review.recomputed_tolerance)
        note = ToleranceNote(gate=gate.name, needed=needed, reason="not_asked")
    elif needs:
        plan.needs += needs
    if note is not None:
        plan.notes.append(note)


def plan_file(
    tf: ThresholdFile,
    text: str,
    review: Review,
    command: Command,
    *,
    today: date,
    by: str | None = None,
    points: Mapping[GateKey, PointValues] | None = None,
    via: str = "/rebaseline",
) -> FilePlan:
    """The edits for one file: the named gates, or every gate the rule would change.

    A variable compared against several metrics is one literal: it gets the most permissive
    of their rule values, and is left alone when it is a lower bound of one metric and an
    upper bound of another.  A reference gate gets the rule's reference; a golden curve the
    rule's value at each step (``points``, by :func:`gate_key`; without them it is left
    alone); coupled literals follow their gate; with ``--tolerance``, a tolerance written
    in the file is widened to the one the window needs.  Placeholders are never rewritten.
    ``via`` names what rebaselined in the provenance comment (the App's command by default).
    """
    reviews = {gate_key(g): g for g in review.gates}
    wanted = set(command.gates)
    plan = _Edits()
    by_literal: dict[tuple[int, int], list[Gate]] = {}
    for gate in tf.gates:
        if wanted and gate.name not in wanted:
            continue
        if gate.ignored:
            if gate.name in wanted:
                plan.ignored.append(gate.name)
            continue
        by_literal.setdefault((gate.start, gate.end), []).append(gate)
    digits = review.rule.significant_digits
    for gates in by_literal.values():
        _plan_literal(plan, gates, reviews, command, points or {}, digits)
    for need in merge_needs(plan.needs):
        widened = tolerance_edit(need, digits)
        if isinstance(widened, ToleranceNote):
            plan.notes.append(widened)
        elif widened is not None:
            plan.add([widened])
    unchanged = FilePlan(
        path=tf.path,
        text=text,
        no_data=tuple(plan.no_data),
        ignored=tuple(dict.fromkeys(plan.ignored)),
        tolerances=tuple(plan.notes),
    )
    if not plan.edits:
        return unchanged
    new_text = replace_spans(tf.path, text, [e.span_edit() for e in plan.edits])
    written = supports_comments(tf.path)
    if written:
        new_text = _with_provenance(new_text, plan.edits, reviews, review, today, by, via)
    update = {"edits": tuple(plan.edits), "text": new_text, "provenance_written": written}
    return unchanged.model_copy(update=update)


def _with_provenance(
    text: str,
    edits: Sequence[GateEdit],
    reviews: Mapping[GateKey, GateReview],
    review: Review,
    today: date,
    by: str | None,
    via: str,
) -> str:
    first = min(edits, key=lambda e: e.target.line)
    window = reviews[gate_key(first.gate)].window
    references = any(e.is_reference for e in edits)
    limits = not all(e.is_reference for e in edits)
    prov = Provenance(
        rule=review.rule,
        gates=limit_gates(edits),
        window_first=window.first,
        window_last=window.last,
        runs=window.runs,
        on=today,
        by=by,
        changes=review.changes,
        limits=limits,
        reference=review.rule.reference if references else None,
        tolerance=any(e.part.startswith("tolerance") for e in edits),
        via=via,
    )
    return write_provenance(text, prov, first_gate_line=first.target.line)


def limit_gates(edits: Sequence[GateEdit]) -> tuple[GateId, ...]:
    """The limit gates ``edits`` change, each once: the gates whose models the words name."""
    gates = ((e.gate.name, e.gate.metric, e.gate.file) for e in edits if not e.is_reference)
    return tuple(dict.fromkeys(gates))


def commit_message(plans: Sequence[FilePlan], rule: RuleSettings, by: str | None) -> str:
    """A commit message listing every change, with the rule used: the allowance, or each
    gate's model when not every one is the plain minmax (``describe_limits``)."""
    lines = [f"Rebaseline {sum(len(p.edits) for p in plans)} CI threshold(s)", ""]
    for plan in plans:
        for edit in plan.edits:
            lines.append(f"- {plan.path}: {edit.summary}")
    references = any(e.is_reference for p in plans for e in p.edits)
    of = f"; references: the {rule.reference} of the window" if references else ""
    words = model_words(rule, limit_gates([e for p in plans for e in p.edits]))
    lines += ["", f"Rule: {words}, window {rule.window}{of}."]
    if by:
        lines.append(f"Requested with /rebaseline by @{by}.")
    return "\n".join(lines)
