"""Trends within a segmentation: stretches that are a level plus a slope, not a staircase.

A step detector cuts a steady trend into many short levels.  Given its boundaries, this
module keeps only those a piecewise-linear fit needs:

1. ``consolidate``: optimal partitioning over the given boundaries (a subset is kept),
   each stretch a level or a level plus a slope, under the same penalised criterion
   (one penalty per boundary, one per slope).  Joining stretches is allowed only into a
   line, so two levels a real step apart stay apart.
2. ``drop_kinks``: neighbouring stretches whose lines meet (no jump where one ends and
   the next begins, within the noise and within ``SMOOTH_FLOOR`` of the series' spread)
   are one drifting stretch: a trend that bends is still one trend.
3. ``wanders``: whether the series has no stable level at all (a random walk): with the
   drift taken out, its k-run differences grow like a walk's, its steps do not alternate
   like noise, and the residuals of the piecewise-linear fit stay autocorrelated.  A
   wandering series keeps only its jumps (``walk_jumps``).

All sums come from prefix sums, so any stretch's line costs O(1).  Values are in noise
units (the caller divides by the noise scale).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bot.core.analysis.noise import FloatArray
from bot.core.analysis.numeric import mad

SMOOTH_FLOOR = 0.02  # a jump below this share of the series' 5-95 % spread is no step
WANDER_RHO = 0.5  # lag-1 autocorrelation of residuals from which a series may wander
WANDER_RATIO = 0.45  # variance ratio (k-run over 1-run differences, per run) of a walk
WANDER_INSIDE = 0.25  # … counting only differences within stretches (a walk's are cut)
WANDER_STEPS_RHO = -0.3  # a walk's steps are uncorrelated; noise around levels gives -0.5
WANDER_LAG = 10  # k of that ratio
WANDER_JUMP = 8.0  # in a walk, a boundary stays when its jump is this many steps of the walk


@dataclass(frozen=True)
class Line:
    """Least-squares line of one stretch [a, b): value at run t is ``level + slope * (t - a)``."""

    a: int
    b: int
    level: float
    slope: float
    sse: float  # squared residuals around the line
    sse_flat: float  # … around the stretch's mean

    def at(self, t: float) -> float:
        """The line's value at run ``t``."""
        return self.level + self.slope * (t - self.a)

    def along(self) -> FloatArray:
        """The line's values at the runs of its stretch."""
        return self.level + self.slope * np.arange(self.b - self.a, dtype=np.float64)


class Fits:
    """Lines and levels of any stretch of one series, from prefix sums (O(1) each)."""

    def __init__(self, values: FloatArray) -> None:
        self.values = values
        n = values.size
        self.origin = float(np.median(values)) if n else 0.0
        y = values - self.origin  # centred: sums of squares keep their precision
        t = np.arange(n, dtype=np.float64)
        zero = np.zeros(1)
        self.t1 = np.concatenate((zero, np.cumsum(t)))
        self.t2 = np.concatenate((zero, np.cumsum(t * t)))
        self.y1 = np.concatenate((zero, np.cumsum(y)))
        self.y2 = np.concatenate((zero, np.cumsum(y * y)))
        self.ty = np.concatenate((zero, np.cumsum(t * y)))

    def line(self, a: int, b: int) -> Line:
        """The least-squares line of [a, b) (flat when it holds fewer than 3 runs)."""
        m = b - a
        st, sy = self.t1[b] - self.t1[a], self.y1[b] - self.y1[a]
        stt = self.t2[b] - self.t2[a] - st * st / m
        syy = max(self.y2[b] - self.y2[a] - sy * sy / m, 0.0)
        sty = self.ty[b] - self.ty[a] - st * sy / m
        mean = sy / m + self.origin
        if m < 3 or stt <= 0:
            return Line(a, b, mean, 0.0, syy, syy)
        slope = sty / stt
        sse = max(syy - slope * sty, 0.0)
        centre = st / m
        return Line(a, b, mean - slope * (centre - a), slope, sse, syy)

    def costs(self, starts: np.ndarray, b: int) -> tuple[FloatArray, FloatArray]:
        """Squared residuals of [s, b) for every s in ``starts``: (around lines, around means)."""
        m = b - starts
        st, sy = self.t1[b] - self.t1[starts], self.y1[b] - self.y1[starts]
        stt = self.t2[b] - self.t2[starts] - st * st / m
        syy = np.maximum(self.y2[b] - self.y2[starts] - sy * sy / m, 0.0)
        sty = self.ty[b] - self.ty[starts] - st * sy / m
        with np.errstate(divide="ignore", invalid="ignore"):
            explained = np.where((m >= 3) & (stt > 0), sty * sty / stt, 0.0)
        return np.maximum(syy - explained, 0.0), syy


def is_sloped(line: Line, slope_penalty: float) -> bool:
    """Whether the stretch is a line rather than a level under the penalised criterion."""
    return line.sse + slope_penalty < line.sse_flat


