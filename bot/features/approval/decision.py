"""Maintainer approval of a PR's gate values: when it turns the check green.

An approval is tied to the gate values it approved.  ``apply_approval`` is the pure
decision used when the review is published: an ``action_required`` review becomes
``success`` while the head's gate values equal the approved ones; any change to a
value (a later push) makes it ``action_required`` again, without deleting the
approval.  ``stored_approvals`` is the one adapter: it reads the newest approval
of a PR from the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.store import approvals
from bot.adapters.store.approvals import gate_key
from bot.core.models import Conclusion, ThresholdFile


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
        """The approved values, keyed by ``gate_key(file, name)``."""
        ...


ApprovalLookup = Callable[[str, int], ApprovalLike | None]
"""``(repo, pr_number) -> the newest approval of that PR, or None``."""


def gate_values(files: Sequence[ThresholdFile]) -> dict[str, float]:
    """Every gate's value in these threshold files, keyed by ``gate_key(file, name)``."""
    return {gate_key(tf.path, gate.name): gate.value for tf in files for gate in tf.gates}


def approval_note(approval: ApprovalLike) -> str:
    """``Approved by @user on YYYY-MM-DD``: the line the approved check run shows."""
    return f"Approved by @{approval.approver} on {approval.approved_at:%Y-%m-%d}"


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


def stored_approvals(sessions: sessionmaker[Session]) -> ApprovalLookup:
    """An ``ApprovalLookup`` reading the newest approval of a PR from the store."""

    def lookup(repo: str, number: int) -> ApprovalLike | None:
        with sessions() as session:
            return approvals.latest(session, repo, number)

    return lookup
