"""The charts of the HTML report as data: one spec per gate with chart data and one per
regime-relevant metric, embedded in the page as JSON and drawn by ``static/report.js``.

Each spec is plain data, never code: the page's script turns it into a Chart.js chart.

- ``key``: the chart's name in the page (``data-chart``, ``window.thresholdBotCharts``): the
  gate's name for a gate chart, the metric's for a metric chart; a name already taken gets
  `` (2)``, `` (3)``… in the order of the charts (gates first, in review order).
- ``x``: milliseconds since the epoch (UTC); ``y``: the values.  Both ranges are fitted here
  to every plotted value (points, medians, limits) with a 5% margin, and the page uses them
  as the axes' exact bounds, so a value's pixel height follows from the spec alone.
- ``datasets``, by ``role``: ``metric`` (one point per run: ``run``, ``date``, ``commit``),
  ``regime`` (the regime medians, a step line changing at the first run of each regime),
  ``old`` / ``proposed`` / ``rule`` (a horizontal line across the chart: the limit; a
  reference gate with a band: one line per finite band edge, ``edge`` ``low`` / ``high``),
  ``current`` instead of ``old`` and ``proposed`` when they are equal (the gate's value, as
  in an audit), ``window`` (a vertical line at the window's first run).

How each role is drawn is :data:`STYLES`: the page's script reads them from the same JSON
(``chart_styles``), and the caption above the charts is written from them
(:func:`chart_caption`), so the words cannot drift from the drawing.

Non-finite values are left out (JSON has no NaN).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NotRequired, TypedDict

from bot.core.formatting import significant
from bot.core.models import BandEdges, ChartPoint, GateChart, GateReview, Review
from bot.core.render.charts import COLOURS

Role = Literal["metric", "regime", "old", "proposed", "current", "rule", "window"]
Edge = Literal["low", "high"] | None
MARGIN = 0.05  # of the y range, above and below
DAY_MS = 86_400_000  # the x range of a chart with a single date: a day either side
_NAMES = {"old": "old", "proposed": "proposed", "current": "current", "rule": "rule says"}
PALETTE = COLOURS | {"violet": "#7c3aed"}  # the PR comment's chart colours, and the window's
DOTTED = 3  # dashes this long or shorter read as dots


@dataclass(frozen=True)
class Style:
    """How the lines of one role are drawn, and what the caption says they show."""

    colour: str  # a name of PALETTE
    width: float  # of the line, in pixels
    meaning: str
    dash: tuple[int, ...] = ()  # Chart.js borderDash: dash and gap lengths; () solid
    radius: float = 0  # of each point; 0: no points
    stepped: bool = False  # each value held until the next point
    order: int = 0  # Chart.js: the lower is drawn on top (the rule's dashes over a limit)

    def look(self) -> str:
        """The style in words: ``blue points``, ``dashed red line``, ``solid orange steps``."""
        if self.radius:
            return f"{self.colour} points"
        dotted = bool(self.dash) and max(self.dash) <= DOTTED
        pattern = "dotted" if dotted else "dashed" if self.dash else "solid"
        return f"{pattern} {self.colour} {'steps' if self.stepped else 'line'}"


STYLES: dict[Role, Style] = {
    "metric": Style("blue", 1.5, "each run's value", radius=2.5),
    "regime": Style("orange", 2, "the regime medians", stepped=True, order=1),
    "rule": Style("grey", 2, "what the rule says", dash=(4, 4), order=2),
    "proposed": Style("green", 2, "the proposed value", order=3),
    "current": Style("green", 2, "the current value (unchanged)", order=3),
    "old": Style("red", 1.5, "the old value", dash=(8, 4), order=4),
    "window": Style("violet", 1, "where the rule's window starts", dash=(3, 3), order=5),
}


class Point(TypedDict):
    """One plotted value; a run's point also names the run and its commit (the page shows
    the date from ``x``).  ``y`` None: a gap in a regime line."""

    x: int
    y: float | None
    run: NotRequired[str]
    commit: NotRequired[str | None]


class Dataset(TypedDict):
    """One line of a chart."""

    role: Role
    label: str
    edge: Edge
    stepped: bool
    points: list[Point]


class Range(TypedDict):
    min: float
    max: float


class XRange(TypedDict):
    min: int
    max: int


class ChartSpec(TypedDict):
    """One chart of the report."""

    key: str
    kind: Literal["gate", "metric"]
    title: str
    metric: str
    x: XRange
    y: Range
    datasets: list[Dataset]


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def _finite(points: Sequence[ChartPoint]) -> list[ChartPoint]:
    return [p for p in points if math.isfinite(p.value)]


def _run_points(points: Sequence[ChartPoint]) -> list[Point]:
    return [Point(x=_ms(p.at), y=p.value, run=p.run, commit=p.commit) for p in points]


def _median(p: ChartPoint) -> float | None:
    m = p.regime_median
    return m if m is not None and math.isfinite(m) else None


def _medians(points: Sequence[ChartPoint]) -> list[Point]:
    """The regime medians as a step line (each value holds until the next
    point): a point at each run where the median changes (the first run of each regime; a
    gap, ``y`` None, where runs hold none), and one at the last run so that the last step
    reaches the chart's end.  Empty when no run holds a median."""
    steps: list[Point] = []
    for p in points:
        value = _median(p)
        changed = steps[-1]["y"] != value if steps else value is not None
        if changed:
            steps.append(Point(x=_ms(p.at), y=value))
    last = _median(points[-1]) if points else None
    if last is not None and steps[-1]["x"] != _ms(points[-1].at):
        steps.append(Point(x=_ms(points[-1].at), y=last))
    return steps


