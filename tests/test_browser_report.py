"""The HTML report in a real browser: ``html_report`` of a real review written to a file and
opened in headless Chromium from file://, with every network request refused (and none
attempted).  From ``window.thresholdBotCharts`` (Chart.js): each chart has one point per run
shown, at the heights of the runs' values; the old / proposed / rule limits are horizontal
at the pixel heights of their values, the regime medians a step line; hovering a run's point
shows a tooltip with its name, date, value and commit.  Expected values come from the test's
history (tests/browser_harness.py).  The caption names each line by how Chart.js draws it
(colour, dash, points, steps), in a review and in an audit; at a 1280 px window the demo's
regime table, its changes tied to titled PRs, shows every cell whole, nothing behind a
scroll.  Screenshots: build/screenshots/report.png, report-tooltip.png and
report-1280.png."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bot.cli.review import review_files
from bot.core.analysis.review import build_review
from bot.core.models import GateChange, History, PullRef, Review, Run
from bot.core.render.charts import COLOURS
from bot.core.render.html_report import html_report
from bot.core.render.view import regime_metrics
from demo.data import ExamplePaths, write_example
from tests.browser_harness import (
    ACC,
    ACC_PROPOSED,
    LATENCY,
    SHIFT,
    OfflinePage,
    regime_median,
    rule_value,
    screenshot,
    screenshot_path,
    shown_runs,
    step_history,
    step_review,
)

pytestmark = pytest.mark.servers

TOLERANCE = 0.01  # pixels: both sides are Chart.js's own floating-point arithmetic
METRIC_RUNS = 350  # a metric chart's newest runs

# Per chart: its datasets (role, the elements' pixels, the data) and the pixel height of each
# value asked for, by Chart.js's own y scale.
_READ = """(asked) => Object.fromEntries(Object.entries(window.thresholdBotCharts).map(
  ([key, chart]) => [key, {
    datasets: chart.data.datasets.map((d, i) => ({
      role: d.role,
      stepped: d.stepped,
      colour: d.borderColor,
      points: chart.getDatasetMeta(i).data.map((e) => [e.x, e.y]),
      data: d.data.map((p) => [p.x, p.y]),
    })),
    pixels: (asked[key] || []).map((v) => chart.scales.y.getPixelForValue(v)),
  }]))"""


@pytest.fixture(scope="module")
def history() -> History:
    return step_history()


@pytest.fixture(scope="module")
def review(history: History) -> Review:
    return step_review(history)


def open_report(offline: OfflinePage, review: Review, path: Path) -> None:
    """Write the report of ``review`` to ``path`` and open it; wait for its charts."""
    path.write_text(html_report(review, title="nightly thresholds: ACC_MIN"), encoding="utf-8")
    offline.allowed.add(path.as_uri())
    offline.page.goto(path.as_uri())
    offline.page.wait_for_function("Object.keys(window.thresholdBotCharts || {}).length > 0")


def window_values(history: History, metric: str) -> list[float]:
    """The values of the rule's window: the last 20 finished runs having ``metric``."""
    return [r.summary[metric] for r in history.finished if metric in r.summary][-20:]


def expected(history: History) -> dict[str, dict[str, Any]]:
    """Per chart key: the runs shown and the limits (role → values) — from the test's data."""
    acc_rule = rule_value(window_values(history, "acc"), ACC.op, 2)
    latency_rule = rule_value(window_values(history, "latency"), LATENCY.op, 0)

    def newest(metric: str) -> list[Run]:
        return [r for r in history.finished if metric in r.summary][-METRIC_RUNS:]

    return {
        "ACC_MIN": {
            "metric": "acc",
            "runs": shown_runs(history, "acc"),
            "limits": {"old": ACC.value, "proposed": float(ACC_PROPOSED), "rule": acc_rule},
        },
        "LATENCY_MAX": {
            "metric": "latency",
            "runs": shown_runs(history, "latency"),
            "limits": {"current": LATENCY.value, "rule": latency_rule},  # unchanged: one line
        },
        "acc": {"metric": "acc", "runs": newest("acc"), "limits": {}},
        "latency": {"metric": "latency", "runs": newest("latency"), "limits": {}},
    }


