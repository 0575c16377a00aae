"""A gate's chart as a Mermaid ``xychart-beta`` block for the PR comment (pure text).

What is drawn (docs/pr-comment.md#charts): the metric per run, oldest left; a horizontal
line for each limit — old (red), proposed (green), the rule's (grey), a reference gate's
band edges in the same colours — and the regime medians as a step line (orange). The init
directive sets the plot colour palette line by line, so :func:`chart_legend` can name each
colour. Beyond ``max_points`` runs, consecutive runs are averaged in buckets (each labelled
with its last run's date). The x-axis is categorical, so labels must differ: runs (or
buckets) sharing a date are labelled ``3 Jul``, ``3 Jul (2)``, ``3 Jul (3)``…

Outside text (gate and metric names) goes through :func:`mermaid_text`: a safe character
set, everything else as Mermaid's entity codes (``#35;``), so it can neither end a quoted
label nor start a statement, a comment, a directive, or close the code block.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from bot.core.formatting import day_month
from bot.core.models import BandEdges, ChartPoint, GateChart, GateReview
from bot.core.render.conditions import band_number
from bot.core.render.gates import value_text
from bot.core.render.markdown import ZWSP, Markdown, code, escape

__all__ = [
    "MAX_POINTS",
    "ChartView",
    "chart_legend",
    "chart_points",
    "chart_view",
    "mermaid_chart",
    "mermaid_text",
]

MAX_POINTS = 60
TEXT_LIMIT = 80  # characters of outside text in a title or axis label
DATE_LABELS = 10  # dates written on the x-axis at most
MARGIN = 0.05  # of the data's span, above and below
COLOURS = {  # the names the legend uses -> the palette's colours
    "blue": "#2563eb",
    "red": "#dc2626",
    "green": "#16a34a",
    "grey": "#6b7280",
    "orange": "#ea580c",
}
_SAFE = re.compile(r"[A-Za-z0-9 _.,/+()-]")
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def mermaid_text(value: str, limit: int = TEXT_LIMIT) -> str:
    """``value`` safe inside a quoted Mermaid label: letters, digits, spaces and ``_.,/+()-``
    as they are, any other character as its entity code ``#NNN;`` (Mermaid shows it as the
    character); line breaks and control characters become one space; longer than ``limit``
    characters: shortened with an ellipsis."""
    text = _BREAKS.sub(" ", value).strip()
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return "".join(c if _SAFE.fullmatch(c) else f"#{ord(c)};" for c in text)


def _number(value: float) -> str:
    """A data value: up to 8 significant digits, never an exponent (Mermaid reads none)."""
    text = np.format_float_positional(value, precision=8, fractional=False, trim="-")
    return "0" if text in ("-0", "0") else text


@dataclass(frozen=True)
class _Line:
    colour: str
    label: str  # the legend's words for it
    values: tuple[float, ...]


def chart_points(points: Sequence[ChartPoint], max_points: int = MAX_POINTS) -> list[ChartPoint]:
    """``points``, or at most ``max_points`` buckets of consecutive points (sizes differing
    by one at most): each the mean of its values and regime medians, at its last run's date."""
    n = len(points)
    if n <= max_points:
        return list(points)
    bounds = [i * n // max_points for i in range(max_points + 1)]
    buckets: list[ChartPoint] = []
    for start, end in pairwise(bounds):
        part = points[start:end]
        medians = [p.regime_median for p in part if p.regime_median is not None]
        buckets.append(
            part[-1].model_copy(
                update={
                    "value": math.fsum(p.value for p in part) / len(part),
                    "regime_median": math.fsum(medians) / len(medians) if medians else None,
                }
            )
        )
    return buckets


def _blank(index: int) -> str:
    """An invisible label, distinct for each ``index``: ``index + 1`` in binary, written
    with zero-width space (0) and zero-width non-joiner (1) characters."""
    return "".join("\u200b" if bit == "0" else "\u200c" for bit in f"{index + 1:b}")


def _labels(points: Sequence[ChartPoint]) -> list[str]:
    """The x-axis labels: the short date of every few points (at most ``DATE_LABELS``,
    counted from the newest), an invisible distinct label elsewhere — Mermaid's x-axis is a
    set of categories, so equal labels would be drawn at one place. A date shown twice reads
    ``3 Jul``, then ``3 Jul (2)``."""
    newest, every = points[-1].at, -(-len(points) // DATE_LABELS)
    seen: dict[str, int] = {}
    labels = []
    for i, p in enumerate(points):
        if (len(points) - 1 - i) % every:
            labels.append(_blank(i))
            continue
        day = day_month(p.at, newest)
        seen[day] = seen.get(day, 0) + 1
        labels.append(day if seen[day] == 1 else f"{day} ({seen[day]})")
    return labels


def _medians(points: Sequence[ChartPoint]) -> tuple[float, ...] | None:
    """The regime median per point, a missing one filled from the nearest earlier point
    (else the nearest later one); None when no point has one."""
    known = [p.regime_median for p in points]
    first = next((m for m in known if m is not None), None)
    if first is None:
        return None
    filled, last = [], first
    for m in known:
        last = m if m is not None else last
        filled.append(last)
    return tuple(filled)


def _band_words(edges: BandEdges, decimals: int) -> str:
    low, high = edges
    if low is not None and high is not None:
        return f"{band_number(low, decimals)} – {band_number(high, decimals)}"
    if low is not None:
        return f"≥ {band_number(low, decimals)}"
    return "—" if high is None else f"≤ {band_number(high, decimals)}"


def _limit_lines(gate: GateReview, chart: GateChart, n: int) -> list[_Line]:
    """The horizontal lines: old, proposed (one line when unchanged), the rule's."""
    lines: list[_Line] = []
    if chart.proposed_band is not None or chart.old_band is not None:
        bands = [
            ("red", "old band", chart.old_band),
            ("green", "proposed band", chart.proposed_band),
            ("grey", "the rule's band", chart.rule_band),
        ]
        if chart.old_band == chart.proposed_band:
            bands = [("green", "the band (unchanged)", chart.proposed_band), bands[2]]
        for colour, words, edges in bands:
            if edges is None:
                continue
            drawn = tuple(e for e in edges if e is not None)
            for edge in drawn:
                label = f"{words} {_band_words(edges, gate.decimals)}"
                lines.append(_Line(colour, label, (edge,) * n))
        return lines
    old = value_text(gate.old_literal, gate.old, gate.decimals)
    proposed = value_text(gate.proposed_literal, gate.proposed, gate.decimals)
    values: list[tuple[str, str, float | None]] = [
        ("red", f"old limit {old}", chart.old),
        ("green", f"proposed {proposed}", chart.proposed),
    ]
    if chart.old is not None and chart.old == chart.proposed:
        values = [("green", f"the limit {proposed} (unchanged)", chart.proposed)]
    if chart.rule is not None:
        values.append(
            ("grey", f"the rule's {value_text('', chart.rule, gate.decimals)}", chart.rule)
        )
    return [_Line(c, words, (v,) * n) for c, words, v in values if v is not None]


def _lines(gate: GateReview, points: Sequence[ChartPoint]) -> list[_Line]:
    assert gate.chart is not None
    lines = [_Line("blue", "", tuple(p.value for p in points))]
    lines += _limit_lines(gate, gate.chart, len(points))
    medians = _medians(points)
    if medians is not None:
        lines.append(_Line("orange", "regime medians (step line)", medians))
    return lines


def _nice_range(values: Sequence[float]) -> tuple[str, str]:
    """``values``' range widened by ``MARGIN`` of its span each way, then outward to a
    round step (a tenth of the span's order of magnitude), as text."""
    low, high = min(values), max(values)
    span = high - low or abs(high) or 1.0
    low, high = low - MARGIN * span, high + MARGIN * span
    exponent = math.floor(math.log10(high - low)) - 1
    places = max(0, -exponent)
    step = 10.0**exponent
    bottom, top = math.floor(low / step) * step, math.ceil(high / step) * step
    return f"{bottom:.{places}f}", f"{top:.{places}f}"


def _drawable(gate: GateReview, max_points: int) -> list[ChartPoint] | None:
    chart = gate.chart
    if chart is None:
        return None
    finite = [p for p in chart.points if math.isfinite(p.value)]
    return chart_points(finite, max_points) if finite else None


def _axis_title(runs: int, points: int) -> str:
    """``runs by date``; with buckets: ``runs by date, mean of 2 to 3 runs per point``."""
    if runs == points:
        return "runs by date"
    fewest, most = runs // points, -(-runs // points)
    sizes = f"{fewest}" if fewest == most else f"{fewest} to {most}"
    return f"runs by date, mean of {sizes} runs per point"


def mermaid_chart(gate: GateReview, *, max_points: int = MAX_POINTS) -> str | None:
    """The text of one ```` ```mermaid ```` block (without the fences) drawing ``gate``'s
    chart, or None when it has none; the same gate gives the same text."""
    points = _drawable(gate, max_points)
    if points is None:
        return None
    assert gate.chart is not None
    lines = _lines(gate, points)
    palette = ", ".join(COLOURS[line.colour] for line in lines)
    low, high = _nice_range([v for line in lines for v in line.values])
    axis = _axis_title(len(gate.chart.points), len(points))
    # the labels are the bot's own: dates (safe characters) and zero-width characters
    categories = ", ".join(f'"{label}"' for label in _labels(points))
    init = '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "' + palette + '"}}}}%%'
    text = [
        init,
        "xychart-beta",
        f'    title "{mermaid_text(gate.name)}"',
        f'    x-axis "{axis}" [{categories}]',
        f'    y-axis "{mermaid_text(gate.chart.metric)}" {low} --> {high}',
    ]
    text += [f"    line [{', '.join(_number(v) for v in line.values)}]" for line in lines]
    return "\n".join(text)


def chart_legend(gate: GateReview) -> str:
    """One Markdown line naming each line of :func:`mermaid_chart` by its colour: ``blue:
    `metric` per run; red: old limit 0.56; green: proposed 0.52; grey: the rule's 0.50;
    orange: regime medians (step line)``, then the window's first run."""
    chart = gate.chart
    if chart is None or not chart.points:
        return ""
    parts = [f"blue: {code(chart.metric)} per run"]
    seen: set[str] = set()
    for line in _lines(gate, chart.points)[1:]:
        if line.label not in seen:
            seen.add(line.label)
            parts.append(f"{line.colour}: {escape(line.label)}")
    if 0 <= chart.window_start < len(chart.points):
        first = chart.points[chart.window_start].at
        runs = len(chart.points) - chart.window_start
        since = day_month(first, chart.points[-1].at)
        parts.append(f"the window: the last {runs} runs, since {since}")
    return Markdown("; ".join(parts))


_REFERENCE = re.compile(r"(?i)(#|\bGH-)(?=\d)")
_AUTOLINK = re.compile(r"(?i)(://|www\.)")


def _html_code(value: str) -> Markdown:
    """Outside text in ``<code>`` inside an HTML block (``<summary>``), where Markdown is not
    read: HTML-escaped, with a zero-width space breaking mentions, references and autolinks
    (as :func:`~bot.core.render.markdown.escape` does)."""
    text = html.escape(_BREAKS.sub(" ", value).strip()[:TEXT_LIMIT], quote=True)
    text = text.replace("`", "&#96;")
    text = _REFERENCE.sub(lambda m: m.group(1) + ZWSP, text).replace("@", "@" + ZWSP)
    text = _AUTOLINK.sub(lambda m: m.group(0)[0] + ZWSP + m.group(0)[1:], text)
    return Markdown(f"<code>{text}</code>")


@dataclass(frozen=True)
class ChartView:
    """One gate's chart as the comment lays it out."""

    gate: GateReview
    summary: Markdown  # 📈 <code>NAME</code> over the last 60 runs (in an HTML block)
    heading: Markdown  # the same words in a Markdown paragraph
    block: Markdown  # the ```mermaid block
    legend: Markdown


def chart_view(gate: GateReview, max_points: int = MAX_POINTS) -> ChartView | None:
    """``gate``'s chart for the comment, or None when it has none."""
    text = mermaid_chart(gate, max_points=max_points)
    if text is None or gate.chart is None:
        return None
    assert "`" not in text  # nothing in it can close the fence
    runs = len(gate.chart.points)
    shown = f"over the last {runs} run{'s' * (runs != 1)}"
    return ChartView(
        gate,
        summary=Markdown(f"📈 {_html_code(gate.name)} {shown}"),
        heading=Markdown(f"📈 {code(gate.name)} {shown}"),
        block=Markdown(f"```mermaid\n{text}\n```"),
        legend=Markdown(chart_legend(gate)),
    )
