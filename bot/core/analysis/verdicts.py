"""A gate's verdict and a review's conclusion (docs/limit-rule.md#verdicts): never green
without evidence. A placeholder (an ignored gate) is reviewed but never judged."""

from __future__ import annotations

from collections.abc import Iterable

from bot.core.analysis.limits import looser_than_rule
from bot.core.models import Conclusion, Failures, GateReview, Op, Verdict

__all__ = ["ACTION_VERDICTS", "conclusion_of", "judge", "needs_action", "verdict_of"]

ACTION_VERDICTS: frozenset[str] = frozenset({"too_tight", "looser_than_rule", "unchanged_failing"})


def needs_action(gate: GateReview) -> bool:
    """Whether a maintainer must act on ``gate``: a verdict of ``ACTION_VERDICTS``, a
    changed gate that cannot be verified (``no_data``: no run has its metric, or the history
    could not be read), or a gate whose history source the PR changes (``proposed_source``).
    Never for a placeholder (``ignored``)."""
    if gate.ignored:
        return False
    return (
        gate.verdict in ACTION_VERDICTS
        or (gate.verdict == "no_data" and gate.changed)
        or bool(gate.proposed_source)
    )


def conclusion_of(gates: Iterable[GateReview]) -> Conclusion:
    """``action_required`` if any gate :func:`needs_action`, else ``neutral`` if any gate has
    no data (unchanged, so nothing the PR did is unverified), else ``success``. Placeholders
    (``ignored``) do not count."""
    conclusion: Conclusion = "success"
    for gate in gates:
        if gate.ignored:
            continue
        if needs_action(gate):
            return "action_required"
        if gate.verdict == "no_data":
            conclusion = "neutral"
    return conclusion


def judge(*, changed: bool, window: Failures, looser: bool | None) -> Verdict:
    """The verdict table (docs/limit-rule.md) for one gate of any kind.

    ``window``: failures of the proposed gate in the window (``no_data`` when it holds no
    run); ``looser``: whether the gate is more permissive than the rule's value by more than
    one rounding step (None: the rule has no value, e.g. no run of the window logged a golden
    curve's last step; never ``looser_than_rule`` then).
    """
    if window.total == 0:
        return "no_data"
    if not changed:
        return "unchanged_failing" if window.failed else "unchanged"
    if window.failed:
        return "too_tight"
    return "looser_than_rule" if looser else "ok"


def verdict_of(
    *,
    changed: bool,
    window: Failures,
    proposed: float,
    recomputed: float | None,
    decimals: int,
    op: Op,
) -> Verdict:
    """:func:`judge` for a limit gate: ``looser_than_rule`` when ``proposed`` is more permissive
    than ``recomputed`` by more than one rounding step at ``decimals``."""
    if recomputed is None:
        return "no_data"
    looser = looser_than_rule(proposed, recomputed, decimals, op)
    return judge(changed=changed, window=window, looser=looser)