def consolidate(fits: Fits, bounds: Sequence[int], beta: float) -> list[int]:
    """The subset of ``bounds`` (first 0, last n) minimising the penalised piecewise cost.

    A stretch between two kept boundaries costs its level's or its line's squared
    residuals (a line pays ``beta`` more), a boundary costs ``beta``.  A stretch that
    spans dropped boundaries may only be a line: dropping a boundary between two levels
    is the step detector's decision, not this one's.
    """
    pos = np.asarray(bounds, dtype=np.int64)
    k = pos.size - 1
    best = np.full(k + 1, np.inf)
    best[0] = -beta
    back = np.zeros(k + 1, dtype=np.int64)
    for j in range(1, k + 1):
        starts = pos[:j]
        sse_line, sse_flat = fits.costs(starts, int(pos[j]))
        cost = sse_line + beta
        cost[j - 1] = min(cost[j - 1], sse_flat[j - 1])  # a single stretch may be a level
        total = best[:j] + cost + beta
        i = int(np.argmin(total))
        best[j], back[j] = total[i], i
    kept = [k]
    while kept[-1] > 0:
        kept.append(int(back[kept[-1]]))
    return [int(pos[i]) for i in reversed(kept)]


def jump(left: Line, right: Line) -> float:
    """How far the right stretch's line starts from where the left one's ends (half a run on)."""
    t = right.a - 0.5
    return right.at(t) - left.at(t)


def _end_variance(line: Line) -> float:
    """Variance of a line's value at one end of its stretch, in squared noise units."""
    m = line.b - line.a
    return 1.0 / m if m < 3 else (4.0 * m - 2.0) / (m * m + m)


def spread(values: FloatArray) -> float:
    """The series' 5-95 % spread: the range its levels move over, bar bad runs."""
    lo, hi = np.percentile(values, [5.0, 95.0])
    return float(hi - lo)


def drop_kinks(
    fits: Fits,
    pieces: Sequence[int],
    slope_penalty: float,
    *,
    min_effect: float,
    beta: float,
    reach: int,
) -> list[int]:
    """The boundaries of ``pieces`` that are steps, not bends inside one drifting stretch.

    A boundary next to a sloped stretch goes when the lines of up to ``reach`` runs on
    either side jump there by less than ``SMOOTH_FLOOR`` of the series' spread, or by
    less than ``min_effect`` noise units and not significantly (squared z below ``beta``).
    Local lines: a long stretch's line misses a curve's ends, short ones do not.
    """
    floor = SMOOTH_FLOOR * spread(fits.values)
    kept = [pieces[0]]
    for a, b, c in zip(pieces, pieces[1:], pieces[2:], strict=False):
        if is_sloped(fits.line(a, b), slope_penalty) or is_sloped(fits.line(b, c), slope_penalty):
            left, right = fits.line(max(a, b - reach), b), fits.line(b, min(c, b + reach))
            size = abs(jump(left, right))
            z2 = size * size / (_end_variance(left) + _end_variance(right))
            if size < floor or (size < min_effect and z2 < beta):
                continue
        kept.append(b)
    kept.append(pieces[-1])
    return kept


def residuals(fits: Fits, pieces: Sequence[int], slope_penalty: float) -> list[FloatArray]:
    """Per stretch, the values minus the stretch's line or level (whichever it is)."""
    out = []
    for a, b in itertools.pairwise(pieces):
        line = fits.line(a, b)
        if is_sloped(line, slope_penalty):
            out.append(fits.values[a:b] - line.along())
        else:
            out.append(fits.values[a:b] - line.at((a + b - 1) / 2))
    return out


def autocorrelation(parts: Sequence[FloatArray]) -> float:
    """Lag-1 autocorrelation of residuals, within each part (0 without any)."""
    num = sum(float(np.dot(r[:-1], r[1:])) for r in parts)
    den = sum(float(np.dot(r, r)) for r in parts)
    return num / den if den > 0 else 0.0


