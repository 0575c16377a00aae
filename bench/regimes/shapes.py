"""Generated stand-ins for real annotated series: one metric, 1-3 annotators each.

Shapes of the kinds public change-point benchmarks hold, drawn here from scratch (no data
set is read): smooth population-like growth, GDP with recessions, exchange rates and
stock prices (random walks with a crisis), monthly traffic with seasonality and a break,
industrial quality control (shifts, outliers, tool wear), and climate series (trends,
a relocated station, a dammed river).  Lengths run from 35 to 2,000 points; some series
miss values (NaN).

Each series carries its designed changes, some *weak* (a change of growth rate, a
small shift).  Every annotator marks each change a little off (0-3 points) and may omit a
weak one, so the annotators disagree as people do.  Annotations never hold index 0: the
scorer adds it.  ``family`` is ``"trend"`` for a smooth trend with no level shift and
``"walk"`` for a random walk, the series on which a detector should report few regimes.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Change = tuple[int, bool]  # (index of the first point after the change, weak)
Values = NDArray[np.float64]


@dataclass(frozen=True)
class Shape:
    """One labelled series: values (NaN = missing) and one change-point set per annotator."""

    name: str
    kind: str
    values: Values
    annotations: tuple[tuple[int, ...], ...]
    family: str = ""  # "trend", "walk" or ""


# --------------------------------------------------------------------------- annotators

_SHIFTS = np.array([0, 0, 0, 0, 1, -1, 1, -1, 2, -2, 3, -3])


def annotate(
    rng: np.random.Generator, changes: list[Change], n: int, annotators: int
) -> tuple[tuple[int, ...], ...]:
    """Each annotator's marks: every change shifted by 0-3 points, a weak one omitted at 40 %."""
    sets = []
    for _ in range(annotators):
        marks = {
            int(np.clip(at + rng.choice(_SHIFTS), 1, n - 1))
            for at, weak in changes
            if not (weak and rng.random() < 0.4)
        }
        sets.append(tuple(sorted(marks)))
    return tuple(sets)


# --------------------------------------------------------------------------- building blocks


def _log_growth(rng: np.random.Generator, n: int, rates: list[tuple[int, float]]) -> Values:
    """Cumulated log growth: ``rates`` are (from index, rate per point), the first from 0."""
    rate = np.zeros(n)
    for start, r in rates:
        rate[start:] = r
    return np.cumsum(rate)