# The canvas's pixels (RGBA) within 2 CSS pixels of (x, y) in the chart's data coordinates.
_PIXELS_NEAR = """([key, x, y]) => { const chart = window.thresholdBotCharts[key];
  const canvas = chart.canvas, scale = canvas.width / canvas.clientWidth;
  const px = chart.scales.x.getPixelForValue(x), py = chart.scales.y.getPixelForValue(y);
  const r = Math.round(2 * scale);
  return Array.from(canvas.getContext("2d").getImageData(
    Math.round(px * scale) - r, Math.round(py * scale) - r, 2 * r + 1, 2 * r + 1).data); }"""


def drawn_near(offline: OfflinePage, key: str, x: float, y: float, colour: str) -> bool:
    """Whether chart ``key`` has a pixel of ``colour`` (``#rrggbb``) near data point (x, y)."""
    want = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    rgba = offline.page.evaluate(_PIXELS_NEAR, [key, x, y])
    pixels = [rgba[i : i + 4] for i in range(0, len(rgba), 4)]
    return any(
        p[3] > 128 and all(abs(a - b) < 48 for a, b in zip(p[:3], want, strict=True))
        for p in pixels
    )


def test_report_charts_in_chromium(
    offline_page: OfflinePage, history: History, review: Review, tmp_path: Path
) -> None:
    open_report(offline_page, review, tmp_path / "review.html")
    screenshot(offline_page.page, "report")
    want = expected(history)
    index = {r.id: i for i, r in enumerate(history.finished)}
    asked: dict[str, list[float]] = {}
    for key, chart in want.items():
        runs, metric = chart["runs"], chart["metric"]
        medians = [regime_median(history, metric, index[r.id]) for r in runs]
        asked[key] = [
            *(r.summary[metric] for r in runs),
            *medians,
            *chart["limits"].values(),
        ]
    drawn = offline_page.page.evaluate(_READ, asked)
    assert sorted(drawn) == sorted(want)

    for key, chart in want.items():
        runs, limits = chart["runs"], chart["limits"]
        pixels = drawn[key]["pixels"]
        run_pixels, median_pixels = pixels[: len(runs)], pixels[len(runs) : 2 * len(runs)]
        limit_pixels = dict(zip(limits, pixels[2 * len(runs) :], strict=True))
        by_role: dict[str, list[dict[str, Any]]] = {}
        for dataset in drawn[key]["datasets"]:
            by_role.setdefault(dataset["role"], []).append(dataset)

        (metric,) = by_role["metric"]
        assert len(metric["points"]) == len(runs), key
        assert [x for x, _ in metric["data"]] == [r.created_at.timestamp() * 1000 for r in runs]
        for (_, y), at in zip(metric["points"], run_pixels, strict=True):
            assert y == pytest.approx(at, abs=TOLERANCE), key

        # the regime medians: a step line whose corners sit at runs' regime medians
        (step,) = by_role["regime"]
        assert step["stepped"]
        median_at = {
            r.created_at.timestamp() * 1000: at for r, at in zip(runs, median_pixels, strict=True)
        }
        for (x, _), (_, y) in zip(step["data"], step["points"], strict=True):
            assert y == pytest.approx(median_at[x], abs=TOLERANCE), key

        # the limits: horizontal, across the chart, at their values' pixel heights
        assert set(limits) == {r for r in by_role if r in ("old", "proposed", "current", "rule")}
        for role, at in limit_pixels.items():
            (line,) = by_role[role]
            assert [y for _, y in line["points"]] == pytest.approx([at, at], abs=TOLERANCE)
            assert line["points"][0][0] < line["points"][1][0]

    # drawn: between the last run before the change and the first after it, the step line
    # still holds the old regime's median (it changes at the first run of the new one)
    before, after = history.finished[SHIFT - 1], history.finished[SHIFT]
    middle = (before.created_at.timestamp() + after.created_at.timestamp()) * 500
    old_median = regime_median(history, "acc", SHIFT - 1)
    new_median = regime_median(history, "acc", SHIFT)
    (step,) = [d for d in drawn["ACC_MIN"]["datasets"] if d["role"] == "regime"]
    assert drawn_near(offline_page, "ACC_MIN", middle, old_median, step["colour"])
    assert not drawn_near(offline_page, "ACC_MIN", middle, new_median, step["colour"])

    assert offline_page.attempted == []  # nothing fetched: Chart.js is in the file
    assert offline_page.errors == []


