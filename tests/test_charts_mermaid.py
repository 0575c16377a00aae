"""The Mermaid charts of the PR comment: the text of each ``xychart-beta`` block (points,
buckets, y range, the limit lines, the palette the legend names), escaping of outside
strings, and the comment's layout, ``charts: off`` and GitHub's size limit. Expected
values are computed here from the test's points."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from bot.core.analysis.review import unavailable_review
from bot.core.config import ConfigError, parse_config
from bot.core.models import (
    Band,
    ChartPoint,
    Failures,
    Gate,
    GateChange,
    GateChart,
    GateReview,
    Review,
    Verdict,
)
from bot.core.render.charts import COLOURS, MAX_POINTS, chart_legend, mermaid_chart, mermaid_text
from bot.core.render.review import GITHUB_TEXT_LIMIT, render_comment

T0 = datetime(2026, 7, 1, 6, tzinfo=UTC)
HOSTILE = [
    'acc"] line [1, 2] %%{init: {}}%%',
    "a\nline [9]\n```\n<script>alert(1)</script>",
    "x --> y ; classDef style:red #12; `code` & ü ≥ 😀",
    ']]] [[[ "\'" %% -->',
]


def base_gate(name: str = "ACC_MIN", verdict: Verdict = "ok") -> GateReview:
    g = Gate(
        name=name,
        file="ci/nightly.sh",
        line=3,
        metric="eval/acc",
        op=">=",
        value=0.52,
        literal="0.52",
        start=0,
        end=4,
    )
    old = g.model_copy(update={"value": 0.56, "literal": "0.56"})
    review = unavailable_review([GateChange(head=g, base=old)], "unused")
    return review.gates[0].model_copy(
        update={
            "verdict": verdict,
            "recomputed": 0.5,
            "decimals": 2,
            "old_failures": Failures(failed=0, total=30),
        }
    )


def points(
    values: list[float], medians: Sequence[float | None] | None = None
) -> tuple[ChartPoint, ...]:
    """One run a day from ``T0``."""
    meds: Sequence[float | None] = medians or [None] * len(values)
    return tuple(
        ChartPoint(
            at=T0 + timedelta(days=i), value=v, run=f"run-{i}", commit=f"{i:07x}", regime_median=m
        )
        for i, (v, m) in enumerate(zip(values, meds, strict=True))
    )


def with_chart(g: GateReview, chart: GateChart) -> GateReview:
    return g.model_copy(update={"chart": chart})


def limit_chart(values: list[float], medians: Sequence[float | None] | None = None) -> GateChart:
    return GateChart(
        metric="eval/acc",
        points=points(values, medians),
        window_start=max(0, len(values) - 20),
        old=0.56,
        proposed=0.52,
        rule=0.5,
    )


class Parsed:
    """The parts of one chart's Mermaid text."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        init = re.fullmatch(r'%%\{init: .*"plotColorPalette": "([^"]*)".*\}%%', self.lines[0])
        assert init, self.lines[0]
        self.palette = [c.strip() for c in init.group(1).split(",")]
        assert self.lines[1] == "xychart-beta"
        y = next(line for line in self.lines if line.startswith("    y-axis "))
        match = re.fullmatch(r'    y-axis "[^"]*" (-?[\d.]+) --> (-?[\d.]+)', y)
        assert match, y
        self.low, self.high = float(match.group(1)), float(match.group(2))
        x = next(line for line in self.lines if line.startswith("    x-axis "))
        self.categories = re.findall(r'"([^"]*)"', x.split("[", 1)[1])
        self.series = [
            [float(v) for v in line[len("    line [") : -1].split(", ")]
            for line in self.lines
            if line.startswith("    line [")
        ]


# --------------------------------------------------------------------------- points, lines


