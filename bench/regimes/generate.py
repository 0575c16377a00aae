"""Labelled CI-like metric histories for the regime-detection benchmark.

A series is one metric over the finished runs of a nightly job: piecewise-constant
levels (3 to 7 regimes, some only 5 to 9 runs long) plus noise, bad runs (isolated,
single or two in a row, far off or exactly 0 as a crashed evaluation writes them), and in some
series a metric that is exactly constant in its first regimes (``clip_ratio =
0.0000``).  Scales range from 1e-4 to 1e4.  Steps are drawn between 1 and 10 noise
units: those of at least ``REAL_STEP`` are the labelled boundaries; smaller ones are
"minor" — a detection near one is neither a hit nor a false alarm, and missing one
is no miss.

Scenarios change the noise: ``ci`` Gaussian, ``heavy`` Student-t with 3 degrees of
freedom, ``ar`` AR(1) with rho 0.3-0.6 (marginal standard deviation sigma), ``drift``
Gaussian plus a slow wander of the level (within each regime, at most 1.5 sigma end
to end, and a slow sinusoid over the whole history).

``plain`` (``make_plain``, kept apart from the four above) is issue 6's description
taken literally: 300 runs, 5 regimes of at least 10 runs, levels around 0.5,
Gaussian noise sigma 0.02, steps of 3-10 sigma (all labelled) and 1-2 % isolated
single-run outliers of 5-10 sigma.

Trend scenarios (``TREND_SCENARIOS``, ``trend_set``; issue 17), each generated from
its own random stream so that the five above stay as they were.  Lengths, scales and
noise units (sigma) are drawn as above; the noise is CI-like (Gaussian, Student-t or
AR(1), drawn per series) and about 2 % bad runs are added, except in random walks:

- ``trend``: a straight line over 15 to 80 sigma end to end, up or down; no boundary.
- ``curved``: exponential growth or decay (rate 1-5 over the history), a quadratic
  (its vertex anywhere from before the start to 70 % of the history) or a logistic
  saturating curve; 15 to 80 sigma from lowest to highest, steepest at most 1 sigma
  per run; no boundary.
- ``trend+steps``: a ``trend`` or ``curved`` shape with 1-4 labelled steps of 3-10
  sigma and 0-2 minor ones (1-3 sigma) on top.
- ``walk``: a random walk (Gaussian increments, sd sigma), in half of the series
  plus measurement noise of up to one increment sd; no boundary, no bad runs.
- ``walk+jumps``: a ``walk`` with 1-2 labelled jumps of 15-40 increment sds.
- ``seasonal``: a sinusoid of period 7-52 runs and amplitude 2-6 sigma (in half of
  the series with a second harmonic of up to half that amplitude) plus noise, with
  0-3 labelled steps of 3-10 sigma.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from numpy.typing import NDArray

from bot.core.models import Run

SCENARIOS = ("ci", "heavy", "ar", "drift")
REAL_STEP = 3.0  # steps of at least this many noise units are labelled boundaries
MIN_REGIME = 5
_T_MAD = 0.7649  # MAD of Student-t with 3 degrees of freedom


@dataclass(frozen=True)
class Series:
    """One metric's values with its known boundaries (indices of first runs)."""

    values: NDArray[np.float64]
    truth: tuple[int, ...]
    minor: tuple[int, ...]
    scenario: str


def _regime_starts(rng: np.random.Generator, n: int, regimes: int) -> list[int]:
    """Sorted starts of regimes 2..k, every regime >= MIN_REGIME, sometimes a short one."""
    while True:
        starts = sorted(rng.choice(np.arange(MIN_REGIME, n - MIN_REGIME + 1), regimes - 1, False))
        edges = [0, *starts, n]
        if all(b - a >= MIN_REGIME for a, b in itertools.pairwise(edges)):
            break
    if regimes > 2 and rng.random() < 0.4:  # squeeze one inner regime to 5-9 runs
        i = int(rng.integers(0, regimes - 2))
        room = edges[i + 2] - edges[i + 1]
        short = int(rng.integers(MIN_REGIME, 10))
        if room > short + MIN_REGIME:
            starts[i + 1] = edges[i + 1] + short
    return [int(s) for s in starts]


