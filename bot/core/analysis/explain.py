"""The words of a gate review: short sentences a maintainer reads at a glance.

Names from outside are quoted in backticks only where the sentence would be ambiguous
without them (``no run has `eval/all/avg_score` ``); the comment shows those as code.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.core.analysis.failures import Diagnosis
from bot.core.formatting import day_month, move, per_run, percent, plural, significant
from bot.core.models import Band, Change, Failures, Tolerance, Trend, WindowInfo

__all__ = [
    "aggregation_warning",
    "describe_band",
    "describe_missing",
    "describe_old",
    "describe_proposed",
    "describe_reference",
    "describe_trend",
    "short_window_warning",
    "straddle_warning",
    "tighten_note",
    "tolerance_warning",
    "trend_warning",
]


def _moved_phrase(change: Change, metric: str, lead: str = "after", of: str = "") -> str:
    """``after the change that moved m 0.285 → 0.238`` (the gate's metric if it moved);
    ``of``: `` of 20 Jun`` to date the change."""
    if not change.metrics:
        return f"{lead} a regime change{of}"
    name = metric if metric in change.metrics else next(iter(change.metrics))
    shift = change.metrics[name]
    return f"{lead} the change{of} that moved {name} {move(shift.before, shift.after)}"


def _streak(diagnosis: Diagnosis, since: datetime | None, reference: datetime | None) -> str:
    """``; the newest 3 fail in a row, since 7 Sep`` when the newest runs fail."""
    if not diagnosis.streak or since is None:
        return ""
    when = day_month(since, reference)
    if diagnosis.streak == 1:
        return f"; the newest run fails ({when})"
    return f"; the newest {diagnosis.streak} fail in a row, since {when}"


def describe_old(
    diagnosis: Diagnosis,
    *,
    metric: str,
    runs: int,
    change: Change | None = None,
    streak_since: datetime | None = None,
    within_current_regime: bool = True,
    reference: datetime | None = None,
) -> str:
    """How the current value fares, in the words of its case (:func:`failures.diagnose`).

    ``runs``: how many runs have ``metric``; ``change``: the change the case is tied to;
    ``streak_since``: ``created_at`` of the newest failing streak's first run; dates are
    written against ``reference`` (the newest run).
    """
    d, recent = diagnosis, diagnosis.recent
    case, since = d.classification, d.since_change
    if case == "no_data":
        return f"no finished run has {metric}"
    if case == "passing":
        if recent.total == 1:
            return "passes the only recent run"
        return f"passes all {recent.total} recent runs"
    if case == "failing_every_run" and streak_since is not None:
        whole = ": the whole history" if d.streak == runs else ""
        text = (
            f"fails every run since {day_month(streak_since, reference)}"
            f" ({plural(d.streak, 'run')} in a row{whole})"
        )
        if change is None:
            return text
        of = "" if change.at == streak_since else f" of {day_month(change.at, reference)}"
        return f"{text}, {_moved_phrase(change, metric, 'since', of)}"
    if case == "failed_before_change" and change is not None and since is not None:
        return (
            f"passes every run since {day_month(change.at, reference)}"
            f" ({plural(since.total, 'run')}), {_moved_phrase(change, metric)};"
            f" its {plural(recent.failed, 'failure')} in the last {recent.total} runs"
            " were all before it"
        )
    tail = _streak(d, streak_since, reference)
    if case == "shifted" and change is not None and since is not None:
        when = day_month(change.at, reference)
        head = (
            f"fails every run since {when}"
            if since.failed == since.total
            else f"fails {since.failed} of {plural(since.total, 'run')} since {when}"
        )
        return f"{head}, {_moved_phrase(change, metric)}{tail}"
    where = "within the current regime" if within_current_regime else "across regimes"
    rate = f"{round(100 * recent.failed / recent.total)}%"
    return (
        f"fails {recent.failed} of {recent.total} recent runs ({rate}), scattered {where}"
        f" (flaky){tail}"
    )


def describe_missing(
    metric: str,
    *,
    closest: Sequence[str],
    read: int,
    finished: int,
    others_have_it: bool,
    not_numbers: int = 0,
) -> str:
    """Why a gate cannot be verified: the history is empty, has no finished run, has only
    values of ``metric`` that are not numbers (``not_numbers`` of them), or no (finished) run
    has ``metric``; how many runs were read; the history's keys ``closest`` to it (``did you
    mean …?``)."""
    if not read:
        return "cannot verify: the history is empty (no run read)"
    if not finished:
        return f"cannot verify: the history has no finished run ({plural(read, 'run')} read)"
    runs = plural(read, "run") + " read" + (f", {finished} finished" if finished != read else "")
    if not_numbers:
        values = plural(not_numbers, "value")
        return (
            f"cannot verify: the values of `{metric}` are not numbers ({values}: text, null or"
            f" NaN; {runs})"
        )
    who = "no finished run" if others_have_it else "no run"
    if closest:
        runs += "; did you mean " + " or ".join(f"`{key}`" for key in closest) + "?"
    return f"cannot verify: {who} has `{metric}` ({runs})"


def describe_proposed(
    proposed: str,
    failures: Failures,
    *,
    rule_value: str | None = None,
    looser: float = 0.0,
    step: float = 0.0,
) -> str:
    """What the ``proposed`` value (its literal, or a reference's band in words) does in the
    window; with ``rule_value`` (the rule's limit or band in words), that it is ``looser``
    than the rule's by more than one rounding ``step``."""
    value = proposed.strip()
    if failures.total == 0:
        return f"{value} cannot be checked: no run in the window"
    if failures.failed:
        runs = plural(failures.total, "run")
        text = f"{value} fails {failures.failed} of {runs} in the window"
    elif failures.total == 1:
        text = f"{value} passes the only run in the window"
    else:
        text = f"{value} passes all {failures.total} runs in the window"
    if rule_value is not None:
        text += (
            f", but is looser than the rule's {rule_value} by {significant(looser)}"
            f" (more than one step of {significant(step)})"
        )
    return text


def describe_band(band: Band) -> str:
    """``≥ 0.874``, ``≤ 1.026`` or ``0.874 to 1.026``."""
    low = None if band.band_low is None else significant(band.band_low, 6)
    high = None if band.band_high is None else significant(band.band_high, 6)
    if low is not None and high is not None:
        return f"{low} to {high}"
    return f"≥ {low}" if low is not None else f"≤ {high}"


def describe_reference(reference: str, tolerance: Tolerance | None, band: Band) -> str:
    """A reference gate in words: ``0.95 ±8% (≥ 0.874)``."""
    tolerance_words = tolerance.describe() if tolerance is not None else "±0"
    return f"{reference.strip()} {tolerance_words} ({describe_band(band)})"


def tolerance_warning(
    tolerance: Tolerance | None,
    statistic: str,
    reference: str,
    held: Failures,
    needed: Tolerance | None,
) -> str:
    """The band around the rule's reference does not hold every run of the window: ``held``
    counts the runs it holds (``failed``: those it does not)."""
    current = tolerance.describe() if tolerance is not None else "±0 (no tolerance)"
    holds = held.total - held.failed
    runs = f"no run of {held.total}" if holds == 0 else f"{holds} of {plural(held.total, 'run')}"
    text = (
        f"the tolerance {current} is tighter than the window's spread: the band around the"
        f" {statistic} {reference} holds {runs}"
    )
    if needed is not None:
        text += f"; {needed.describe()} would hold them all"
    return text


def aggregation_warning(words: str, metric: str, bare: int, runs: int) -> str:
    """``bare`` of the window's ``runs`` have no per-step series: not aggregated."""
    return (
        f"{words} could not be applied to {bare} of {plural(runs, 'run')} in the window"
        f" (no per-step series of `{metric}`): their summary value is compared"
    )


def straddle_warning(window: WindowInfo, change: Change, reference: datetime | None = None) -> str:
    """The window mixes two regimes of the gate's metric."""
    size = f"{window.runs}-run window" if window.kind == "last" else "window"
    return (
        f"the {size} straddles the regime change of {day_month(change.at, reference)}: "
        "the limit mixes two regimes; consider --window regime"
    )


def short_window_warning(window: WindowInfo, wanted: int) -> str:
    """The window holds fewer runs than asked for."""
    runs = plural(window.runs, "run")
    return f"only {runs} in the window ({wanted} wanted)"


def _projection(value: str, runs: int | None, verb: str) -> str:
    """``0.50 fails in ~12 runs``; ``its trend line is already past 0.50`` (``runs`` 0)."""
    if runs == 0:
        return f"its trend line is already past {value}"
    return f"{value} {verb} in ~{plural(runs or 0, 'run')}"


def describe_trend(
    metric: str,
    trend: Trend,
    since: datetime,
    *,
    value: str,
    runs: int | None,
    reference: datetime | None = None,
) -> str:
    """The gate's failures come from a trend: ``m has been drifting down since 3 May (−0.2%
    per run); at this rate 0.50 fails in ~12 runs``. ``runs``: runs until the trend line
    reaches ``value`` (``projection.runs_until_fails``; None: no projection)."""
    way = "down" if trend.slope < 0 else "up"
    text = (
        f"{metric} has been drifting {way} since {day_month(since, reference)}"
        f" ({per_run(trend.slope, trend.relative)})"
    )
    if runs is None:
        return text
    at_rate = "" if runs == 0 else "at this rate "
    return f"{text}; {at_rate}{_projection(value, runs, 'fails')}"


def trend_warning(metric: str, trend: Trend, *, value: str, runs: int | None) -> str:
    """A limit on a drifting metric goes stale: ``m drifts −0.2% per run: 0.56 would fail in
    ~9 runs; …`` (``runs``: as for :func:`describe_trend`; None: the line moves away)."""
    head = f"{metric} drifts {per_run(trend.slope, trend.relative)}"
    if runs is None:
        head += f", away from {value}"
    else:
        head += f": {_projection(value, runs, 'would fail')}"
    return f"{head}; a limit on a trending metric goes stale"


def tighten_note(
    metric: str,
    condition: str,
    *,
    harm: float,
    median: float,
    moved: float,
    lower: bool,
    rule_value: str,
) -> str:
    """The note on an unchanged limit its metric moved away from: "`acc` is well inside its
    limit: a 5% drop from its median 0.71 (to 0.674) would still pass `acc >= 0.56`; the rule
    gives 0.66, the limit could be tightened (information only)"."""
    way = "drop" if lower else "rise"
    return (
        f"`{metric}` is well inside its limit: a {percent(harm)} {way} from its median"
        f" {significant(median)} (to {significant(moved)}) would still pass `{condition}`;"
        f" the rule gives {rule_value}, the limit could be tightened (information only)"
    )
