"""Plan a ``/rebaseline``: which literals change, to what, and the file's new text.

Pure: the caller builds the ``Review`` (with the command's window and allowance,
and regime changes already attributed to PRs) and hands over the file text.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from bot.commands import Command
from bot.models import Frozen, Gate, Review, RuleSettings, ThresholdFile
from bot.provenance import Provenance, supports_comments, write_provenance
from bot.thresholds.edit import format_literal, replace_literals


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


def rule_for(command: Command, rule: RuleSettings) -> RuleSettings:
    """The repository rule with the command's ``--window`` / ``--allowance`` applied."""
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


def plan_file(
    tf: ThresholdFile,
    text: str,
    review: Review,
    command: Command,
    *,
    today: date,
    by: str | None = None,
) -> FilePlan:
    """The edits for one file: the named gates, or every gate the rule would change."""
    reviews = {(g.file, g.name): g for g in review.gates}
    wanted = set(command.gates)
    edits: list[GateEdit] = []
    no_data: list[str] = []
    for gate in tf.gates:
        if wanted and gate.name not in wanted:
            continue
        gate_review = reviews.get((gate.file, gate.name))
        if gate_review is None or gate_review.recomputed is None:
            no_data.append(gate.name)
            continue
        new_literal = format_literal(gate_review.recomputed, gate_review.decimals)
        if new_literal != gate.literal and float(new_literal) != gate.value:
            edits.append(GateEdit(gate=gate, new_literal=new_literal, new=float(new_literal)))
    if not edits:
        return FilePlan(path=tf.path, text=text, no_data=tuple(no_data))
    new_text = replace_literals(text, [(e.gate, e.new_literal) for e in edits])
    written = supports_comments(tf.path)
    if written:
        first = min(edits, key=lambda e: e.gate.line)
        window = reviews[(first.gate.file, first.gate.name)].window
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
    lines += ["", f"Rule: {rule.allowance:.0%} allowance, window {rule.window}."]
    if by:
        lines.append(f"Requested with /rebaseline by @{by}.")
    return "\n".join(lines)