def _noise(rng: np.random.Generator, n: int, scenario: str) -> NDArray[np.float64]:
    """Unit-scale noise of a scenario (sd 1, or MAD-sd 1 for heavy tails)."""
    if scenario == "heavy":
        return np.asarray(rng.standard_t(3, n) / (1.4826 * _T_MAD), dtype=np.float64)
    if scenario == "ar":
        rho = rng.uniform(0.3, 0.6)
        e = rng.normal(0.0, np.sqrt(1.0 - rho * rho), n)
        out = np.empty(n)
        out[0] = rng.normal()
        for t in range(1, n):
            out[t] = rho * out[t - 1] + e[t]
        return out
    return rng.normal(0.0, 1.0, n)


def make_series(
    rng: np.random.Generator, scenario: str, n: int | None = None, regimes: int | None = None
) -> Series:
    """One labelled series of a scenario (length 150-400 and 3-7 regimes unless given)."""
    n = int(rng.integers(150, 401)) if n is None else n
    k = int(rng.integers(3, 8)) if regimes is None else regimes
    starts = _regime_starts(rng, n, k)
    edges = [0, *starts, n]
    scale = 10.0 ** rng.uniform(-4, 4)
    sigma = scale * 10.0 ** rng.uniform(-2.5, -1.0)
    sizes = np.where(
        rng.random(k - 1) < 0.8,
        np.exp(rng.uniform(np.log(REAL_STEP), np.log(10.0), k - 1)),
        np.exp(rng.uniform(0.0, np.log(REAL_STEP), k - 1)),
    )
    steps = sizes * rng.choice([-1.0, 1.0], k - 1)
    levels = scale + sigma * np.concatenate(([0.0], np.cumsum(steps)))
    flat_regimes = int(rng.integers(1, k)) if scenario == "ci" and rng.random() < 0.25 else 0
    if flat_regimes:  # e.g. clip_ratio = 0.0 exactly, then a jump to a noisy level
        levels -= levels[0]
    values = np.empty(n)
    noise = sigma * _noise(rng, n, scenario)
    for j, (a, b) in enumerate(itertools.pairwise(edges)):
        values[a:b] = levels[j] + (0.0 if j < flat_regimes else noise[a:b])
        if scenario == "drift":
            values[a:b] += sigma * rng.uniform(-1.5, 1.5) * np.linspace(-0.5, 0.5, b - a)
    if scenario == "drift":
        values += sigma * np.sin(np.linspace(0.0, rng.uniform(1.0, 3.0) * np.pi, n))
    _add_bad_runs(rng, values, sigma)
    truth = tuple(s for s, size in zip(starts, sizes, strict=True) if size >= REAL_STEP)
    minor = tuple(s for s, size in zip(starts, sizes, strict=True) if size < REAL_STEP)
    return Series(values, truth, minor, scenario)


def _add_bad_runs(rng: np.random.Generator, values: NDArray[np.float64], sigma: float) -> None:
    """About 2 % bad runs: far off (5-30 sigma) or 0.0; now and then two in a row.

    Bad runs are isolated events (at least 10 runs apart): several within a few runs
    would be a short regime, not noise.
    """
    n = values.size
    last = -100
    for i in np.flatnonzero(rng.random(n) < 0.02):
        if i - last < 10:
            continue
        last = int(i)
        width = 2 if rng.random() < 0.25 else 1
        bad = (
            0.0
            if rng.random() < 0.3
            else values[i] + sigma * rng.uniform(5, 30) * rng.choice([-1.0, 1.0])
        )
        values[i : i + width] = bad


PLAIN = "plain"
PLAIN_RUNS = 300
PLAIN_REGIMES = 5
PLAIN_MIN_REGIME = 10
PLAIN_SIGMA = 0.02


