"""Plan a ``/rebaseline``: which literals change, to what, and the file's new text.

Pure: the caller builds the ``Review`` (with the command's window and allowance,
and regime changes already attributed to PRs) and hands over the file text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Literal

from bot.adapters.github.api import PullInfo
from bot.core.commands import Command
from bot.core.config import CONFIG_PATH
from bot.core.formatting import percent
from bot.core.models import Frozen, Gate, GateReview, Review, RuleSettings, ThresholdFile
from bot.core.thresholds.edit import format_literal, replace_literals
from bot.features.rebaseline.provenance import Provenance, supports_comments, write_provenance


class GateEdit(Frozen):
    """One literal to rewrite."""

    gate: Gate
    new_literal: str
    new: float

    @property
    def summary(self) -> str:
        """``NAME: 0.56 → 0.50`` for replies and commit messages."""
        return f"{self.gate.name}: {self.gate.literal} → {self.new_literal}"


class FilePlan(Frozen):
    """What ``/rebaseline`` does to one threshold file."""

    path: str
    edits: tuple[GateEdit, ...] = ()
    text: str = ""  # the new file text (unchanged when there are no edits)
    no_data: tuple[str, ...] = ()  # named or eligible gates without data in the window
    provenance_written: bool = False


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
        update["allowance"] = command.allowance
    return rule.model_copy(update=update)


def unknown_gates(command: Command, files: Sequence[ThresholdFile]) -> list[str]:
    """Gate names the command asks for that no threshold file of the PR has."""
    known = {gate.name for tf in files for gate in tf.gates}
    return [name for name in command.gates if name not in known]


def _key(gate: Gate | GateReview) -> tuple[str, str, str, str]:
    return gate.file, gate.name, gate.metric, gate.op


def plan_file(
    tf: ThresholdFile,
    text: str,
    review: Review,
    command: Command,
    *,
    today: date,
    by: str | None = None,
) -> FilePlan:
    """The edits for one file: the named gates, or every gate the rule would change.

    A variable compared against several metrics is one literal: it gets the most permissive
    of their rule values, and is left alone when it is a lower bound of one metric and an
    upper bound of another.
    """
    reviews = {_key(g): g for g in review.gates}
    wanted = set(command.gates)
    by_literal: dict[tuple[int, int], list[Gate]] = {}
    for gate in tf.gates:
        if not wanted or gate.name in wanted:
            by_literal.setdefault((gate.start, gate.end), []).append(gate)
    edits: list[GateEdit] = []
    no_data: list[str] = []
    for gates in by_literal.values():
        gate = gates[0]
        found = [reviews.get(_key(g)) for g in gates]
        literals = [
            format_literal(r.recomputed, r.decimals)
            for r in found
            if r is not None and r.recomputed is not None
        ]
        if len(literals) < len(gates):
            no_data.append(gate.name)
            continue
        if len({g.is_lower_bound for g in gates}) > 1:
            continue
        # the most permissive value passes every window of the literal's gates
        new_literal = (min if gate.is_lower_bound else max)(literals, key=float)
        if new_literal != gate.literal and float(new_literal) != gate.value:
            edits.append(GateEdit(gate=gate, new_literal=new_literal, new=float(new_literal)))
    if not edits:
        return FilePlan(path=tf.path, text=text, no_data=tuple(no_data))
    new_text = replace_literals(text, [(e.gate, e.new_literal) for e in edits])
    written = supports_comments(tf.path)
    if written:
        first = min(edits, key=lambda e: e.gate.line)
        window = reviews[_key(first.gate)].window
        prov = Provenance(
            rule=review.rule,
            window_first=window.first,
            window_last=window.last,
            runs=window.runs,
            on=today,
            by=by,
            changes=review.changes,
        )
        new_text = write_provenance(new_text, prov, first_gate_line=first.gate.line)
    return FilePlan(
        path=tf.path,
        edits=tuple(edits),
        text=new_text,
        no_data=tuple(no_data),
        provenance_written=written,
    )


def commit_message(plans: Sequence[FilePlan], rule: RuleSettings, by: str | None) -> str:
    """A commit message listing every change, with the rule used."""
    lines = [f"Rebaseline {sum(len(p.edits) for p in plans)} CI threshold(s)", ""]
    for plan in plans:
        for edit in plan.edits:
            lines.append(f"- {plan.path}: {edit.summary}")
    lines += ["", f"Rule: {rule.allowance_percent} allowance, window {rule.window}."]
    if by:
        lines.append(f"Requested with /rebaseline by @{by}.")
    return "\n".join(lines)