def test_hovering_a_point_shows_its_run(
    offline_page: OfflinePage, history: History, review: Review, tmp_path: Path
) -> None:
    open_report(offline_page, review, tmp_path / "review.html")
    page = offline_page.page
    runs = shown_runs(history, "acc")
    target = len(runs) // 2  # a run in the middle of ACC_MIN's chart
    run = runs[target]
    canvas = page.locator('canvas[data-chart="ACC_MIN"]')
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    assert box is not None
    x, y = page.evaluate(
        """([key, i]) => { const chart = window.thresholdBotCharts[key];
        const meta = chart.data.datasets.findIndex((d) => d.role === "metric");
        const point = chart.getDatasetMeta(meta).data[i]; return [point.x, point.y]; }""",
        ["ACC_MIN", target],
    )
    page.mouse.move(box["x"] + x, box["y"] + y)
    page.wait_for_function(
        "window.thresholdBotCharts['ACC_MIN'].tooltip.getActiveElements().length > 0"
    )
    tooltip = page.evaluate(
        """() => { const t = window.thresholdBotCharts['ACC_MIN'].tooltip;
        return { title: t.title, body: t.body.flatMap((b) => b.lines), opacity: t.opacity }; }"""
    )
    canvas.screenshot(path=str(screenshot_path("report-tooltip")))
    assert tooltip["title"] == [run.name]
    text = "\n".join(tooltip["body"])
    assert run.created_at.strftime("%Y-%m-%d %H:%M") in text
    assert f"{run.summary['acc']!r}" in text  # JavaScript prints the same shortest digits
    assert run.commit is not None and run.commit in text
    assert offline_page.attempted == []


# --------------------------------------------------------------------------- the caption

# What each role of a chart shows, in the caption's words (the test's own reading of a chart)
MEANINGS = {
    "metric": "each run's value",
    "regime": "the regime medians",
    "rule": "what the rule says",
    "proposed": "the proposed value",
    "current": "the current value",
    "old": "the old value",
    "window": "where the rule's window starts",
}
# Each role as Chart.js draws it: colour, dash, point radius, stepped
_STYLES = """() => Object.values(window.thresholdBotCharts).flatMap((chart) =>
  chart.data.datasets.map((d) => ({ role: d.role, colour: d.borderColor,
    dash: d.borderDash || [], radius: d.pointRadius, stepped: Boolean(d.stepped) })))"""


def _look(style: dict[str, Any]) -> str:
    """A drawn style in words: ``blue points``, ``dashed red line``, ``solid orange steps``."""
    colour = {hex_: name for name, hex_ in COLOURS.items()}.get(style["colour"], "violet")
    if style["radius"]:
        return f"{colour} points"
    dash = style["dash"]
    pattern = "solid" if not dash else "dotted" if max(dash) <= 3 else "dashed"
    return f"{pattern} {colour} {'steps' if style['stepped'] else 'line'}"


@pytest.mark.parametrize("audit", [False, True], ids=["pr", "audit"])
def test_the_caption_describes_the_lines_as_drawn(
    offline_page: OfflinePage, history: History, review: Review, tmp_path: Path, audit: bool
) -> None:
    if audit:  # the file as it is: nothing proposed
        review = build_review([GateChange(head=g, base=g) for g in (ACC, LATENCY)], history)
    open_report(offline_page, review, tmp_path / "review.html")
    caption = offline_page.page.inner_text("#chart-key")
    drawn = offline_page.page.evaluate(_STYLES)
    roles = {d["role"] for d in drawn}
    assert roles >= {"metric", "regime", "rule", "window"}
    assert ({"old", "proposed"} <= roles) is not audit and ("current" in roles)
    for style in drawn:  # every line is named by how it looks, with what it shows
        entry = re.search(rf"{_look(style)}: ([^;.]*)", caption, re.IGNORECASE)
        assert entry is not None and MEANINGS[style["role"]] in entry[1], (style, caption)
    assert ("propos" in caption) is not audit
    assert offline_page.errors == []