def _missing(rng: np.random.Generator, x: Values, share: float, block: bool = False) -> Values:
    """Blank ``share`` of the points: scattered, or one block plus a few scattered."""
    x = x.copy()
    count = max(1, int(share * x.size))
    if block:
        start = int(rng.integers(x.size // 4, x.size // 2))
        x[start : start + count // 2] = np.nan
        count -= count // 2
    x[rng.choice(np.arange(1, x.size - 1), count, replace=False)] = np.nan
    return x


def _season(n: int, period: int, phase: float = 0.0) -> Values:
    t = np.arange(n)
    return np.sin(2 * np.pi * t / period + phase) + 0.4 * np.sin(4 * np.pi * t / period + 1.3)


# --------------------------------------------------------------------------- the kinds


def population(rng: np.random.Generator, variant: str) -> tuple[Values, list[Change], str]:
    """Annual head counts: exponential or logistic, nearly noiseless."""
    if variant == "rate":  # growth slows once (a weak change of growth rate)
        n, k = 60, int(rng.integers(25, 40))
        log = _log_growth(rng, n, [(0, 0.021), (k, 0.009)])
        x = 4.1e6 * np.exp(log) * (1 + rng.normal(0, 2e-4, n))
        return np.round(x), [(k, True)], "trend"
    if variant == "logistic":
        n = 70
        t = np.arange(n)
        x = 2.3e6 + 9.5e6 / (1 + np.exp(-(t - 38) / 9.0))
        return np.round(x * (1 + rng.normal(0, 1e-4, n))), [], "trend"
    if variant == "short":
        n = 35
        x = 8.2e5 * np.exp(0.013 * np.arange(n)) * (1 + rng.normal(0, 3e-4, n))
        return np.round(x), [], "trend"
    if variant == "peak":  # growth turns to decline (emigration)
        n, k = 64, int(rng.integers(30, 45))
        log = _log_growth(rng, n, [(0, 0.006), (k, -0.005)])
        x = 9.8e6 * np.exp(log) * (1 + rng.normal(0, 2e-4, n))
        return np.round(x), [(k, True)], "trend"
    if variant == "city":  # a boom: growth triples
        n, k = 120, int(rng.integers(50, 80))
        log = _log_growth(rng, n, [(0, 0.008), (k, 0.026)])
        x = 3.6e5 * np.exp(log) * (1 + rng.normal(0, 5e-4, n))
        return np.round(x), [(k, False)], "trend"
    n = 80  # "large": a large country, logistic-like slowing, missing census years
    t = np.arange(n)
    x = 1.52e8 + 1.9e8 / (1 + np.exp(-(t - 30) / 22.0))
    x = np.round(x * (1 + rng.normal(0, 1e-4, n)))
    return _missing(rng, x, 0.06), [], "trend"


def _gdp(
    rng: np.random.Generator,
    n: int,
    level: float,
    growth: float,
    noise: float,
    recessions: list[tuple[int, int, float]],
) -> tuple[Values, list[Change]]:
    """Log-linear growth with noisy growth rates; a recession (start, length, depth) shrinks
    the level by ``depth`` over ``length`` points, then growth resumes from there."""
    rate = growth + rng.normal(0, noise, n)
    changes: list[Change] = []
    for start, length, depth in recessions:
        rate[start : start + length] = -depth / length + rng.normal(0, noise / 2, length)
        changes.append((start, False))
        if depth > 0.06:
            changes.append((start + length, True))  # the recovery, marked by some
    return level * np.exp(np.cumsum(rate)), changes


def gdp(rng: np.random.Generator, variant: str) -> tuple[Values, list[Change], str]:
    """GDP in billions: annual or quarterly, with recession dips."""
    if variant == "annual":
        x, ch = _gdp(rng, 60, 412.0, 0.028, 0.012, [(int(rng.integers(30, 45)), 2, 0.045)])
    elif variant == "quarterly":
        x, ch = _gdp(rng, 200, 1830.0, 0.0065, 0.004, [(70, 4, 0.035), (165, 5, 0.05)])
    elif variant == "short":
        x, ch = _gdp(rng, 40, 96.0, 0.034, 0.015, [(int(rng.integers(18, 28)), 2, 0.07)])
    elif variant == "steady":
        x, ch = _gdp(rng, 50, 230.0, 0.025, 0.01, [])
        return x, ch, "trend"
    elif variant == "missing":
        x, ch = _gdp(rng, 160, 640.0, 0.006, 0.004, [(96, 3, 0.03)])
        x = _missing(rng, x, 0.05)
    else:  # "deep": a depression, a long slump and a recovery
        x, ch = _gdp(rng, 120, 75.0, 0.03, 0.01, [(52, 4, 0.24)])
    return x, ch, ""


def _walk(rng: np.random.Generator, n: int, start: float, vol: Values, drift: float) -> Values:
    return start * np.exp(np.cumsum(drift + vol * rng.standard_normal(n)))


def markets(rng: np.random.Generator, variant: str) -> tuple[Values, list[Change], str]:
    """Daily prices and exchange rates: geometric random walks with a crisis."""
    if variant == "devaluation":
        n, k = 1500, int(rng.integers(600, 1000))
        vol = np.where(np.arange(n) < k, 0.004, 0.009)
        x = _walk(rng, n, 3.87, vol, 0.0)
        x[k:] *= 1.45  # an overnight devaluation
        return x, [(k, False)], "walk"
    if variant == "peg":  # pegged (tiny noise), then floated
        n, k = 900, int(rng.integers(350, 550))
        x = 7.8 + rng.normal(0, 0.0015, n)
        x[k:] = 7.8 * _walk(rng, n - k, 1.0, np.full(n - k, 0.006), 0.0003)
        return np.round(x, 4), [(k, False)], "walk"
    if variant == "fx_plain":
        return np.round(_walk(rng, 1000, 1.312, np.full(1000, 0.005), 0.0), 4), [], "walk"
    if variant == "crash":
        n, k = 2000, int(rng.integers(900, 1500))
        vol = np.where(np.arange(n) < k, 0.01, 0.022)
        vol[k + 250 :] = 0.012
        x = _walk(rng, n, 142.0, vol, 0.0004)
        x[k : k + 4] *= np.array([0.91, 0.84, 0.78, 0.76])
        x[k + 4 :] *= 0.76
        return x, [(k, False)], "walk"
    if variant == "weekends":  # a stock whose weekend closes are missing values
        n, k = 700, int(rng.integers(300, 450))
        vol = np.where(np.arange(n) < k, 0.012, 0.025)
        x = _walk(rng, n, 38.5, vol, 0.0003)
        x[k:] *= 0.68
        x[(np.arange(n) % 7) >= 5] = np.nan
        return x, [(k, False)], "walk"
    if variant == "stock_short":
        return _walk(rng, 250, 61.0, np.full(250, 0.013), 0.0005), [], "walk"
    if variant == "oil":  # a price collapse and, later, a rebound
        n, a, b = 1200, int(rng.integers(300, 500)), int(rng.integers(800, 1000))
        vol = np.full(n, 0.018)
        drift = np.zeros(n)
        drift[a : a + 120] = -0.006
        drift[b : b + 90] = 0.005
        x = 96.0 * np.exp(np.cumsum(drift + vol * rng.standard_normal(n)))
        return x, [(a, False), (b, True)], "walk"
    # "bubble": a boom and a bust
    n, a, b = 800, int(rng.integers(250, 350)), int(rng.integers(500, 600))
    drift = np.zeros(n)
    drift[a:b] = 0.009
    drift[b : b + 60] = -0.02
    x = 410.0 * np.exp(np.cumsum(drift + 0.03 * rng.standard_normal(n)))
    return x, [(a, True), (b, False)], "walk"


def traffic(rng: np.random.Generator, variant: str) -> tuple[Values, list[Change], str]:
    """Monthly passengers, daily visits, births: trend times seasonality, with a break."""
    if variant == "airline":
        n = 144
        t = np.arange(n)
        x = 118e3 * np.exp(0.0095 * t) * (1 + 0.12 * _season(n, 12)) * (1 + rng.normal(0, 0.02, n))
        return np.round(x), [], ""
    if variant == "break":  # passengers drop by a quarter, then recover slowly
        n, k = 216, int(rng.integers(110, 160))
        t = np.arange(n)
        level = 2.4e6 * np.exp(0.004 * t)
        level[k:] *= 0.74 * np.exp(0.003 * (t[k:] - k))
        x = level * (1 + 0.09 * _season(n, 12, 0.7)) * (1 + rng.normal(0, 0.015, n))
        return np.round(x), [(k, False)], ""
    if variant == "web":  # daily visits, weekly cycle, a relaunch lifts them
        n, k = 540, int(rng.integers(200, 380))
        t = np.arange(n)
        level = 5200 * np.exp(0.0006 * t)
        level[k:] *= 1.6
        x = level * (1 + 0.18 * _season(n, 7)) * (1 + rng.normal(0, 0.05, n))
        return np.round(x), [(k, False)], ""
    if variant == "births":
        n = 240
        t = np.arange(n)
        x = (
            6100
            * np.exp(-0.0011 * t)
            * (1 + 0.05 * _season(n, 12, 2.0))
            * (1 + rng.normal(0, 0.015, n))
        )
        return np.round(x), [], ""
    if variant == "transit_short":
        n, k = 60, int(rng.integers(25, 40))
        level = np.where(np.arange(n) < k, 8.1e5, 6.3e5)
        x = level * (1 + 0.06 * _season(n, 12)) * (1 + rng.normal(0, 0.02, n))
        return np.round(x), [(k, False)], ""
    # "missing": a step up (a new line opens), months missing
    n, k = 180, int(rng.integers(70, 120))
    t = np.arange(n)
    level = 41e3 * np.exp(0.002 * t)
    level[k:] *= 1.22
    x = level * (1 + 0.1 * _season(n, 12, 1.0)) * (1 + rng.normal(0, 0.025, n))
    return _missing(rng, np.round(x), 0.08, block=True), [(k, False)], ""


def _piecewise(rng: np.random.Generator, n: int, starts: list[int], levels: list[float]) -> Values:
    x = np.empty(n)
    for i, (a, b) in enumerate(zip([0, *starts], [*starts, n], strict=True)):
        x[a:b] = levels[i]
    return x


def _outliers(rng: np.random.Generator, x: Values, share: float, size: float) -> Values:
    x = x.copy()
    at = rng.choice(x.size, max(1, int(share * x.size)), replace=False)
    x[at] += size * rng.choice([-1.0, 1.0], at.size) * rng.uniform(4, 9, at.size)
    return x


def quality(rng: np.random.Generator, variant: str) -> tuple[Values, list[Change], str]:
    """Measurements of parts (mm, g, %): shifts, outliers, tool wear."""
    if variant == "shifts":
        n, sd = 300, 0.012
        starts = [
            int(rng.integers(60, 110)),
            int(rng.integers(140, 190)),
            int(rng.integers(220, 260)),
        ]
        steps = [3.5, -2.2, 4.5]
        levels = list(10.0 + sd * np.cumsum([0.0, *steps]))
        x = _piecewise(rng, n, starts, levels) + rng.normal(0, sd, n)
        return np.round(x, 3), [(s, abs(d) < 2.5) for s, d in zip(starts, steps, strict=True)], ""
    if variant == "outliers":
        n, k, sd = 200, int(rng.integers(70, 140)), 0.4
        x = _piecewise(rng, n, [k], [250.0, 251.6]) + rng.normal(0, sd, n)
        return np.round(_outliers(rng, x, 0.03, sd), 1), [(k, False)], ""
    if variant == "short":
        n, k, sd = 50, int(rng.integers(18, 32)), 0.08
        x = _piecewise(rng, n, [k], [4.0, 4.35]) + rng.normal(0, sd, n)
        return np.round(x, 2), [(k, False)], ""
    if variant == "wear":  # the tool wears (a slow drift) until it is replaced (a reset)
        n, sd = 400, 0.004
        resets = [int(rng.integers(110, 150)), int(rng.integers(240, 290))]
        t = np.arange(n)
        since = t - np.max(np.where(t[:, None] >= np.array([0, *resets]), [0, *resets], 0), axis=1)
        x = 25.0 + 0.00022 * since + rng.normal(0, sd, n)
        return np.round(x, 4), [(r, False) for r in resets], ""
    if variant == "variance":  # the mean holds, the spread doubles (a worn fixture)
        n, k = 250, int(rng.integers(90, 170))
        sd = np.where(np.arange(n) < k, 0.5, 1.4)
        return np.round(98.0 + sd * rng.standard_normal(n), 2), [(k, True)], ""
    if variant == "stable":
        n = 150
        return np.round(_outliers(rng, 1.25 + rng.normal(0, 0.01, n), 0.02, 0.01), 4), [], ""
    if variant == "log":  # a long log of a process with many levels and heavy outliers
        n, sd = 2000, 1.0
        starts = sorted(int(s) for s in rng.choice(np.arange(100, 1900, 150), 8, replace=False))
        starts = [s + int(rng.integers(-40, 40)) for s in starts]
        steps = rng.choice([-1, 1], 8) * rng.uniform(1.5, 6.0, 8)
        levels = list(120.0 + np.cumsum([0.0, *steps]))
        x = _piecewise(rng, n, starts, levels) + sd * rng.standard_t(4, n) / np.sqrt(2)
        x = _outliers(rng, x, 0.01, 3 * sd)
        return np.round(x, 2), [(s, abs(d) < 2.5) for s, d in zip(starts, steps, strict=True)], ""
    n, sd = 350, 0.3  # "missing": two shifts, gaps in the log
    starts = [int(rng.integers(90, 150)), int(rng.integers(220, 290))]
    x = _piecewise(rng, n, starts, [62.0, 63.4, 62.6]) + rng.normal(0, sd, n)
    return _missing(rng, np.round(x, 2), 0.05), [(s, False) for s in starts], ""


def climate(rng: np.random.Generator, variant: str) -> tuple[Values, list[Change], str]:
    """Temperatures (deg C), CO2 (ppm), river flow (m3/s), sea ice (million km2), rain (mm)."""
    if variant == "global":  # flat, then warming from a turning year
        n, k = 140, int(rng.integers(80, 100))
        t = np.arange(n)
        x = -0.25 + 0.019 * np.clip(t - k, 0, None) + rng.normal(0, 0.1, n)
        return np.round(x, 2), [(k, True)], "trend"
    if variant == "relocation":  # a station moves uphill: 0.8 deg C colder
        n, k = 110, int(rng.integers(40, 75))
        t = np.arange(n)
        x = 9.4 + 0.012 * t - 0.8 * (t >= k) + rng.normal(0, 0.45, n)
        return np.round(x, 1), [(k, False)], ""
    if variant == "co2":
        n = 600
        t = np.arange(n)
        x = 315.0 + 0.065 * t + 4.5e-5 * t**2 + 3.0 * _season(n, 12) + rng.normal(0, 0.12, n)
        return np.round(x, 2), [], "trend"
    if variant == "river":  # annual flow drops when a dam is built upstream
        n, k = 100, int(rng.integers(25, 45))
        x = np.where(np.arange(n) < k, 1100.0, 850.0) + rng.normal(0, 120.0, n)
        return np.round(x), [(k, False)], ""
    if variant == "ice":
        n = 45
        x = 7.6 - 0.085 * np.arange(n) + rng.normal(0, 0.35, n)
        return np.round(x, 2), [], "trend"
    if variant == "monthly":
        n = 480
        t = np.arange(n)
        x = 11.0 + 0.002 * t + 7.5 * _season(n, 12, -1.6) + rng.normal(0, 1.1, n)
        return np.round(x, 1), [], ""
    n, k = 70, int(rng.integers(25, 45))  # "rain": annual rainfall, a drier climate
    x = np.where(np.arange(n) < k, 820.0, 700.0) + rng.gamma(9.0, 15.0, n) - 135.0
    return np.round(x), [(k, True)], ""


# --------------------------------------------------------------------------- the set

Kind = Callable[[np.random.Generator, str], tuple[Values, list[Change], str]]
CATALOGUE: tuple[tuple[str, Kind, tuple[str, ...]], ...] = (
    ("population", population, ("rate", "logistic", "short", "peak", "city", "large")),
    ("gdp", gdp, ("annual", "quarterly", "short", "steady", "missing", "deep")),
    (
        "market",
        markets,
        (
            "devaluation",
            "peg",
            "fx_plain",
            "crash",
            "weekends",
            "stock_short",
            "oil",
            "bubble",
        ),
    ),
    ("traffic", traffic, ("airline", "break", "web", "births", "transit_short", "missing")),
    (
        "quality",
        quality,
        (
            "shifts",
            "outliers",
            "short",
            "wear",
            "variance",
            "stable",
            "log",
            "missing",
        ),
    ),
    ("climate", climate, ("global", "relocation", "co2", "river", "ice", "monthly", "rain")),
)


def shapes(seed: int = 1) -> list[Shape]:
    """The whole set (41 series), the same for the same seed."""
    out = []
    for kind, make, variants in CATALOGUE:
        for variant in variants:
            name = f"{kind}_{variant}"
            rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
            values, changes, family = make(rng, variant)
            annotators = int(rng.integers(1, 4))
            labels = annotate(rng, changes, values.size, annotators)
            out.append(Shape(name, kind, values.astype(np.float64), labels, family))
    return out