def wanders(
    fits: Fits, pieces: Sequence[int], steps_at: Sequence[int], slope_penalty: float
) -> bool:
    """Whether the series has no stable level: it moves like a random walk.

    Its level — the residuals from the piecewise fit of ``pieces`` plus the jumps at the
    boundaries ``steps_at`` (the others are bends of a trend) — has ``WANDER_LAG``-run
    differences that spread like a walk's: robust variance ratio at least ``WANDER_RATIO``
    (independent noise gives 1 / ``WANDER_LAG``, a walk 1), and at least ``WANDER_INSIDE``
    within stretches (a step detector cuts a walk where it moves most); its run-to-run
    steps do not alternate like noise around a level or a smooth curve (lag-1
    autocorrelation at least ``WANDER_STEPS_RHO``); and the residuals stay autocorrelated
    (lag 1 at least ``WANDER_RHO``).  Thresholds set on the benchmark's CI series (none
    wander) and random walks (96 % do): docs/benchmarks.md.
    """
    if fits.values.size < 4 * WANDER_LAG:
        return False
    parts = residuals(fits, pieces, slope_penalty)
    lines = [fits.line(a, b) for a, b in itertools.pairwise(pieces)]
    steps_set = set(steps_at)
    offset, shifted = 0.0, []
    for i, (part, line) in enumerate(zip(parts, lines, strict=True)):
        if i and line.a in steps_set:
            offset += jump(lines[i - 1], line)
        shifted.append(part + offset)
    level = np.concatenate(shifted)
    steps = np.diff(level)
    s1 = mad(steps)
    if s1 <= 0:
        return False
    moves = level[WANDER_LAG:] - level[:-WANDER_LAG]
    stretch = np.searchsorted(np.asarray(steps_at), np.arange(level.size), side="right")
    inside = moves[stretch[WANDER_LAG:] == stretch[:-WANDER_LAG]]  # not across a step
    if (mad(moves) / s1) ** 2 / WANDER_LAG < WANDER_RATIO or inside.size < WANDER_LAG:
        return False
    if (mad(inside) / s1) ** 2 / WANDER_LAG < WANDER_INSIDE:
        return False
    steps = np.clip(steps - np.median(steps), -4.0 * s1, 4.0 * s1)
    if autocorrelation([steps]) < WANDER_STEPS_RHO:
        return False  # noise around a smooth curve: its steps alternate, a walk's do not
    return autocorrelation([r for r in parts if r.size > 2]) >= WANDER_RHO


def walk_jumps(values: FloatArray, bounds: Sequence[int], min_size: int) -> list[int]:
    """The boundaries of a wandering series that are jumps, not the walk's own moves.

    A jump: the medians of ``min_size`` runs on either side differ by at least
    ``WANDER_JUMP`` robust steps of the walk (its first differences' scale).
    """
    step = mad(np.diff(values))
    if step <= 0:
        return list(bounds)
    kept = [bounds[0]]
    for a, b, c in zip(bounds, bounds[1:], bounds[2:], strict=False):
        left = values[max(a, b - min_size) : b]
        right = values[b : min(c, b + min_size)]
        if abs(float(np.median(right) - np.median(left))) >= WANDER_JUMP * step:
            kept.append(b)
    kept.append(bounds[-1])
    return kept


@dataclass(frozen=True)
class Trends:
    """A segmentation read as levels and lines: its boundaries and how to judge them."""

    fits: Fits
    bounds: list[int]  # steps only: bends inside a drifting stretch are gone
    slope_penalty: float  # what a slope must save, in squared noise units
    wandering: bool
    reach: int

    def sloped(self, a: int, b: int) -> bool:
        """Whether the stretch [a, b) drifts (a line beats a level by the penalty)."""
        return is_sloped(self.fits.line(a, b), self.slope_penalty)

    def jump_at(self, a: int, b: int, c: int) -> float:
        """|jump| at b, in noise units, between lines of up to ``reach`` runs on each side."""
        left = self.fits.line(max(a, b - self.reach), b)
        right = self.fits.line(b, min(c, b + self.reach))
        return abs(jump(left, right))


MAX_RHO = 0.9  # cap of the residuals' autocorrelation used to inflate a penalty


def inflation(rho: float) -> float:
    """Long-run variance factor of AR(1) noise with lag-1 autocorrelation ``rho`` (capped)."""
    rho = min(max(rho, 0.0), MAX_RHO)
    return (1.0 + rho) / (1.0 - rho)


def find_trends(
    values: FloatArray,
    bounds: Sequence[int],
    *,
    beta: float,
    penalty: float,
    min_effect: float,
    reach: int,
) -> Trends:
    """Read a step segmentation of ``values`` (noise units) as levels and lines.

    ``penalty`` prices a boundary or a slope while consolidating; the jumps that keep a
    boundary next to a drifting stretch, and the slopes reported later, are judged with
    ``beta`` inflated by the autocorrelation of the piecewise-linear residuals.
    """
    fits = Fits(np.asarray(values, dtype=np.float64))
    pieces = consolidate(fits, bounds, penalty)
    judged = beta * inflation(autocorrelation(residuals(fits, pieces, penalty)))
    kept = drop_kinks(fits, pieces, penalty, min_effect=min_effect, beta=judged, reach=reach)
    return Trends(fits, kept, judged, wanders(fits, pieces, kept, penalty), reach)


def drift_line(fits: Fits, a: int, b: int, penalty: float, min_effect: float) -> Line | None:
    """The line of [a, b) when the stretch drifts, else None.

    It drifts when its line beats its level by ``penalty`` (squared noise units) and moves
    at least ``min_effect`` noise units from its first run to its last.
    """
    if b - a < 3:
        return None
    line = fits.line(a, b)
    if not is_sloped(line, penalty) or abs(line.slope) * (b - a - 1) < min_effect:
        return None
    return line