def test_each_run_is_a_point_with_a_line_per_limit() -> None:
    values = [0.53 + 0.001 * (i % 7) for i in range(45)]
    medians = [0.531] * 20 + [0.534] * 25
    g = with_chart(base_gate(), limit_chart(values, medians))
    text = mermaid_chart(g)
    assert text is not None
    chart = Parsed(text)
    assert len(chart.categories) == 45 and len(set(chart.categories)) == 45
    metric, old, proposed, rule, regime = chart.series
    assert metric == pytest.approx(values)
    assert old == [0.56] * 45 and proposed == [0.52] * 45 and rule == [0.5] * 45
    assert regime == pytest.approx(medians)
    # the palette names each line as the legend does, in order
    assert chart.palette == [COLOURS[c] for c in ("blue", "red", "green", "grey", "orange")]
    legend = chart_legend(g)
    order = [part.split(":")[0] for part in legend.split("; ")][:5]
    assert order == ["blue", "red", "green", "grey", "orange"]
    assert "red: old limit 0.56" in legend and "green: proposed 0.52" in legend
    assert "grey: the rule's 0.50" in legend
    assert "the window: the last 20 runs, since 26 Jul" in legend  # T0 + 25 days


def test_y_range_holds_the_data_and_every_limit_with_a_margin() -> None:
    values = [0.53 + 0.001 * (i % 7) for i in range(30)]
    g = with_chart(base_gate(), limit_chart(values))
    chart = Parsed(mermaid_chart(g) or "")
    drawn = [v for series in chart.series for v in series]
    low, high = min(drawn), max(drawn)  # 0.5 (the rule) .. 0.56 (the old limit)
    assert chart.low <= low - 0.05 * (high - low) + 1e-12
    assert chart.high >= high + 0.05 * (high - low) - 1e-12
    assert chart.high - chart.low <= 1.5 * (high - low)  # fitted, not from zero
    assert chart.low > 0


