"""The terminal's sparklines: glyphs for known values, buckets beyond the width, and the
``history`` row of each gate in the table format, within 80 columns."""

from __future__ import annotations

import math
from datetime import timedelta

from rich.console import Console

from bot.core.models import ChartPoint, GateChart
from bot.core.render.sparkline import GLYPHS, sparkline
from bot.core.render.terminal import SPARK_WIDTH, review_table
from tests.test_render import T0, gate, review


def test_the_lowest_value_is_the_lowest_block_and_the_highest_the_full_block() -> None:
    values = [3.0, 10.0, 4.0, 7.0]
    line = sparkline(values, 10)
    assert len(line) == len(values)
    assert line[0] == "▁" and line[1] == "█"
    # the others at the nearest of the eight heights: (v - min) / (max - min) * 7 = 1 and 4
    assert line[2:] == GLYPHS[1] + GLYPHS[4]


def test_eight_evenly_spaced_values_are_the_eight_blocks_in_order() -> None:
    assert sparkline([float(v) for v in range(8)], 8) == "▁▂▃▄▅▆▇█"
    assert sparkline([float(-v) for v in range(8)], 8) == "█▇▆▅▄▃▂▁"


def test_a_constant_series_is_a_flat_line_at_mid_height() -> None:
    assert sparkline([0.42] * 5, 10) == "▄▄▄▄▄"
    assert sparkline([7.0], 10) == "▄"


def test_more_values_than_the_width_are_averaged_in_buckets() -> None:
    values = [0.0] * 50 + [1.0] * 50
    assert sparkline(values, 10) == "▁" * 5 + "█" * 5
    # 3 buckets of 2: means 0.5, 2.5, 4.5 -> the lowest, the middle (3.5 of 7 → 4), the highest
    assert sparkline([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], 3) == "▁" + GLYPHS[round(3.5)] + "█"


def test_non_finite_values_are_left_out_and_nothing_gives_nothing() -> None:
    assert sparkline([1.0, math.nan, 2.0, math.inf], 10) == "▁█"
    assert sparkline([], 10) == ""
    assert sparkline([math.nan], 10) == ""
    assert sparkline([1.0, 2.0], 0) == ""


def test_extreme_values_of_opposite_signs_do_not_overflow() -> None:
    assert sparkline([-1e308, 0.0, 1e308], 3) == "▁" + GLYPHS[round(3.5)] + "█"


def _chart(values: list[float]) -> GateChart:
    points = tuple(
        ChartPoint(at=T0 + timedelta(days=i), value=v, run=f"nightly-{i}")
        for i, v in enumerate(values)
    )
    return GateChart(
        metric="eval/all/avg_score",
        points=points,
        window_start=max(0, len(points) - 20),
        old=0.56,
        proposed=0.5,
        rule=0.5,
    )


def _lines(width: int, *gates: object) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(review_table(review(gates=gates)))
    return console.export_text().splitlines()


def test_each_gate_with_a_history_gets_a_sparkline_row_within_80_columns() -> None:
    values = [0.5 + i / 1000 for i in range(60)]  # rising: the line climbs from ▁ to █
    long_name = "test_accuracy_of_the_gsm8k_benchmark_with_the_new_tokenizer_after_step_500"
    charted = gate(name=long_name, chart=_chart(values))
    plain = gate(name="NO_HISTORY")
    lines = _lines(80, charted, plain)
    assert max(len(line) for line in lines) <= 80
    rows = [line for line in lines if line.startswith("  history ")]
    assert len(rows) == 1  # the gate without chart data has none
    glyphs = "".join(c for c in rows[0] if c in GLYPHS)
    assert len(glyphs) == SPARK_WIDTH  # 60 runs in 32 buckets
    assert glyphs[0] == "▁" and glyphs[-1] == "█"
    assert list(glyphs) == sorted(glyphs, key=GLYPHS.index)  # never going down
    assert rows[0].rstrip().endswith("(60 runs, oldest first)")


def test_a_short_history_shows_one_glyph_per_run() -> None:
    values = [3.0, 1.0, 2.0]
    [row] = [line for line in _lines(80, gate(chart=_chart(values))) if "history" in line]
    assert "█▁▅ (3 runs, oldest first)" in row  # 2.0: half way, 3.5 of 7 → ▅
