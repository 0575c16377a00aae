"""A gate's verdict and a review's conclusion (docs/limit-rule.md#verdicts): never green
without evidence."""

from __future__ import annotations

from collections.abc import Iterable

from bot.core.analysis.limits import looser_than_rule
from bot.core.models import Conclusion, Failures, GateReview, Op, Verdict

__all__ = ["ACTION_VERDICTS", "conclusion_of", "needs_action", "verdict_of"]

ACTION_VERDICTS: frozenset[str] = frozenset({"too_tight", "looser_than_rule", "unchanged_failing"})


def needs_action(gate: GateReview) -> bool:
    """Whether a maintainer must act on ``gate``: a verdict of ``ACTION_VERDICTS``, a
    changed gate that cannot be verified (``no_data``: no run has its metric, or the history
    could not be read), or a gate whose history source the PR changes (``proposed_source``)."""
    return (
        gate.verdict in ACTION_VERDICTS
        or (gate.verdict == "no_data" and gate.changed)
        or bool(gate.proposed_source)
    )


def conclusion_of(gates: Iterable[GateReview]) -> Conclusion:
    """``action_required`` if any gate :func:`needs_action`, else ``neutral`` if any gate has
    no data (unchanged, so nothing the PR did is unverified), else ``success``."""
    conclusion: Conclusion = "success"
    for gate in gates:
        if needs_action(gate):
            return "action_required"
        if gate.verdict == "no_data":
            conclusion = "neutral"
    return conclusion


def verdict_of(
    *,
    changed: bool,
    window: Failures,
    proposed: float,
    recomputed: float | None,
    decimals: int,
    op: Op,
) -> Verdict:
    """The verdict table (docs/limit-rule.md) for one gate.

    ``window``: failures of the proposed value in the window. A changed gate is
    ``looser_than_rule`` when it is more permissive than ``recomputed`` by more than one
    rounding step at ``decimals``.
    """
    if window.total == 0 or recomputed is None:
        return "no_data"
    if not changed:
        return "unchanged_failing" if window.failed else "unchanged"
    if window.failed:
        return "too_tight"
    return "looser_than_rule" if looser_than_rule(proposed, recomputed, decimals, op) else "ok"