def make_plain(rng: np.random.Generator) -> Series:
    """One series as issue 6 describes it (see the module docstring)."""
    n, k = PLAIN_RUNS, PLAIN_REGIMES
    while True:
        starts = sorted(int(s) for s in rng.choice(np.arange(1, n), k - 1, replace=False))
        if all(b - a >= PLAIN_MIN_REGIME for a, b in itertools.pairwise([0, *starts, n])):
            break
    level = rng.uniform(0.4, 0.6)
    levels = [level]
    for _ in range(k - 1):  # 3-10 sigma, turning back before leaving (0.1, 0.9)
        step = PLAIN_SIGMA * rng.uniform(3.0, 10.0) * rng.choice([-1.0, 1.0])
        level += step if 0.1 < level + step < 0.9 else -step
        levels.append(level)
    values = np.repeat(np.asarray(levels, dtype=np.float64), np.diff([0, *starts, n]))
    values += rng.normal(0.0, PLAIN_SIGMA, n)
    count = int(rng.integers(math.ceil(0.01 * n), math.floor(0.02 * n) + 1))
    spots: list[int] = []
    while len(spots) < count:  # isolated: at least 3 runs apart
        i = int(rng.integers(0, n))
        if all(abs(i - j) >= 3 for j in spots):
            spots.append(i)
    for i in spots:
        values[i] += PLAIN_SIGMA * rng.uniform(5.0, 10.0) * rng.choice([-1.0, 1.0])
    return Series(values, tuple(starts), (), PLAIN)


def plain_set(seed: int, count: int) -> list[Series]:
    """``count`` series of the ``plain`` scenario, reproducibly from ``seed``."""
    rng = np.random.default_rng((seed, 6))  # own stream: the four scenarios stay as they were
    return [make_plain(rng) for _ in range(count)]


def labelled_set(seed: int, per_scenario: int) -> list[Series]:
    """``per_scenario`` series of every scenario, reproducibly from ``seed``."""
    rng = np.random.default_rng(seed)
    return [make_series(rng, s) for s in SCENARIOS for _ in range(per_scenario)]


def history(
    rng: np.random.Generator,
    n: int,
    metrics: int,
    regimes: int,
    scenario: str = "ci",
    start: datetime = datetime(2026, 1, 1, 3, 0, tzinfo=UTC),
) -> tuple[list[Run], tuple[int, ...]]:
    """A nightly history of ``n`` runs: shared boundaries, each moving a few metrics.

    Every boundary moves 1 to 3 of the metrics by a real step (>= 3 sigma); the
    others stay.  Returns the runs and the true boundaries.
    """
    starts = _regime_starts(rng, n, regimes)
    edges = [0, *starts, n]
    columns = []
    for m in range(metrics):
        scale = 10.0 ** rng.uniform(-4, 4)
        sigma = scale * 10.0 ** rng.uniform(-2.5, -1.0)
        flat = m % 6 == 5  # one metric in six is flat at 0.0 until it first moves
        level = 0.0 if flat else scale
        values = np.empty(n)
        noise = sigma * _noise(rng, n, scenario)
        moved = False
        for j, (a, b) in enumerate(itertools.pairwise(edges)):
            values[a:b] = level + (noise[a:b] if moved or not flat else 0.0)
            if j + 1 < len(edges) - 1:
                moves = rng.random() < 2.0 / metrics or (m == j % metrics)
                if moves:
                    size = np.exp(rng.uniform(np.log(REAL_STEP + 1.0), np.log(10.0)))
                    level += sigma * size * rng.choice([-1.0, 1.0])
                    moved = True
        _add_bad_runs(rng, values, sigma)
        columns.append(values)
    runs = []
    for i in range(n):
        summary = {f"metric/{m:02d}": float(columns[m][i]) for m in range(metrics)}
        if rng.random() < 0.03:  # a run that did not log one of its metrics
            summary.pop(f"metric/{int(rng.integers(metrics)):02d}")
        runs.append(
            Run(
                id=f"run{i:05d}",
                created_at=start + timedelta(days=i, minutes=int(rng.integers(0, 90))),
                commit=f"{i:040x}",
                summary=summary,
            )
        )
    return runs, tuple(starts)


TREND_SCENARIOS = ("trend", "curved", "trend+steps", "walk", "walk+jumps", "seasonal")
_STEEPEST = 1.0  # curved shapes change by at most this many sigma per run