# --------------------------------------------------------------------------- the regime table

# The regime table (the one whose first header is "Period"): every cell's content within its
# cell, the cells' extent with the table scrolled to either end, and the widths around it
_MEASURE = """() => {
  const table = [...document.querySelectorAll("#review table")].find(
    (t) => t.querySelector("th").textContent.trim() === "Period");
  const cells = [...table.querySelectorAll("th, td")];
  const clipped = cells.filter((cell) => {
    const range = document.createRange(); range.selectNodeContents(cell);
    const text = range.getBoundingClientRect(), box = cell.getBoundingClientRect();
    return text.left < box.left - 0.5 || text.right > box.right + 0.5;
  }).map((cell) => cell.textContent);
  const box = table.getBoundingClientRect();
  table.scrollLeft = 0;
  const left = Math.min(...cells.map((c) => c.getBoundingClientRect().left));
  table.scrollLeft = table.scrollWidth;
  const right = Math.max(...cells.map((c) => c.getBoundingClientRect().right));
  table.scrollLeft = 0;
  return { clipped, left, right, tableLeft: box.left, tableRight: box.right,
    headers: [...table.querySelectorAll("th")].map((th) => th.textContent.trim()),
    rows: table.querySelectorAll("tbody tr").length,
    scroll: table.scrollWidth, client: table.clientWidth,
    page: document.documentElement.scrollWidth, viewport: window.innerWidth };
}"""


def _attributed(paths: ExamplePaths) -> Review:
    """The demo's review with each regime change tied to the PR that started it and the two
    merged before it (as attribution lists them: most likely first), titles shown."""
    review = review_files(paths.history, paths.head, paths.base)
    pulls = list(paths.repo.pulls)
    index = {p.number: i for i, p in enumerate(pulls)}
    changes, refs = [], {}
    for change, number in zip(review.changes, paths.repo.effect_pulls, strict=True):
        chosen = pulls[max(0, index[number] - 2) : index[number] + 1][::-1]
        changes.append(change.model_copy(update={"pulls": tuple(p.number for p in chosen)}))
        refs |= {p.number: PullRef(number=p.number, title=p.title) for p in chosen}
    return review.model_copy(update={"changes": tuple(changes), "pulls": refs})


def test_the_regime_table_fits_at_1280_px(offline_page: OfflinePage, tmp_path: Path) -> None:
    paths = write_example(tmp_path / "example")
    review = _attributed(paths)
    offline_page.page.set_viewport_size({"width": 1280, "height": 900})
    path = tmp_path / "review.html"
    repo = "https://github.com/rl-team/trainer"
    path.write_text(html_report(review, title="demo", repo_url=repo), encoding="utf-8")
    offline_page.allowed.add(path.as_uri())
    offline_page.page.goto(path.as_uri())
    shown = offline_page.page.evaluate(_MEASURE)
    screenshot(offline_page.page, "report-1280")
    metrics = regime_metrics(review)
    assert shown["headers"] == ["Period", "Runs", *metrics, "Started by"]  # the names whole
    assert shown["rows"] == len(review.regimes) and len(metrics) >= 7  # a wide table
    assert shown["clipped"] == []  # no cell's content runs past its cell
    # fully reachable: scrolled to either end, the cells lie within the table's box ...
    assert shown["left"] >= shown["tableLeft"] - 0.5
    assert shown["right"] <= shown["tableRight"] + 0.5
    # ... which lies within the page, and the page within the window
    assert shown["tableRight"] <= shown["viewport"] and shown["page"] <= shown["viewport"]
    # and at this width nothing waits behind a scroll: the names wrap at / and _
    assert shown["scroll"] <= shown["client"]
    assert offline_page.errors == []
