"""Where each gate of a repository's dashboard goes, and the one line saying why (pure).

Every judged gate of every evaluated file (``FileView.report``) is placed in one section,
decided in this order from what the drift watch's evaluation already computed:

- ``attention``: it drifts (``GateDrift.status == "drifting"``: a failing streak or a shift);
  no finished run gives it data (``no_data``); or it passes but its metric's trend in the
  newest regime (``Regime.trends``) moves toward failing and its line reaches the gate's
  limit within ``HORIZON_RUNS`` runs (``bot.core.analysis.projection``): the date projected
  is the newest run's plus that many times the median interval between its chart's runs;
- ``flaky``: the drift status is ``flaky`` (scattered failures, never rebaselined);
- ``looser``: it passes and the review says its limit could be tightened
  (``GateReview.tighten_to``: a harmful move of the metric would still pass it while the
  rule's value is stricter by more than a rounding step);
- ``healthy``: the rest.

Within a section the most urgent come first: in ``attention`` the drifting gates (oldest
failure first), then the projected ones (soonest first), then those without data.  Files
not evaluated (``FileView.report is None``) have no gate placed: :func:`not_evaluated` lists
them, shown in ``attention`` with their ``problem``.  Work is linear in the gates and their
chart points.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from itertools import pairwise
from statistics import median_low

from bot.core.analysis.drift import GateDrift
from bot.core.analysis.projection import gate_bounds, runs_until_fails, toward_failing
from bot.core.dashboard.view import SECTIONS, FileView, RepoView, Section
from bot.core.formatting import day_month_year, per_run, percent, plural
from bot.core.models import Frozen, Gate, GateReview, Review, Trend

__all__ = ["HORIZON_RUNS", "GatePlace", "not_evaluated", "place_gates"]

HORIZON_RUNS = 30
"""A passing gate whose trend line reaches its limit within this many runs needs attention."""
_BETTER = re.compile(r"^Backtest: with `([^`]{1,200})`")  # GateBacktest.hint, as review.py words it


class GatePlace(Frozen):
    """One gate, the section it goes in, and why."""

    file: str  # the threshold file's repository path
    drift: GateDrift
    section: Section
    why: str  # one plain line with the numbers it rests on
    runs_to_fail: int | None = None  # a projected gate: runs until its trend reaches the limit
    fails_around: datetime | None = None  # … and when, at the median interval between runs
    rule: float | None = None  # the rule's value (``tighten_to``, else ``recomputed``)
    better_model: str = ""  # the backtest's better model, when the current one is clearly worse
    backtest: str = ""  # the backtest's whole line (``GateReview.backtest_hint``), or ""

    @property
    def gate(self) -> GateReview:
        """The gate's review."""
        return self.drift.gate


def _gate_of(review: GateReview, gates: tuple[Gate, ...]) -> Gate | None:
    """The gate as read at the head that ``review`` reviews (same name and line)."""
    return next((g for g in gates if g.name == review.name and g.line == review.line), None)


def _trend(review: Review, gate: GateReview) -> Trend | None:
    """The trend of ``gate``'s metric in the newest regime, when its newest run lies in it."""
    if not review.regimes or gate.chart is None or not gate.chart.points:
        return None
    newest = review.regimes[-1]
    if not newest.start <= gate.chart.points[-1].at <= newest.end:
        return None  # another source's regimes (a merged review keeps only one source's)
    return newest.trends.get(gate.chart.metric)


def _interval(gate: GateReview) -> timedelta | None:
    """The median interval between the gate's chart runs (the lower of the middle two; None:
    fewer than two runs)."""
    points = gate.chart.points if gate.chart else ()
    steps = [b.at - a.at for a, b in pairwise(points)]
    return median_low(steps) if steps else None