def _curve(rng: np.random.Generator, n: int, curved: bool) -> NDArray[np.float64]:
    """A trend shape in sigma units: a line or a curve spanning 15-80, signed at random."""
    u = np.linspace(0.0, 1.0, n)
    if not curved:
        shape = u
    else:
        kind = rng.integers(0, 3)
        if kind == 0:  # exponential growth (convex) or decay towards a level (concave)
            rate = rng.uniform(1.0, 5.0)
            shape = np.expm1(rate * u) if rng.random() < 0.5 else -np.expm1(-rate * u)
        elif kind == 1:
            shape = (u - rng.uniform(-0.3, 0.7)) ** 2
        else:  # logistic, saturating
            shape = 1.0 / (1.0 + np.exp(-rng.uniform(4.0, 10.0) * (u - rng.uniform(0.3, 0.7))))
        shape = np.asarray(shape, dtype=np.float64)
    shape = (shape - shape.min()) / np.ptp(shape)
    span = np.exp(rng.uniform(np.log(15.0), np.log(80.0)))
    span = min(span, _STEEPEST / float(np.abs(np.diff(shape)).max()))
    return np.asarray(span * shape * rng.choice([-1.0, 1.0]), dtype=np.float64)


def _steps(
    rng: np.random.Generator, n: int, real: int, minor: int, size: tuple[float, float] = (3, 10)
) -> tuple[NDArray[np.float64], tuple[int, ...], tuple[int, ...]]:
    """Levels in sigma units: ``real`` steps of ``size`` and ``minor`` of 1-3; their starts.

    Step sizes are log-uniform, signs random.
    """
    if real + minor == 0:
        return np.zeros(n), (), ()
    starts = _regime_starts(rng, n, real + minor + 1)
    is_real = rng.permutation([True] * real + [False] * minor)
    low, high = np.where(is_real, size[0], 1.0), np.where(is_real, size[1], REAL_STEP)
    sizes = np.exp(rng.uniform(np.log(low), np.log(high))) * rng.choice([-1.0, 1.0], real + minor)
    levels = np.repeat(np.concatenate(([0.0], np.cumsum(sizes))), np.diff([0, *starts, n]))
    truth = tuple(s for s, r in zip(starts, is_real, strict=True) if r)
    small = tuple(s for s, r in zip(starts, is_real, strict=True) if not r)
    return levels, truth, small


def make_trend_series(rng: np.random.Generator, scenario: str) -> Series:
    """One labelled series of a trend scenario (see the module docstring)."""
    n = int(rng.integers(150, 401))
    scale = 10.0 ** rng.uniform(-4, 4)
    sigma = scale * 10.0 ** rng.uniform(-2.5, -1.0)
    truth: tuple[int, ...] = ()
    minor: tuple[int, ...] = ()
    if scenario in ("walk", "walk+jumps"):
        shape = np.cumsum(rng.normal(0.0, 1.0, n))
        if rng.random() < 0.5:
            shape += rng.uniform(0.0, 1.0) * rng.normal(0.0, 1.0, n)
        if scenario == "walk+jumps":
            jumps, truth, _ = _steps(rng, n, int(rng.integers(1, 3)), 0, (15.0, 40.0))
            shape += jumps
        return Series(scale + sigma * shape, truth, minor, scenario)
    noise = _noise(rng, n, str(rng.choice(["ci", "heavy", "ar"])))
    if scenario == "seasonal":
        t = np.arange(n)
        period = rng.uniform(7.0, 52.0)
        phase = rng.uniform(0.0, 2 * np.pi)
        amplitude = rng.uniform(2.0, 6.0)
        shape = amplitude * np.sin(2 * np.pi * t / period + phase)
        if rng.random() < 0.5:
            second = amplitude * rng.uniform(0.0, 0.5)
            shape += second * np.sin(4 * np.pi * t / period + rng.uniform(0.0, 2 * np.pi))
        levels, truth, minor = _steps(rng, n, int(rng.integers(0, 4)), 0)
        shape += levels
    else:
        shape = _curve(rng, n, scenario == "curved" or (scenario != "trend" and rng.random() < 0.5))
        if scenario == "trend+steps":
            levels, truth, minor = _steps(rng, n, int(rng.integers(1, 5)), int(rng.integers(0, 3)))
            shape += levels
    values = scale + sigma * (shape + noise)
    _add_bad_runs(rng, values, sigma)
    return Series(values, truth, minor, scenario)


def trend_set(
    seed: int, per_scenario: int, scenarios: tuple[str, ...] = TREND_SCENARIOS
) -> list[Series]:
    """``per_scenario`` series of each trend scenario, every one from its own stream."""
    out = []
    for name in scenarios:
        rng = np.random.default_rng((seed, 17, TREND_SCENARIOS.index(name)))
        out += [make_trend_series(rng, name) for _ in range(per_scenario)]
    return out
