"""Regime-detection benchmark: threshold-bot's detector against ruptures and Otava.

Run from the repository root::

    .venv/bin/python bench/regimes/bench_regimes.py [--per-scenario 100] [--seed 7]
        [--scenarios ci,plain,trend,walk]

Baselines: ruptures PELT and binary segmentation (l2 cost, BIC-like penalty), Apache
Otava (alone and behind a Hampel filter) and a detector that never reports a change.
Prints two tables over the same labelled series (``generate.py``); a detection within
2 runs of a true boundary is a hit.  CI scenarios: F1 per scenario, precision, recall
and F1 over them, recall on minor (< 3 sigma) steps for information, time, and apart
from those figures precision, recall and F1 on ``plain`` series (issue 6's
description, ``generate.make_plain``).  Trend scenarios: F1 per scenario with
boundaries, precision, recall and F1 over all of them (a boundary on a pure trend or
walk is a false alarm), the mean number of boundaries per series on ``trend``,
``curved`` and ``walk`` (none are true), the mean per-series F1 over the trend
scenarios with the series' start counted as a boundary found and true (so a series
without boundaries scores 1 when none is reported), and time.  Then the boundaries of
``detect_regimes`` on multi-metric nightly histories, the streaming stability of those
boundaries, and the time for 10,000 runs x 40 metrics.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE)]

import numpy as np  # noqa: E402
from generate import (  # noqa: E402
    PLAIN,
    PLAIN_MIN_REGIME,
    PLAIN_REGIMES,
    PLAIN_RUNS,
    PLAIN_SIGMA,
    SCENARIOS,
    TREND_SCENARIOS,
    Series,
    history,
    labelled_set,
    plain_set,
    trend_set,
)
from numpy.typing import NDArray  # noqa: E402
from scipy.ndimage import median_filter  # noqa: E402

from bot.core.analysis.changepoints import detect_changepoints  # noqa: E402
from bot.core.analysis.regimes import detect_regimes  # noqa: E402
from bot.core.models import RegimeSettings, Run  # noqa: E402

TOLERANCE = 2  # runs
Detector = Callable[[NDArray[np.float64]], list[int]]


# --------------------------------------------------------------------------- detectors


def ours(x: NDArray[np.float64]) -> list[int]:
    """threshold-bot with its default settings."""
    return detect_changepoints(x, RegimeSettings())


def _penalty(x: NDArray[np.float64]) -> float:
    """BIC-like penalty 2 sigma^2 log n, sigma from the MAD of differences."""
    sigma = 1.4826 * float(np.median(np.abs(np.diff(x) - np.median(np.diff(x))))) / math.sqrt(2)
    return 2.0 * max(sigma, 1e-12 * max(1.0, float(np.abs(x).max()))) ** 2 * math.log(x.size)


def pelt(x: NDArray[np.float64]) -> list[int]:
    """ruptures PELT, l2 cost, minimum size 5, the BIC-like penalty."""
    import ruptures as rpt  # the bench extra: --only-ours runs without it

    bkps = rpt.Pelt(model="l2", min_size=5, jump=1).fit(x).predict(pen=_penalty(x))
    return [int(b) for b in bkps[:-1]]


def binseg(x: NDArray[np.float64]) -> list[int]:
    """ruptures binary segmentation, l2 cost, minimum size 5, the same penalty as PELT."""
    import ruptures as rpt

    bkps = rpt.Binseg(model="l2", min_size=5, jump=1).fit(x).predict(pen=_penalty(x))
    return [int(b) for b in bkps[:-1]]


def no_change(x: NDArray[np.float64]) -> list[int]:
    """The trivial detector: never a boundary."""
    return []


def hampel(x: NDArray[np.float64], half: int = 3, cutoff: float = 3.0) -> NDArray[np.float64]:
    """Classic Hampel filter: replace values beyond cutoff MAD-sigmas of a running median."""
    med = median_filter(x, size=2 * half + 1, mode="nearest")
    mad = 1.4826 * median_filter(np.abs(x - med), size=2 * half + 1, mode="nearest")
    return np.where(np.abs(x - med) > cutoff * mad, med, x)


def _otava(values: list[float], **kwargs: float) -> list[int]:
    from otava.analysis import compute_change_points

    points, _ = compute_change_points(values, **kwargs)  # a list: arrays give wrong indices
    return sorted(int(p.index) for p in points)


def otava(x: NDArray[np.float64]) -> list[int]:
    """Apache Otava e-divisive with its defaults."""
    return _otava([float(v) for v in x])


def otava_hampel(x: NDArray[np.float64]) -> list[int]:
    """Apache Otava behind a Hampel filter, max_pvalue=1e-4."""
    return _otava([float(v) for v in hampel(x)], max_pvalue=1e-4)


DETECTORS: dict[str, Detector] = {
    "threshold-bot": ours,
    "ruptures PELT l2 BIC": pelt,
    "ruptures Binseg l2 BIC": binseg,
    "Otava e-divisive": otava,
    "Otava + Hampel p1e-4": otava_hampel,
    "no change": no_change,
}


# --------------------------------------------------------------------------- scoring


@dataclass
class Score:
    """Hit counts of one detector, overall or for one scenario.

    ``found`` counts the detections, ``series`` the series and ``series_f1`` sums their
    own F1 with the start counted as a boundary found and true.
    """

    tp: int = 0
    fp: int = 0
    fn: int = 0
    minor_hit: int = 0
    minor: int = 0
    found: int = 0
    series: int = 0
    series_f1: float = 0.0
    seconds: float = 0.0

    def add(self, other: Score) -> None:
        for name in ("tp", "fp", "fn", "minor_hit", "minor", "found", "series", "series_f1"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.seconds += other.seconds

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def per_series(self) -> float:
        """Mean boundaries reported per series."""
        return self.found / self.series if self.series else 0.0

    @property
    def mean_series_f1(self) -> float:
        return self.series_f1 / self.series if self.series else 0.0


def match(detected: Sequence[int], truth: Sequence[int], minor: Sequence[int] = ()) -> Score:
    """One-to-one matching within TOLERANCE runs, nearest pairs first."""
    pairs = sorted(
        (abs(d - t), i, j)
        for i, d in enumerate(detected)
        for j, t in enumerate(truth)
        if abs(d - t) <= TOLERANCE
    )
    used_d: set[int] = set()
    used_t: set[int] = set()
    for _, i, j in pairs:
        if i not in used_d and j not in used_t:
            used_d.add(i)
            used_t.add(j)
    spare = [d for i, d in enumerate(detected) if i not in used_d]
    near_minor = [d for d in spare if any(abs(d - m) <= TOLERANCE for m in minor)]
    minor_hit = sum(any(abs(d - m) <= TOLERANCE for d in spare) for m in minor)
    tp, fp = len(used_t), len(spare) - len(near_minor)
    # the start counts as one boundary found and true (a series without any scores 1)
    own_p, own_r = (tp + 1) / (tp + fp + 1), (tp + 1) / (len(truth) + 1)
    return Score(
        tp=tp,
        fp=fp,
        fn=len(truth) - tp,
        minor_hit=minor_hit,
        minor=len(minor),
        found=len(detected),
        series=1,
        series_f1=2 * own_p * own_r / (own_p + own_r),
    )


@dataclass
class Result:
    """Scores of one detector: overall and per scenario."""

    total: Score = field(default_factory=Score)
    by_scenario: dict[str, Score] = field(default_factory=dict)


def evaluate(detector: Detector, series: Sequence[Series]) -> Result:
    """Run a detector on every series; time only the detector calls."""
    result = Result()
    for s in series:
        start = time.perf_counter()
        found = detector(s.values)
        score = match(found, s.truth, s.minor)
        score.seconds = time.perf_counter() - start
        result.total.add(score)
        result.by_scenario.setdefault(s.scenario, Score()).add(score)
    return result


# --------------------------------------------------------------------------- histories


def regime_table(seed: int, count: int) -> dict[str, Score]:
    """detect_regimes on nightly 6-metric histories (300-400 runs, 5 regimes)."""
    rng = np.random.default_rng(seed)
    scores: dict[str, Score] = {}
    for scenario in SCENARIOS:
        total = Score()
        for _ in range(count):
            runs, truth = history(rng, int(rng.integers(300, 401)), 6, 5, scenario)
            start = time.perf_counter()
            _, changes = detect_regimes(runs)
            score = match([c.index for c in changes], truth)
            score.seconds = time.perf_counter() - start
            total.add(score)
        scores[scenario] = total
    return scores


def stability(seed: int, count: int, horizon: int) -> tuple[int, int, int]:
    """Prefixes N and N+k (k = 1, 7, 30) of histories: boundaries older than N - horizon.

    Returns (comparisons, comparisons where an old boundary moved/appeared/vanished,
    the largest age in runs of such a boundary).
    """
    rng = np.random.default_rng(seed)
    comparisons = unstable = worst = 0
    for _ in range(count):
        runs, _ = history(rng, 400, 6, 5, str(rng.choice(SCENARIOS)))
        for n in range(120, 370, 50):
            old = _boundaries(runs[:n])
            for k in (1, 7, 30):
                new = _boundaries(runs[: n + k])
                changed = set(old) ^ set(new)
                comparisons += 1
                ages = [n - b for b in changed]
                worst = max([worst, *ages])
                if any(age > horizon for age in ages):
                    unstable += 1
    return comparisons, unstable, worst


def _boundaries(runs: Sequence[Run]) -> list[int]:
    return [c.index for c in detect_regimes(runs)[1]]


def large_timing(seed: int) -> tuple[float, float, NDArray[np.float64]]:
    """Seconds for detect_regimes on 10,000 runs x 40 metrics (best of 3), and its matrix."""
    rng = np.random.default_rng(seed)
    runs, _ = history(rng, 10_000, 40, 40, "ci")
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        detect_regimes(runs)
        best = min(best, time.perf_counter() - start)
    names = sorted(runs[0].summary)
    matrix = np.array([[r.summary.get(m, np.nan) for m in names] for r in runs])
    start = time.perf_counter()
    for j in range(matrix.shape[1]):
        column = matrix[:, j]
        detect_changepoints(column[~np.isnan(column)])
    return best, time.perf_counter() - start, matrix


# --------------------------------------------------------------------------- main


ALL_SCENARIOS = (*SCENARIOS, PLAIN, *TREND_SCENARIOS)
PURE = ("trend", "curved", "walk")  # no true boundary: count what is reported


def _scenarios(text: str) -> tuple[str, ...]:
    """Comma-separated scenario names, in the benchmark's order."""
    names = {n.strip() for n in text.split(",") if n.strip()}
    if unknown := names - set(ALL_SCENARIOS):
        raise argparse.ArgumentTypeError(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    return tuple(n for n in ALL_SCENARIOS if n in names)


def _ci_table(
    detectors: dict[str, Detector], series: list[Series], plain: list[Series], names: Sequence[str]
) -> None:
    """The table of the CI scenarios (and plain, after '|'), a row per detector as it ends."""
    header = f"{'detector':<22}" + "".join(f"{'F1 ' + s:>10}" for s in names)
    header += f"{'precision':>11}{'recall':>8}{'F1':>7}{'minor':>7}{'time s':>8}"
    header += f" |{'P plain':>8}{'R plain':>8}{'F1 plain':>9}" if plain else ""
    print(header)
    for name, detector in detectors.items():
        row = f"{name:<22}"
        if series:
            r = evaluate(detector, series)
            t = r.total
            row += "".join(f"{r.by_scenario[s].f1:>10.3f}" for s in names)
            minor = t.minor_hit / t.minor if t.minor else 0.0
            row += f"{t.precision:>11.3f}{t.recall:>8.3f}{t.f1:>7.3f}{minor:>7.2f}"
            row += f"{t.seconds:>8.2f}"
        else:
            row += " " * 41
        if plain:
            p = evaluate(detector, plain).total
            row += f" |{p.precision:>8.3f}{p.recall:>8.3f}{p.f1:>9.3f}"
        print(row, flush=True)


def _trend_table(
    detectors: dict[str, Detector], series: list[Series], names: Sequence[str]
) -> None:
    """The table of the trend scenarios, a row per detector as it ends."""
    scored = [s for s in names if s not in PURE]
    pure = [s for s in PURE if s in names]
    header = f"{'detector':<22}" + "".join(f"{'F1 ' + s:>{max(10, len(s) + 4)}}" for s in scored)
    header += f"{'precision':>11}{'recall':>8}{'F1':>7}"
    header += "".join(f"{'n/' + s:>9}" for s in pure) + f"{'series F1':>11}{'time s':>8}"
    print(header)
    for name, detector in detectors.items():
        r = evaluate(detector, series)
        t = r.total
        row = f"{name:<22}"
        row += "".join(f"{r.by_scenario[s].f1:>{max(10, len(s) + 4)}.3f}" for s in scored)
        row += f"{t.precision:>11.3f}{t.recall:>8.3f}{t.f1:>7.3f}"
        row += "".join(f"{r.by_scenario[s].per_series:>9.2f}" for s in pure)
        row += f"{t.mean_series_f1:>11.3f}{t.seconds:>8.2f}"
        print(row, flush=True)


def _histories(seed: int, count: int) -> None:
    """The multi-metric histories' figures and the streaming stability."""
    print(
        f"\ndetect_regimes on 6-metric nightly histories (300-400 runs, 5 regimes), "
        f"{count} per scenario:"
    )
    scores = regime_table(seed + 1, count)
    for scenario, s in scores.items():
        print(
            f"  {scenario:<6} precision {s.precision:.3f}  recall {s.recall:.3f}  "
            f"F1 {s.f1:.3f}  time {s.seconds:.2f} s"
        )
    horizon = 20
    comparisons, unstable, worst = stability(seed + 2, 20, horizon)
    print(
        f"streaming stability: {unstable} of {comparisons} prefix comparisons changed a "
        f"boundary older than {horizon} runs; oldest boundary that changed: {worst} runs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-scenario", type=int, default=100)
    parser.add_argument("--plain", type=int, default=100, help="plain series (issue 6)")
    parser.add_argument(
        "--histories", type=int, default=25, help="per scenario; 0 skips histories and stability"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--scenarios",
        type=_scenarios,
        default=ALL_SCENARIOS,
        help=f"comma-separated subset of {','.join(ALL_SCENARIOS)} (default: all)",
    )
    parser.add_argument("--only-ours", action="store_true")
    parser.add_argument("--skip-large", action="store_true")
    args = parser.parse_args()
    detectors: dict[str, Detector] = {"threshold-bot": ours} if args.only_ours else DETECTORS

    ci_names = [s for s in SCENARIOS if s in args.scenarios]
    series = [s for s in labelled_set(args.seed, args.per_scenario) if s.scenario in ci_names]
    plain = plain_set(args.seed, args.plain) if PLAIN in args.scenarios else []
    if series:
        truths = sum(len(s.truth) for s in series)
        minors = sum(len(s.minor) for s in series)
        print(
            f"labelled series: {len(series)} ({args.per_scenario} per scenario: "
            f"{', '.join(ci_names)}), {truths} boundaries >= 3 sigma, {minors} minor steps"
        )
    if plain:
        print(
            f"plain: {len(plain)} more series as issue 6 describes them ({PLAIN_RUNS} runs, "
            f"{PLAIN_REGIMES} regimes >= {PLAIN_MIN_REGIME} runs, levels ~0.5, Gaussian "
            f"sigma {PLAIN_SIGMA}, steps 3-10 sigma,\n       1-2 % single-run outliers of 5-10 "
            f"sigma), {sum(len(s.truth) for s in plain)} boundaries; scored apart (columns "
            f"after '|'), not in precision/recall/F1/minor/time"
        )
    if series or plain:
        _ci_table(detectors, series, plain, ci_names)

    trend_names = tuple(s for s in TREND_SCENARIOS if s in args.scenarios)
    if trend_names:
        trends = trend_set(args.seed, args.per_scenario, trend_names)
        print(
            f"\ntrend scenarios: {len(trends)} series ({args.per_scenario} per scenario: "
            f"{', '.join(trend_names)}), {sum(len(s.truth) for s in trends)} boundaries, "
            f"{sum(len(s.minor) for s in trends)} minor steps; n/<scenario> = boundaries per "
            f"series where none is true;\nseries F1 = mean per-series F1, the start counted "
            f"as a boundary found and true"
        )
        _trend_table(detectors, trends, trend_names)

    if args.histories > 0:
        _histories(args.seed, args.histories)
    if args.skip_large:
        return
    best, loop, matrix = large_timing(args.seed + 3)
    print(
        f"\n10,000 runs x 40 metrics: detect_regimes {best:.2f} s "
        f"(per-metric detection alone {loop:.2f} s)"
    )
    if not args.only_ours:
        start = time.perf_counter()
        for j in range(matrix.shape[1]):
            column = matrix[:, j]
            otava(column[~np.isnan(column)])
        print(f"  Otava e-divisive, same 40 series: {time.perf_counter() - start:.2f} s")
        column = matrix[:2000, 0]
        column = column[~np.isnan(column)]
        start = time.perf_counter()
        pelt(column)
        seconds = time.perf_counter() - start
        print(
            f"  ruptures PELT (jump=1): one 2,000-run series {seconds:.2f} s; "
            f"O(n^2) without change points -> ~{seconds * 25 * 40:.0f} s estimated for 10,000 x 40"
        )


if __name__ == "__main__":
    main()