def test_many_runs_are_averaged_in_buckets() -> None:
    n = 157
    values = [float(i % 11) + 0.25 for i in range(n)]
    medians = [5.0] * 100 + [6.0] * 57
    g = with_chart(base_gate(), limit_chart(values, medians))
    chart = Parsed(mermaid_chart(g) or "")
    assert len(chart.categories) == MAX_POINTS == len(chart.series[0])
    # bucket k: points k·n/60 … (k+1)·n/60 (floored), the mean of their values
    bounds = [k * n // MAX_POINTS for k in range(MAX_POINTS + 1)]
    means = [sum(values[a:b]) / (b - a) for a, b in itertools.pairwise(bounds)]
    assert chart.series[0] == pytest.approx(means, abs=1e-7)
    regime = [sum(m or 0.0 for m in medians[a:b]) / (b - a) for a, b in itertools.pairwise(bounds)]
    assert chart.series[-1] == pytest.approx(regime, abs=1e-7)
    assert all(len(s) == MAX_POINTS for s in chart.series)
    assert len(Parsed(mermaid_chart(g, max_points=25) or "").series[0]) == 25


def test_dates_label_the_axis_distinctly() -> None:
    """Up to 10 dates are written, the newest last; runs of one day are told apart."""
    values = [0.53] * 6
    chart = limit_chart(values).model_copy(
        update={
            "points": tuple(
                p.model_copy(update={"at": T0 + timedelta(hours=6 * i)})
                for i, p in enumerate(points(values))
            )
        }
    )
    parsed = Parsed(mermaid_chart(with_chart(base_gate(), chart)) or "")
    assert parsed.categories == [
        "1 Jul",
        "1 Jul (2)",
        "1 Jul (3)",
        "2 Jul",
        "2 Jul (2)",
        "2 Jul (3)",
    ]
    many = Parsed(mermaid_chart(with_chart(base_gate(), limit_chart([0.53] * 45))) or "")
    shown = [c for c in many.categories if c.strip("\u200b\u200c")]
    assert len(shown) == 9 and shown[-1] == "14 Aug"  # every fifth, from the newest
    assert len(set(many.categories)) == 45


def test_unchanged_limit_is_one_line_and_missing_medians_are_filled() -> None:
    chart = limit_chart([0.53, 0.54, 0.55], [None, 0.54, None]).model_copy(update={"old": 0.52})
    g = with_chart(base_gate(), chart)
    parsed = Parsed(mermaid_chart(g) or "")
    assert parsed.series[1:] == [[0.52] * 3, [0.5] * 3, [0.54] * 3]
    assert parsed.palette == [COLOURS[c] for c in ("blue", "green", "grey", "orange")]
    assert "green: the limit 0.52 (unchanged)" in chart_legend(g)
    no_medians = Parsed(mermaid_chart(with_chart(base_gate(), limit_chart([0.5, 0.6]))) or "")
    assert len(no_medians.series) == 4 and len(no_medians.palette) == 4


def test_reference_bands_draw_their_edges() -> None:
    chart = limit_chart([0.93, 0.94, 0.92]).model_copy(
        update={
            "old": 0.95,
            "proposed": 0.94,
            "rule": 0.93,
            "old_band": (0.874, None),
            "proposed_band": (0.8648, 1.0152),
            "rule_band": (0.8556, None),
        }
    )
    g = base_gate().model_copy(
        update={"kind": "reference", "old_band": Band(band_low=0.874), "decimals": 2}
    )
    parsed = Parsed(mermaid_chart(with_chart(g, chart)) or "")
    assert parsed.series[1:] == [[0.874] * 3, [0.8648] * 3, [1.0152] * 3, [0.8556] * 3]
    assert parsed.palette == [COLOURS[c] for c in ("blue", "red", "green", "green", "grey")]
    assert parsed.low <= 0.8556 and parsed.high >= 1.0152
    legend = chart_legend(with_chart(g, chart))
    assert "red: old band ≥ 0.874" in legend and "green: proposed band 0.8648 – 1.0152" in legend


def test_numbers_never_use_an_exponent() -> None:
    for values in ([1.5e-7, 2.5e-7, 1e-7], [1e12, 3e12, 2e12]):
        chart = limit_chart(values).model_copy(
            update={"old": None, "rule": None, "proposed": values[0]}
        )
        text = mermaid_chart(with_chart(base_gate(), chart)) or ""
        assert not re.search(r"\d[eE][-+]?\d", text)
        parsed = Parsed(text)
        assert parsed.series[0] == pytest.approx(values, rel=1e-7)
        assert parsed.low <= min(values) and parsed.high >= max(values)


def test_no_chart_without_data() -> None:
    assert mermaid_chart(base_gate()) is None and chart_legend(base_gate()) == ""


def test_the_same_gate_gives_the_same_text() -> None:
    g = with_chart(base_gate(), limit_chart([0.5 + i / 1000 for i in range(90)]))
    assert mermaid_chart(g) == mermaid_chart(g.model_copy(deep=True))


# --------------------------------------------------------------------------- escaping


@pytest.mark.parametrize("value", HOSTILE)
def test_mermaid_text_is_a_safe_set_and_decodes_back(value: str) -> None:
    text = mermaid_text(value, limit=1000)
    assert re.fullmatch(r"[A-Za-z0-9 _.,/+()#;-]*", text)
    decoded = re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), text)
    assert decoded == " ".join(value.split("\n")).strip()


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_names_cannot_leave_their_labels(value: str) -> None:
    chart = limit_chart([0.53, 0.54]).model_copy(update={"metric": value})
    text = mermaid_chart(with_chart(base_gate(name=value), chart)) or ""
    assert "`" not in text and "<" not in text and "%%" not in text.split("\n", 1)[1]
    statements = ("xychart-beta", '    title "', '    x-axis "', '    y-axis "', "    line [")
    lines = text.split("\n")
    assert lines[0].startswith("%%{init: ") and len(lines) == 9  # 4 lines: no medians
    for line in lines[1:]:
        assert line.startswith(statements) and line.count('"') % 2 == 0
    assert Parsed(text).series[0] == [0.53, 0.54]