def _heights(points: Sequence[Point]) -> list[float]:
    return [p["y"] for p in points if p["y"] is not None]


def _dataset(role: Role, label: str, points: list[Point], *, edge: Edge = None) -> Dataset:
    return Dataset(role=role, label=label, edge=edge, stepped=STYLES[role].stepped, points=points)


def _levels(chart: GateChart) -> Iterable[tuple[Role, float, Edge]]:
    """The horizontal lines of ``chart``: (role, height, band edge); one ``current`` line
    (or band) where the old and the proposed value are the same."""
    values: tuple[tuple[Role, float | None, BandEdges | None], ...] = (
        ("old", chart.old, chart.old_band),
        ("proposed", chart.proposed, chart.proposed_band),
        ("rule", chart.rule, chart.rule_band),
    )
    if chart.old == chart.proposed and chart.old_band == chart.proposed_band:
        values = (("current", chart.proposed, chart.proposed_band), values[2])
    for role, value, band in values:
        if band is not None:
            for edge, height in zip(("low", "high"), band, strict=True):
                if height is not None and math.isfinite(height):
                    yield role, height, "low" if edge == "low" else "high"
        elif value is not None and math.isfinite(value):
            yield role, value, None


def _x_range(points: Sequence[ChartPoint]) -> XRange:
    low, high = _ms(points[0].at), _ms(points[-1].at)
    if high <= low:
        low, high = low - DAY_MS, high + DAY_MS
    return XRange(min=low, max=high)


def _y_range(heights: Iterable[float]) -> Range:
    values = list(heights)
    low, high = min(values), max(values)
    pad = (high - low) * MARGIN or abs(high) * MARGIN or 1.0
    return Range(min=low - pad, max=high + pad)


def _line(role: Role, label: str, height: float, x: XRange, edge: Edge) -> Dataset:
    ends = [Point(x=x["min"], y=height), Point(x=x["max"], y=height)]
    return _dataset(role, label, ends, edge=edge)


def _gate_spec(g: GateReview, chart: GateChart, key: str) -> ChartSpec:
    """The chart of gate ``g`` (``chart`` has a finite point)."""
    points = _finite(chart.points)
    x = _x_range(points)
    metric = _dataset("metric", chart.metric, _run_points(points))
    medians = _medians(points)
    levels = list(_levels(chart))
    y = _y_range([*(p.value for p in points), *_heights(medians), *(h for _, h, _ in levels)])
    datasets = [metric]
    if medians:
        datasets.append(_dataset("regime", "regime median", medians))
    for role, height, edge in levels:
        side = f" band {edge}" if edge else ""
        label = f"{_NAMES[role]}{side} {significant(height, 6)}"
        datasets.append(_line(role, label, height, x, edge))
    if 0 <= chart.window_start < len(chart.points):
        at = _ms(chart.points[chart.window_start].at)
        ends = [Point(x=at, y=y["min"]), Point(x=at, y=y["max"])]
        datasets.append(_dataset("window", "window starts", ends))
    title = f"{g.name}: {g.metric} over {len(points)} runs ({g.file} line {g.line})"
    return ChartSpec(
        key=key, kind="gate", title=title, metric=chart.metric, x=x, y=y, datasets=datasets
    )


def _metric_spec(metric: str, points: Sequence[ChartPoint], key: str) -> ChartSpec:
    """The chart of a regime-relevant metric (``points`` has a finite one)."""
    shown = _finite(points)
    medians = _medians(shown)
    datasets = [_dataset("metric", metric, _run_points(shown))]
    if medians:
        datasets.append(_dataset("regime", "regime median", medians))
    return ChartSpec(
        key=key,
        kind="metric",
        title=f"{metric} over the newest {len(shown)} runs",
        metric=metric,
        x=_x_range(shown),
        y=_y_range([*(p.value for p in shown), *_heights(medians)]),
        datasets=datasets,
    )


def _unique(name: str, taken: set[str]) -> str:
    key, n = name, 1
    while key in taken:
        n += 1
        key = f"{name} ({n})"
    taken.add(key)
    return key


def chart_specs(review: Review) -> list[ChartSpec]:
    """Every chart of the report: the gates' (in review order), then the metrics'."""
    specs: list[ChartSpec] = []
    taken: set[str] = set()
    for g in review.gates:
        if g.chart is not None and not g.ignored and _finite(g.chart.points):
            specs.append(_gate_spec(g, g.chart, _unique(g.name, taken)))
    for chart in review.metric_charts:
        if _finite(chart.points):
            specs.append(_metric_spec(chart.metric, chart.points, _unique(chart.metric, taken)))
    return specs


def chart_styles() -> dict[str, dict[str, object]]:
    """:data:`STYLES` as the page's script draws them: Chart.js colour, width, dash, point
    radius and order per role."""
    return {
        role: {
            "color": PALETTE[s.colour],
            "width": s.width,
            "dash": list(s.dash),
            "radius": s.radius,
            "order": s.order,
        }
        for role, s in STYLES.items()
    }


def chart_caption(specs: Sequence[ChartSpec]) -> str:
    """What the lines of ``specs`` are, in the words of :data:`STYLES`, for the roles the
    charts draw: ``Blue points: each run's value; dashed red line: the old value; …``."""
    drawn = {d["role"] for spec in specs for d in spec["datasets"]}
    meanings: dict[str, list[str]] = {}  # roles drawn alike share an entry
    for role, style in STYLES.items():
        if role in drawn:
            meanings.setdefault(style.look(), []).append(style.meaning)
    text = "; ".join(f"{look}: {', or '.join(words)}" for look, words in meanings.items())
    return f"{text[:1].upper()}{text[1:]}." if text else ""
