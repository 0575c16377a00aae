"""The PR comment's charts in a real browser: the comment of a real review, its Markdown shown
as GitHub shows it, every ```mermaid block drawn by Mermaid (npm, pinned in
tests/browser/package-lock.json) in headless Chromium.  From the SVG: each chart's metric line
has one point per run shown (aggregated to at most 60), at the heights of the runs' values
(or bucket means), the old / proposed / rule limits are horizontal lines at the heights of
their values, in the legend's colours; the regime medians are a step line.  Expected values
come from the test's history (tests/browser_harness.py).  Screenshot:
build/screenshots/comment.png."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

import pytest

from bot.core.models import History, Review
from bot.core.render.charts import COLOURS, MAX_POINTS
from bot.core.render.review import render_comment
from tests.browser_harness import (
    ACC,
    ACC_PROPOSED,
    LATENCY,
    SHIFT,
    MermaidChart,
    MermaidError,
    OfflinePage,
    regime_median,
    render_markdown,
    rule_value,
    screenshot,
    shown_runs,
    step_history,
    step_review,
)

pytestmark = pytest.mark.servers

TOLERANCE = 0.05  # pixels: Mermaid writes coordinates to 3 decimals


@pytest.fixture(scope="module")
def history() -> History:
    return step_history()


@pytest.fixture(scope="module")
def review(history: History) -> Review:
    return step_review(history)


def buckets(values: Sequence[float], count: int) -> list[float]:
    """``values`` as ``count`` consecutive buckets' means (sizes differing by one at most),
    or as they are when there are no more than ``count``."""
    n = len(values)
    if n <= count:
        return list(values)
    bounds = [i * n // count for i in range(count + 1)]
    return [math.fsum(values[a:b]) / (b - a) for a, b in pairwise(bounds)]


def expected_lines(history: History, metric: str) -> tuple[list[float], list[float]]:
    """The heights of the metric's points and of the regime medians' step line."""
    runs = shown_runs(history, metric)
    index = {r.id: i for i, r in enumerate(history.finished)}
    values = [r.summary[metric] for r in runs]
    medians = [regime_median(history, metric, index[r.id]) for r in runs]
    return buckets(values, MAX_POINTS), buckets(medians, MAX_POINTS)


def check_chart(
    chart: MermaidChart, points: list[float], medians: list[float], limits: dict[str, float]
) -> None:
    """``chart`` draws ``points`` (blue), the ``limits`` (colour name → value) as horizontal
    lines and ``medians`` as the regime medians' step line (orange)."""
    metric, *others = chart.lines
    assert len(metric.points) == len(points) == len(chart.x_labels)
    assert metric.stroke == COLOURS["blue"]
    for (_, y), value in zip(metric.points, points, strict=True):
        assert y == pytest.approx(chart.pixel_y(value), abs=TOLERANCE)
    # old / proposed / rule: horizontal, at their values' heights, in the legend's colours
    for colour, value in limits.items():
        at = chart.pixel_y(value)
        drawn = [line for line in others if line.stroke == COLOURS[colour]]
        assert len(drawn) == 1, f"one {colour} line for {value}"
        assert len(drawn[0].points) == len(points)
        assert all(y == pytest.approx(at, abs=TOLERANCE) for y in drawn[0].ys), (colour, value)
    # the regime medians: a step line at the medians of the runs' regimes
    (step,) = [line for line in others if line.stroke == COLOURS["orange"]]
    for y, value in zip(step.ys, medians, strict=True):
        assert y == pytest.approx(chart.pixel_y(value), abs=TOLERANCE)
    assert len(set(step.ys)) > 1  # the step change is in the runs shown


def window_values(history: History, metric: str) -> list[float]:
    """The values of the rule's window: the last 20 finished runs having ``metric``."""
    return [r.summary[metric] for r in history.finished if metric in r.summary][-20:]


def test_comment_charts_in_chromium(
    offline_page: OfflinePage, history: History, review: Review
) -> None:
    markdown = render_comment(review, charts=True)
    assert markdown.count("```mermaid") == 2
    acc, latency = render_markdown(offline_page, markdown)
    screenshot(offline_page.page, "comment")
    assert offline_page.attempted == []  # Mermaid fetched nothing
    assert offline_page.errors == []

    assert review.gates[0].verdict == "looser_than_rule"  # needs attention: its own block
    assert "ACC_MIN" in acc.title and "LATENCY_MAX" in latency.title
    assert [r.first_index for r in review.regimes] == [0, SHIFT]

    acc_rule = rule_value(window_values(history, "acc"), ACC.op, 2)
    limits = {"red": ACC.value, "green": float(ACC_PROPOSED), "grey": acc_rule}
    points, medians = expected_lines(history, "acc")
    assert len(shown_runs(history, "acc")) > MAX_POINTS == len(points)  # aggregated
    check_chart(acc, points, medians, limits)

    # unchanged: one line for the limit (green), and the rule's
    lat_rule = rule_value(window_values(history, "latency"), LATENCY.op, 0)
    lat_limits = {"green": LATENCY.value, "grey": lat_rule}
    points, medians = expected_lines(history, "latency")
    assert len(points) == len(shown_runs(history, "latency")) < MAX_POINTS  # run by run
    check_chart(latency, points, medians, lat_limits)


def test_broken_mermaid_fails(offline_page: OfflinePage) -> None:
    broken = "Before\n\n```mermaid\nxychart-beta\n    line [1, 2,\n```\n"
    with pytest.raises(MermaidError, match="Parse error"):
        render_markdown(offline_page, broken)
