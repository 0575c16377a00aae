"""Drift watch: which gates at the default branch keep failing their newest runs (pure).

A gate is reviewed with ``base == head`` (its literal at the default branch) over the drift
window (docs/drift.md); :func:`assess` then decides, in this order:

- ``no_data``: no finished run has its metric;
- ``drifting``: its literal fails its last ``min_failures`` runs in a row, or the review
  classifies it ``shifted`` (a regime change leaves it failing at least half the runs
  since) with at least ``min_failures`` failures in the failure lookback;
- ``flaky``: the review classifies it ``flaky`` (scattered failures, no shift) and some of
  its failures lie before the newest streak: reported with its failure rate, never
  rebaselined;
- ``passing``: anything else, a streak shorter than ``min_failures`` holding every failure
  included (it may be the start of a drift: not yet acted on).

The report's conclusion: ``action_required`` when a gate drifts; ``neutral`` when none does
but a gate has no data to judge or is flaky (no data is not healthy); ``success`` otherwise.

A failing streak long enough to drift is tied to the change starting at its first run (the
detector's, or the onset the shell adds where the detector has not confirmed the new regime
yet, or places it a run early); a shift, to the change the review ties it to
(``GateReview.tied_change``).
Placeholders (``gate.ignored``) are skipped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from bot.core.config import DriftSettings
from bot.core.formatting import day_month_year, percent, plural
from bot.core.models import Change, Conclusion, Frozen, GateReview, Review

__all__ = ["DriftReport", "DriftStatus", "GateDrift", "assess", "drift_report"]

DriftStatus = Literal["drifting", "flaky", "passing", "no_data"]
_NO_DATA_WORDS: dict[str | None, str] = {  # GateReview.no_data_reason, for a drift status
    "empty_history": "the history is empty",
    "no_finished_runs": "the history has no finished run",
    "not_numbers": "no finished run has a number for its metric (text, null or NaN)",
}


class GateDrift(Frozen):
    """How one gate fares on the default branch."""

    gate: GateReview  # reviewed with base == head == the literal at the default branch
    status: DriftStatus
    reason: str  # one plain line: "failed its last 5 runs in a row, since 3 Jul 2026"
    failed: int  # failures of the literal in the failure lookback (gate.old_failures)
    total: int
    streak: int  # the newest failures in a row (gate.consecutive_failures)
    since: datetime | None  # the tied regime change, else the streak's first run
    change: Change | None  # the regime change the drift is tied to (its pulls name PRs)


class DriftReport(Frozen):
    """The drift of one threshold file's gates."""

    file: str  # repository path of the threshold file
    review: Review  # its review: regimes, changes, pulls attributed by the shell
    gates: tuple[GateDrift, ...]
    settings: DriftSettings

    @property
    def drifting(self) -> tuple[GateDrift, ...]:
        """The gates to rebaseline."""
        return tuple(g for g in self.gates if g.status == "drifting")

    @property
    def flaky(self) -> tuple[GateDrift, ...]:
        """The gates failing now and then: reported, never rebaselined."""
        return tuple(g for g in self.gates if g.status == "flaky")

    @property
    def no_data(self) -> tuple[GateDrift, ...]:
        """The gates no finished run gives data to judge."""
        return tuple(g for g in self.gates if g.status == "no_data")

    @property
    def conclusion(self) -> Conclusion:
        """``action_required``: a gate drifts; ``neutral``: none does, but one has no data
        or is flaky; ``success``: every gate passes."""
        if self.drifting:
            return "action_required"
        return "neutral" if self.no_data or self.flaky else "success"


def _status(g: GateReview, settings: DriftSettings) -> DriftStatus:
    if g.classification == "no_data" or g.old_failures.total == 0:
        return "no_data"
    enough = settings.min_failures
    shifted = g.classification == "shifted" and g.old_failures.failed >= enough
    if g.consecutive_failures >= enough or shifted:
        return "drifting"
    scattered = g.old_failures.failed > g.consecutive_failures
    return "flaky" if g.classification == "flaky" and scattered else "passing"


def _reason(g: GateReview, status: DriftStatus, since: datetime | None, least: int) -> str:
    """The status in one plain line, with the numbers it rests on."""
    failed, total, streak = g.old_failures.failed, g.old_failures.total, g.consecutive_failures
    when = day_month_year(since)
    if status == "no_data":
        return _NO_DATA_WORDS.get(g.no_data_reason, "no finished run has its metric")
    if status == "flaky":
        rate = percent(round(failed / total, 3))
        return f"failed {failed} of the last {total} runs ({rate}), scattered: flaky"
    if status == "passing" and not failed:
        return "passes its last run" if total == 1 else f"passes its last {total} runs"
    if status == "passing" and not streak:
        return f"passes its newest run; failed {failed} of the last {total}"
    if status == "passing":
        return (
            f"failed its last {plural(streak, 'run')} in a row, fewer than {least}"
            f" (min_failures); {failed} of the last {total} runs failed"
        )
    if streak >= least and failed == min(streak, total):
        return f"failed its last {streak} runs in a row, since {when}"
    if streak >= least:
        return f"failed {failed} of the last {total} runs, the last {streak} in a row, since {when}"
    return (
        f"failed {failed} of the last {total} runs; at least half the runs since the regime"
        f" change of {when} fail"
    )


def assess(review: Review, settings: DriftSettings) -> tuple[GateDrift, ...]:
    """Each judged gate of ``review`` (placeholders skipped) with its drift status, in the
    review's order (the decision rule: this module's docstring)."""
    changes = {c.at: c for c in review.changes}
    found = []
    for g in review.gates:
        if g.ignored:
            continue
        status = _status(g, settings)
        change, since = None, None
        if status == "drifting":
            streak = g.consecutive_failures >= settings.min_failures
            onset = changes.get(g.failing_since) if streak and g.failing_since else None
            tied = changes.get(g.tied_change) if g.tied_change else None
            change = onset or tied
            since = change.at if change else g.failing_since
        found.append(
            GateDrift(
                gate=g,
                status=status,
                reason=_reason(g, status, since, settings.min_failures),
                failed=g.old_failures.failed,
                total=g.old_failures.total,
                streak=g.consecutive_failures,
                since=since,
                change=change,
            )
        )
    return tuple(found)


def drift_report(file: str, review: Review, settings: DriftSettings) -> DriftReport:
    """The drift report of threshold ``file`` from its review (:func:`assess`)."""
    return DriftReport(file=file, review=review, gates=assess(review, settings), settings=settings)