def _projection(
    report: Review, drift: GateDrift, gates: tuple[Gate, ...]
) -> tuple[int, datetime | None, Trend] | None:
    """Runs until a passing gate's trend reaches its limit, and when, if within the horizon."""
    gate = _gate_of(drift.gate, gates)
    trend = _trend(report, drift.gate)
    if gate is None or trend is None or not toward_failing(trend, gate):
        return None
    runs = runs_until_fails(trend, gate_bounds(gate))
    if runs is None or runs > HORIZON_RUNS:
        return None
    step, chart = _interval(drift.gate), drift.gate.chart
    newest = chart.points[-1].at if chart and chart.points else None
    when = newest + step * runs if newest is not None and step is not None else None
    return runs, when, trend


def _better_model(gate: GateReview) -> str:
    found = _BETTER.match(gate.backtest_hint)
    return found.group(1) if found else ""


def _failing(drift: GateDrift, least: int) -> str:
    """A drifting gate's line: ``failing since 30 Jun 2026: 6 of the last 30 runs failed,
    the last 6 in a row`` (or, for a shift, at least half the runs since the change)."""
    when = f"failing since {day_month_year(drift.since)}" if drift.since else "failing"
    tail = (
        f"the last {drift.streak} in a row"
        if drift.streak >= least
        else "at least half the runs since the regime change"
    )
    return f"{when}: {drift.failed} of the last {drift.total} runs failed, {tail}"


def _place(file: FileView, report: Review, drift: GateDrift, least: int) -> GatePlace:
    g = drift.gate
    rule = g.tighten_to if g.tighten_to is not None else g.recomputed
    common = {
        "file": file.path,
        "drift": drift,
        "rule": rule,
        "better_model": _better_model(g),
        "backtest": g.backtest_hint,
    }
    if drift.status == "drifting":
        return GatePlace(section="attention", why=_failing(drift, least), **common)
    if drift.status == "no_data":
        return GatePlace(section="attention", why=drift.reason, **common)
    if drift.status == "flaky":
        return GatePlace(section="flaky", why=drift.reason, **common)
    projected = _projection(report, drift, file.gates)
    if projected is not None:
        runs, when, trend = projected
        rate = per_run(trend.slope, trend.relative)
        around = f", around {day_month_year(when)}" if when else ""
        reach = f"in {plural(runs, 'run')}{around}" if runs else "already"
        why = f"{drift.reason}, but its trend ({rate}) reaches the limit {reach}"
        return GatePlace(
            section="attention", why=why, runs_to_fail=runs, fails_around=when, **common
        )
    if g.tighten_to is not None:
        harm = percent(report.rule.for_gate(g.name, g.metric, g.file).harm)
        why = f"{drift.reason}; a harmful move of {harm} from its median would still pass it"
        return GatePlace(section="looser", why=why, **common)
    return GatePlace(section="healthy", why=drift.reason, **common)


def _urgency(place: GatePlace) -> tuple[int, int, float, str, int]:
    d = place.drift
    rank = SECTIONS.index(place.section)
    if d.status == "drifting":
        order, when = 0, d.since.timestamp() if d.since else 0.0
    elif place.runs_to_fail is not None:
        order, when = 1, float(place.runs_to_fail)
    elif d.status == "no_data":
        order, when = 2, 0.0
    else:
        order, when = 3, 0.0
    return rank, order, when, place.file, d.gate.line


def place_gates(view: RepoView) -> tuple[GatePlace, ...]:
    """Every judged gate of ``view``'s evaluated files, placed (this module's docstring), in
    section order, the most urgent first."""
    placed = [
        _place(file, file.report.review, drift, file.report.settings.min_failures)
        for file in view.files
        if file.report is not None
        for drift in file.report.gates
    ]
    return tuple(sorted(placed, key=_urgency))


def not_evaluated(view: RepoView) -> tuple[FileView, ...]:
    """The files of ``view`` the watch could not evaluate (their ``problem`` says why)."""
    return tuple(f for f in view.files if f.report is None)