# --------------------------------------------------------------------------- the comment


def review_of(gates: list[GateReview]) -> Review:
    return Review(conclusion="action_required", gates=tuple(gates))


def test_comment_folds_attention_charts_apart_from_the_others() -> None:
    values = [0.53 + 0.001 * (i % 7) for i in range(40)]
    tight = with_chart(base_gate("TIGHT", "too_tight"), limit_chart(values))
    fine = [with_chart(base_gate(f"FINE_{i}"), limit_chart(values)) for i in range(3)]
    text = render_comment(review_of([tight, *fine]))
    assert text.count("```mermaid") == 4
    assert "<details><summary>📈 <code>TIGHT</code> over the last 40 runs</summary>" in text
    assert "<details><summary>📈 Charts of the 3 other gates</summary>" in text
    assert text.index("TIGHT</code> over") < text.index("Charts of the 3 other")
    assert text.count("blue: <code>eval/acc</code> per run") == 4
    off = render_comment(review_of([tight, *fine]), charts=False)
    assert "mermaid" not in off and "xychart" not in off and "📈" not in off


def test_hostile_gate_names_stay_inside_the_comment_blocks() -> None:
    values = [0.53, 0.54, 0.55]
    gates = [with_chart(base_gate(name, "too_tight"), limit_chart(values)) for name in HOSTILE]
    text = render_comment(review_of(gates))
    # what to do shows the command to copy in a code block, the names as the shell needs them
    charts, steps = text.split("#### What to do")
    assert charts.count("```mermaid") == len(HOSTILE)
    assert charts.count("```") == 2 * len(HOSTILE)
    assert "<script>" not in charts
    block = re.search(r"^( *)(`{3,})sh\n.*?\n\1\2$", steps, re.DOTALL | re.MULTILINE)
    assert block is not None and "<script>" not in steps.replace(block[0], "")


def test_charts_go_first_when_the_comment_is_too_long() -> None:
    values = [0.5 + (i % 13) / 997 for i in range(60)]
    tight = [
        with_chart(base_gate(f"TIGHT_{i}", "too_tight"), limit_chart(values)) for i in range(3)
    ]
    fine = [with_chart(base_gate(f"FINE_{i}"), limit_chart(values)) for i in range(40)]
    text = render_comment(review_of([*tight, *fine]))
    assert len(text) <= GITHUB_TEXT_LIMIT
    assert text.count("```mermaid") == 3 and "other gates" not in text
    assert "Truncated" not in text

    many = [with_chart(base_gate(f"T_{i}", "too_tight"), limit_chart(values)) for i in range(30)]
    text = render_comment(review_of(many))
    assert len(text) <= GITHUB_TEXT_LIMIT and "mermaid" not in text
    assert text == render_comment(review_of(many), charts=False)


def test_report_link_under_the_verdict() -> None:
    review = review_of([base_gate()])
    text = render_comment(review, report_url="https://bot.example/reports/abc")
    lines = text.split("\n")
    assert "[Open the interactive report](https://bot.example/reports/abc)" in lines[3]
    assert "interactive report" not in render_comment(review)
    assert render_comment(review, report_url="javascript:alert(1)") == render_comment(review)


@pytest.mark.parametrize(
    ("text", "charts", "report"),
    [
        ("", "mermaid", True),
        ("charts: off\nreport: off", "off", False),  # YAML 1.1: bare off is false
        ("charts: 'off'\nreport: 'on'", "off", True),
        ("charts: mermaid\nreport: false", "mermaid", False),
    ],
)
def test_config_keys(text: str, charts: str, report: bool) -> None:
    config = parse_config(text)
    assert (config.charts, config.report) == (charts, report)


@pytest.mark.parametrize("text", ["charts: png", "charts: true", "report: maybe", "report: 1"])
def test_config_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match=text.split(":")[0]):
        parse_config(text)
