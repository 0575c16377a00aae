"""The HTML report (``html_report``, ``review --format html``), without a browser (the
browser tests: tests/test_browser_report.py).

The page is read back with the standard library's HTML parser: it fetches nothing (no
``src``, no stylesheet, links only to the review's GitHub PRs or inside the page), its
Content-Security-Policy allows only inline script and style, the charts' JSON parses and
holds each run's point, the limits, the regime steps and the window's start as computed
from the test's data, and hostile names stay text.  Through the CLI: the report is written
to ``--output`` with the same exit status as ``--format markdown``.
"""

from __future__ import annotations

import json
from contextlib import chdir
from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app
from bot.core.models import ChartPoint, GateChart, MetricChart
from bot.core.render.html_report import CSP, comment_html, html_report
from bot.core.render.review import render_comment
from demo.data import ExamplePaths, write_example
from tests.test_render import T0, gate, regimes, review
from tests.test_render_kinds import reference

RUNNER = CliRunner()
HOSTILE = '</script><script>alert(1)</script><!-- "x" & <img src=x onerror=alert(2)>'


class Page(HTMLParser):
    """The elements of a page (tag, attributes) and the text of each script and title."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.title = ""
        self._open: str | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag in ("script", "title"):
            self._open = tag
            if tag == "script":
                self.scripts.append((dict(attrs), ""))

    def handle_endtag(self, tag: str) -> None:
        self._open = None

    def handle_data(self, data: str) -> None:
        if self._open == "script":
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)
        elif self._open == "title":
            self.title += data

    def tags(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.elements if tag == name]

    def charts(self) -> list[dict[str, Any]]:
        """The embedded chart specs (the JSON script's text, parsed)."""
        [data] = [t for a, t in self.scripts if a.get("type") == "application/json"]
        charts: list[dict[str, Any]] = json.loads(data)["charts"]
        return charts


def ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


# three regimes over 30 nightly runs: the medians change at runs 10 and 22
MEDIANS = [0.52] * 10 + [0.55] * 12 + [0.53] * 8
VALUES = [m + (0.01 if i % 2 else -0.01) for i, m in enumerate(MEDIANS)]


def points(values: list[float] = VALUES, medians: list[float] = MEDIANS) -> tuple[ChartPoint, ...]:
    return tuple(
        ChartPoint(
            at=T0 + timedelta(days=i, hours=i % 3),
            value=v,
            run=f"nightly-{i}",
            commit=f"{i:040x}",
            regime_median=m,
        )
        for i, (v, m) in enumerate(zip(values, medians, strict=True))
    )


def limit_chart(**kw: Any) -> GateChart:
    base: dict[str, Any] = {
        "metric": "eval/all/avg_score",
        "points": points(),
        "window_start": 10,
        "old": 0.56,
        "proposed": 0.5,
        "rule": 0.51,
    }
    return GateChart(**(base | kw))


def by_role(chart: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    roles: dict[str, list[dict[str, Any]]] = {}
    for dataset in chart["datasets"]:
        roles.setdefault(dataset["role"], []).append(dataset)
    return roles


def test_the_json_holds_each_run_the_limits_the_regime_steps_and_the_window() -> None:
    chart = limit_chart()
    page = Page(html_report(review(gates=(gate(chart=chart),)), title="nightly"))
    [spec] = page.charts()
    assert spec["key"] == "EVAL_ACC_MIN_VALUE" and spec["kind"] == "gate"
    roles = by_role(spec)
    [metric] = roles["metric"]
    assert [(p["x"], p["y"]) for p in metric["points"]] == [
        (ms(p.at), p.value) for p in chart.points
    ]
    assert [p["run"] for p in metric["points"]] == [f"nightly-{i}" for i in range(30)]
    assert [p["commit"] for p in metric["points"]] == [f"{i:040x}" for i in range(30)]
    # the limits: horizontal lines across the chart's x range
    first, last = ms(chart.points[0].at), ms(chart.points[-1].at)
    for role, value in (("old", 0.56), ("proposed", 0.5), ("rule", 0.51)):
        [line] = roles[role]
        assert [(p["x"], p["y"]) for p in line["points"]] == [(first, value), (last, value)]
    assert spec["x"] == {"min": first, "max": last}
    # the regime medians: a step at the first run of each regime, and one at the last run
    [steps] = roles["regime"]
    assert steps["stepped"] is True
    changes = [0] + [i for i in range(1, 30) if MEDIANS[i] != MEDIANS[i - 1]] + [29]
    assert changes == [0, 10, 22, 29]
    assert [(p["x"], p["y"]) for p in steps["points"]] == [
        (ms(chart.points[i].at), MEDIANS[i]) for i in changes
    ]
    # the window's first run: a vertical line from the bottom of the chart to the top
    [window] = roles["window"]
    at = ms(chart.points[10].at)
    assert [(p["x"], p["y"]) for p in window["points"]] == [
        (at, spec["y"]["min"]),
        (at, spec["y"]["max"]),
    ]
    # the y range holds every value and limit, with a margin of 5% of their span
    low, high = min([*VALUES, 0.5]), max([*VALUES, 0.56])
    assert spec["y"]["min"] == pytest.approx(low - 0.05 * (high - low))
    assert spec["y"]["max"] == pytest.approx(high + 0.05 * (high - low))
    [canvas] = page.tags("canvas")
    assert canvas["id"] == "chart-0" and canvas["data-chart"] == "EVAL_ACC_MIN_VALUE"


def test_a_reference_gate_draws_each_band_edge_and_an_added_gate_no_old_value() -> None:
    chart = limit_chart(
        old=None,
        old_band=None,
        proposed=0.95,
        proposed_band=(0.874, None),  # a lower bound only: one edge
        rule=0.93,
        rule_band=(0.8556, 1.0044),
    )
    page = Page(html_report(review(gates=(reference(chart=chart),)), title="ref"))
    roles = by_role(page.charts()[0])
    assert "old" not in roles
    assert [(d["edge"], d["points"][0]["y"]) for d in roles["proposed"]] == [("low", 0.874)]
    assert [(d["edge"], d["points"][0]["y"]) for d in roles["rule"]] == [
        ("low", 0.8556),
        ("high", 1.0044),
    ]


def test_metric_charts_follow_the_gates_and_names_taken_get_a_number() -> None:
    metric = MetricChart(metric="EVAL_ACC_MIN_VALUE", points=points())
    other = MetricChart(metric="timing/step_s", points=points())
    empty = MetricChart(metric="nothing", points=())
    shown = review(gates=(gate(chart=limit_chart()),), metric_charts=(metric, other, empty))
    page = Page(html_report(shown, title="t"))
    specs = page.charts()
    assert [(s["key"], s["kind"]) for s in specs] == [
        ("EVAL_ACC_MIN_VALUE", "gate"),
        ("EVAL_ACC_MIN_VALUE (2)", "metric"),
        ("timing/step_s", "metric"),
    ]
    assert [c["data-chart"] for c in page.tags("canvas")] == [s["key"] for s in specs]
    assert [c["id"] for c in page.tags("canvas")] == ["chart-0", "chart-1", "chart-2"]
    # a metric chart: its runs and the regime steps, no limits, no window
    assert sorted(by_role(specs[2])) == ["metric", "regime"]
    assert len(by_role(specs[2])["metric"][0]["points"]) == len(VALUES)


def test_the_page_fetches_nothing_and_runs_only_its_inline_scripts() -> None:
    repo = "https://github.com/rl-team/trainer"
    text = html_report(review(gates=(gate(chart=limit_chart()),)), title="t", repo_url=repo)
    page = Page(text)
    assert all("src" not in attrs for _, attrs in page.elements)
    assert page.tags("link") == [] and page.tags("iframe") == [] and page.tags("img") == []
    hrefs = [a["href"] or "" for a in page.tags("a")]
    assert any(h.startswith(f"{repo}/pull/") for h in hrefs)  # the regime table's PRs
    assert all(h.startswith("#") or h.startswith(f"{repo}/pull/") for h in hrefs)
    assert "url(" not in text and "@import" not in text and "sourceMappingURL" not in text
    [csp] = [m for m in page.tags("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    assert csp["content"] == CSP
    assert "default-src 'none'" in CSP and "script-src 'unsafe-inline'" in CSP
    assert "connect-src" not in CSP  # nothing to connect to: default-src 'none'
    # three scripts: the data (not run), Chart.js, and the page's own
    assert [a.get("type") for a, _ in page.scripts] == ["application/json", None, None]
    assert "Chart.js v4" in page.scripts[1][1]
    assert "window.thresholdBotCharts" in page.scripts[2][1]


def test_hostile_names_cannot_leave_their_place() -> None:
    chart = limit_chart(metric=HOSTILE)
    shown = review(
        gates=(gate(name=HOSTILE, metric=HOSTILE, chart=chart),),
        metric_charts=(MetricChart(metric=HOSTILE, points=points()),),
    )
    text = html_report(shown, title=HOSTILE)
    page = Page(text)
    assert len(page.scripts) == 3 and page.tags("img") == []
    assert text.count("<script") == 3 and text.count("</script>") == 3
    assert page.title == " ".join(HOSTILE.split())  # escaped: the same text comes back
    specs = page.charts()
    assert [s["key"] for s in specs] == [HOSTILE, f"{HOSTILE} (2)"]
    assert specs[0]["metric"] == HOSTILE
    assert [c["data-chart"] for c in page.tags("canvas")] == [HOSTILE, f"{HOSTILE} (2)"]


def test_the_comment_keeps_its_own_html_and_drops_mermaid() -> None:
    folded = review(gates=(gate(chart=limit_chart()),), regimes=regimes(9))
    markdown = render_comment(folded)
    assert "```mermaid" in markdown  # the comment's chart
    page = Page(str(comment_html(markdown)))
    assert page.tags("details") and page.tags("summary")  # the folded regime table
    assert "xychart" not in str(comment_html(markdown))
    assert any(a["href"] == "#charts" for a in page.tags("a"))
    # raw HTML outside the allow-list stays text, even in an HTML block
    evil = comment_html("<details>\n<summary>x <img src=a onerror=b> y</summary>\n</details>\n")
    assert Page(str(evil)).tags("img") == [] and "&lt;img src=a onerror=b&gt;" in evil


def test_a_review_without_history_has_no_charts_but_the_review() -> None:
    page = Page(html_report(review(), title="t"))
    assert page.charts() == [] and page.tags("canvas") == []
    assert page.tags("table")  # the gates table of the comment


# --------------------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> ExamplePaths:
    return write_example(tmp_path_factory.mktemp("example"))


def _review(paths: ExamplePaths, *extra: str) -> Result:
    files = [p.relative_to(paths.root) for p in (paths.history, paths.head, paths.base)]
    args = ["review", "--history", files[0], "--file", files[1], "--base", files[2]]
    with chdir(paths.root):
        return RUNNER.invoke(app, [str(a) for a in (*args, *extra)])


def _when(text: str) -> int:
    return ms(datetime.fromisoformat(text.replace("Z", "+00:00")))


@pytest.mark.parametrize("fail_on", [[], ["--fail-on", "action_required"]])
def test_review_writes_the_report_with_the_exit_status_of_markdown(
    example: ExamplePaths, tmp_path: Path, fail_on: list[str]
) -> None:
    out = tmp_path / "review.html"
    written = _review(example, "--format", "html", "--output", str(out), *fail_on)
    markdown = _review(example, "--format", "markdown", *fail_on)
    assert written.exit_code == markdown.exit_code == (1 if fail_on else 0)
    assert written.stdout == ""
    data: dict[str, Any] = json.loads(_review(example, "--format", "json").stdout)
    specs = {s["key"]: s for s in Page(out.read_text(encoding="utf-8")).charts()}
    assert [k for k, s in specs.items() if s["kind"] == "gate"] == [
        g["name"] for g in data["gates"]
    ]
    assert any(s["kind"] == "metric" for s in specs.values())
    for g in data["gates"]:
        roles = by_role(specs[g["name"]])
        [metric] = roles["metric"]
        # the window plus the runs the old value's failures are counted on
        shown = max(g["window"]["runs"], g["old_failures"]["total"])
        assert len(metric["points"]) == shown
        assert metric["points"][-1]["x"] == _when(g["window"]["last"])
        assert roles["window"][0]["points"][0]["x"] == _when(g["window"]["first"])
        # the proposed value, or one line of the current value where the PR leaves it
        value = "proposed" if g["old"] != g["proposed"] else "current"
        assert value in roles and ({"old", "proposed"} & set(roles)) == (
            {"old", "proposed"} if value == "proposed" else set()
        )
        assert roles[value][0]["points"][0]["y"] == g["proposed"]
        assert roles["rule"][0]["points"][0]["y"] == g["recomputed"]


def test_html_needs_an_output_file(example: ExamplePaths) -> None:
    shown = _review(example, "--format", "html")
    assert shown.exit_code == 2 and shown.stdout == ""
    assert "--format html" in shown.stderr and "--output" in shown.stderr
