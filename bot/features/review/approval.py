"""Maintainer approval of a PR's gate values: when it turns the check green.

An approval is tied to the gate values it approved.  ``apply_approval`` is the pure
decision used when the review is published: an ``action_required`` review becomes
``success`` while the head's gate values equal the approved ones; any change to a
value (a later push) makes it ``action_required`` again, without deleting the
approval.  Pure: the store (``bot.adapters.store.approvals``) keeps the approvals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from bot.core.formatting import iso_date
from bot.core.models import Conclusion, Gate, ThresholdFile
from bot.features.replies import mention


class ApprovalLike(Protocol):
    """What the decision needs of a stored approval (``bot.adapters.store.approvals.Approval``)."""

    @property
    def approver(self) -> str:
        """The login of the user who approved."""
        ...

    @property
    def approved_at(self) -> datetime:
        """When they approved."""
        ...

    @property
    def gate_values(self) -> dict[str, float]:
        """The approved values, keyed by ``gate_key``."""
        ...


ApprovalLookup = Callable[[str, int], ApprovalLike | None]
"""``(repo, pr_number) -> the newest approval of that PR, or None``."""


def gate_key(gate: Gate) -> str:
    """The key of one gate in an approval's ``gate_values``: its file, name, metric, operator
    and history source (``file:name|metric op|source``), so that an approval covers exactly
    what the gate checks and where its runs come from; any change needs a new approval."""
    source = gate.source.key() if gate.source is not None else "-"
    return f"{gate.file}:{gate.name}|{gate.metric} {gate.op}|{source}"


def gate_values(files: Sequence[ThresholdFile]) -> dict[str, float]:
    """Every gate's value in these threshold files, keyed by ``gate_key``."""
    return {gate_key(gate): gate.value for tf in files for gate in tf.gates}


def approval_note(approval: ApprovalLike) -> str:
    """``Approved by @user on YYYY-MM-DD``: the line the approved check run shows."""
    return f"Approved by @{approval.approver} on {iso_date(approval.approved_at)}"


def apply_approval(
    conclusion: Conclusion, values: Mapping[str, float], approval: ApprovalLike | None
) -> tuple[Conclusion, str | None]:
    """The conclusion to publish and the approval note to show, if the approval applies.

    Only ``action_required`` is ever turned into ``success``, and only when the approval
    covers exactly ``values`` (every gate, same values): an approval never hides a new
    gate, a changed value, or a history outage (``neutral``).
    """
    if conclusion != "action_required" or approval is None or not values:
        return conclusion, None
    if dict(approval.gate_values) != dict(values):
        return conclusion, None
    return "success", approval_note(approval)


def approval_not_applied(login: str, reason: str) -> str:
    """An approval that was stored but does not turn the check green (yet)."""
    return f"{mention(login)}, your approval is recorded, but {reason}"
