"""Regimes of ``threshold-bot review --format json`` on real-world-shaped series.

Run from the repository root::

    .venv/bin/python bench/regimes/bench_review_json.py [--seed 1] [--subprocess] [--keep DIR]

Every series of ``shapes.py`` is written as a run history (``history.jsonl``: one finished
run a day, the value under ``value``, a missing value as ``"nan"``) beside a shell script
gating that metric, and reviewed by the CLI exactly as a user runs it: in this process
through the Typer app of ``threshold-bot`` (default), or with ``--subprocess`` by the
``threshold-bot`` executable beside this Python, two at a time.  The boundaries are
``changes[].index`` of the JSON review.

Beside it, on the same values: a detector of no change, ruptures binary segmentation
and PELT (l2 cost, penalty 2 sigma^2 log n as in ``bench_regimes.py``), binseg5 (Gaussian
cost, penalty 3 log n, at most 5 changes: R changepoint's defaults; missing values
dropped, indices mapped back).  Scored as public change-point benchmarks do it: index 0
is a change point of every detection and every annotator; a detection within MARGIN
points of an annotated change matches it (each at most once); precision against the union
of the annotators' sets, recall averaged over annotators, F1 per series, then averaged.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE)]

import numpy as np  # noqa: E402
import ruptures as rpt  # noqa: E402
from numpy.typing import NDArray  # noqa: E402
from shapes import Shape, shapes  # noqa: E402

MARGIN = 5  # points
MAX_CHANGES = 5  # binseg5
METRIC = "value"
GATE = f'#!/bin/bash\nVALUE_MIN=0\npython check_metrics.py --asserts "{METRIC} >= $VALUE_MIN"\n'
START = datetime(2019, 1, 1, 6, 0, tzinfo=UTC)
Detector = Callable[[NDArray[np.float64]], list[int]]


# --------------------------------------------------------------------------- scoring


def true_positives(truth: Sequence[int], found: Sequence[int], margin: int = MARGIN) -> int:
    """Most pairs (truth, found) within ``margin`` of each other, each point used once.

    Walking both sorted, every true point takes the earliest unused detection within its
    reach: for intervals of one width this greedy choice is a maximum matching.
    """
    dets = sorted(found)
    used = 0
    hits = 0
    for t in sorted(truth):
        while used < len(dets) and dets[used] < t - margin:
            used += 1
        if used < len(dets) and dets[used] <= t + margin:
            hits += 1
            used += 1
    return hits


def f1(found: Sequence[int], annotations: Sequence[Sequence[int]], margin: int = MARGIN) -> float:
    """F1 of one series: 0 added to every set, precision on the union, recall averaged."""
    det = sorted({0, *found})
    users = [sorted({0, *a}) for a in annotations]
    union = sorted(set().union(*users))
    precision = true_positives(union, det, margin) / len(det)
    recall = float(np.mean([true_positives(u, det, margin) / len(u) for u in users]))
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


# --------------------------------------------------------------------------- baselines


def _penalty(x: NDArray[np.float64]) -> float:
    d = np.diff(x)
    sigma = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)
    return 2.0 * max(sigma, 1e-12 * max(1.0, float(np.abs(x).max()))) ** 2 * math.log(x.size)


def _on_present(detect: Detector) -> Detector:
    """Run ``detect`` on the present values; map its indices back to the full series."""

    def wrapped(x: NDArray[np.float64]) -> list[int]:
        kept = np.flatnonzero(~np.isnan(x))
        return [int(kept[i]) for i in detect(x[kept])]

    return wrapped


@_on_present
def binseg(x: NDArray[np.float64]) -> list[int]:
    """ruptures binary segmentation, l2 cost, the PELT baseline's penalty."""
    return [int(b) for b in rpt.Binseg(model="l2", min_size=5).fit(x).predict(pen=_penalty(x))[:-1]]


@_on_present
def pelt(x: NDArray[np.float64]) -> list[int]:
    """ruptures PELT, l2 cost, penalty 2 sigma^2 log n."""
    return [int(b) for b in rpt.Pelt(model="l2", min_size=5).fit(x).predict(pen=_penalty(x))[:-1]]


@_on_present
def binseg5(x: NDArray[np.float64]) -> list[int]:
    """Binary segmentation on mean and variance (Gaussian cost), penalty 3 log n (MBIC-like),
    at most 5 changes: the usual defaults of R's changepoint package, a likelier stand-in
    for a benchmark's "binary segmentation" figure than l2 with a BIC penalty."""
    with warnings.catch_warnings():  # ruptures' note on its covariance bias, every call
        warnings.simplefilter("ignore", UserWarning)
        algo = rpt.Binseg(model="normal", min_size=5).fit(x.reshape(-1, 1))
    bkps = algo.predict(pen=3 * math.log(x.size))[:-1]
    if len(bkps) > MAX_CHANGES:
        bkps = algo.predict(n_bkps=MAX_CHANGES)[:-1]
    return [int(b) for b in bkps]


def zero(x: NDArray[np.float64]) -> list[int]:
    """No change at all."""
    return []


BASELINES: dict[str, Detector] = {"binseg": binseg, "binseg5": binseg5, "pelt": pelt, "zero": zero}


# --------------------------------------------------------------------------- the review


def write_case(shape: Shape, folder: Path) -> tuple[Path, Path]:
    """The history (one run a day, ``"nan"`` for a missing value) and the gate script."""
    folder.mkdir(parents=True, exist_ok=True)
    history, gate = folder / "history.jsonl", folder / "check.sh"
    with history.open("w", encoding="utf-8") as out:
        for i, v in enumerate(shape.values):
            at = (START + timedelta(days=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            value: float | str = "nan" if math.isnan(v) else float(v)
            run = {"id": f"run-{i}", "created_at": at, "summary": {METRIC: value}}
            out.write(json.dumps(run) + "\n")
    gate.write_text(GATE, encoding="utf-8")
    return history, gate


def _arguments(history: Path, gate: Path, output: Path) -> list[str]:
    return ["review", "--file", str(gate), "--history", str(history), "--format", "json",
            "--output", str(output)]  # fmt: skip


def review_in_process(history: Path, gate: Path, output: Path) -> dict[str, Any]:
    """The CLI's own Typer app, as the ``threshold-bot`` entry point runs it."""
    from bot.cli.main import app

    app(_arguments(history, gate, output), prog_name="threshold-bot", standalone_mode=False)
    return dict(json.loads(output.read_text(encoding="utf-8")))


def review_subprocess(history: Path, gate: Path, output: Path) -> dict[str, Any]:
    """The ``threshold-bot`` executable installed beside this Python."""
    exe = Path(sys.executable).parent / "threshold-bot"
    command = [str(exe)] if exe.exists() else [shutil.which("threshold-bot") or "threshold-bot"]
    done = subprocess.run(
        [*command, *_arguments(history, gate, output)], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"{history.parent.name}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return dict(json.loads(output.read_text(encoding="utf-8")))


@dataclass
class Ours:
    """What the JSON review said about one series."""

    changes: list[int]
    regimes: int
    sloped: int  # regimes with a non-null slope
    wandering: bool  # some regime reports the metric as wandering
    seconds: float


def read_review(review: dict[str, Any], seconds: float) -> Ours:
    changes = sorted(int(c["index"]) for c in review["changes"])
    regimes = review["regimes"]
    starts = sorted(int(r["first_index"]) for r in regimes)[1:]
    if starts != changes:
        raise SystemExit(f"changes[].index {changes} disagree with regimes' starts {starts}")
    return Ours(
        changes=changes,
        regimes=len(regimes),
        sloped=sum(r.get("slope") is not None for r in regimes),
        wandering=any(METRIC in r.get("wandering", ()) for r in regimes),
        seconds=seconds,
    )


def run_ours(cases: Sequence[tuple[Path, Path, Path]], in_process: bool) -> list[Ours]:
    def one(case: tuple[Path, Path, Path]) -> Ours:
        start = time.perf_counter()
        review = (review_in_process if in_process else review_subprocess)(*case)
        return read_review(review, time.perf_counter() - start)

    if in_process:
        return [one(c) for c in cases]
    with ThreadPoolExecutor(max_workers=2) as pool:  # each thread waits on its own process
        return list(pool.map(one, cases))


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--subprocess", action="store_true", help="run the executable per series")
    parser.add_argument("--keep", type=Path, help="write the histories here and keep them")
    args = parser.parse_args()

    series = shapes(args.seed)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        cases = []
        for s in series:
            history, gate = write_case(s, root / s.name)
            cases.append((history, gate, root / s.name / "review.json"))
        if not args.subprocess:
            from bot.cli.main import app  # noqa: F401  (import once, outside the timings)
        ours = run_ours(cases, in_process=not args.subprocess)
    found = {name: [detect(s.values) for s in series] for name, detect in BASELINES.items()}
    found["ours"] = [o.changes for o in ours]
    scores = {
        name: [f1(f, s.annotations) for f, s in zip(fs, series, strict=True)]
        for name, fs in found.items()
    }

    print(
        f"{len(series)} series, margin {MARGIN}; #ann = changes per annotator, "
        f"#ours/#bs/#pelt = boundaries found; flags: s = regimes with a slope, w = wandering"
    )
    print(
        f"{'series':<24}{'n':>5}{'nan':>5} {'#ann':<10}{'#ours':>6}{'#bs':>5}{'#pelt':>6}"
        f"{'F1 ours':>9}{'binseg':>8}{'bs5':>7}{'pelt':>7}{'zero':>7}  flags"
    )
    for i, s in enumerate(series):
        o = ours[i]
        ann = "/".join(str(len(a)) for a in s.annotations)
        flags = (f"s{o.sloped}" if o.sloped else "") + (" w" if o.wandering else "")
        print(
            f"{s.name:<24}{s.values.size:>5}{int(np.isnan(s.values).sum()):>5} {ann:<10}"
            f"{len(o.changes):>6}{len(found['binseg'][i]):>5}{len(found['pelt'][i]):>6}"
            f"{scores['ours'][i]:>9.3f}{scores['binseg'][i]:>8.3f}{scores['binseg5'][i]:>7.3f}"
            f"{scores['pelt'][i]:>7.3f}"
            f"{scores['zero'][i]:>7.3f}  {flags}"
        )
    print("\naverage F1: " + "  ".join(f"{k} {np.mean(v):.3f}" for k, v in scores.items()))
    for kind in dict.fromkeys(s.kind for s in series):
        idx = [i for i, s in enumerate(series) if s.kind == kind]
        row = "  ".join(f"{k} {np.mean([v[i] for i in idx]):.3f}" for k, v in scores.items())
        print(f"  {kind:<11}({len(idx):>2}) {row}")
    for family in ("trend", "walk"):
        idx = [i for i, s in enumerate(series) if s.family == family]
        counts = [ours[i].regimes for i in idx]
        bs = [len(found["binseg"][i]) + 1 for i in idx]
        print(
            f"regimes on {family} series ({len(idx)}): ours mean {np.mean(counts):.2f} "
            f"max {max(counts)} ({series[idx[int(np.argmax(counts))]].name}); "
            f"binseg mean {np.mean(bs):.2f}; ours flagged wandering on "
            f"{sum(ours[i].wandering for i in idx)}, "
            f"sloped on {sum(ours[i].sloped > 0 for i in idx)}"
        )
    best = [max(scores[k][i] for k in BASELINES) for i in range(len(series))]
    worst = sorted(range(len(series)), key=lambda i: scores["ours"][i] - best[i])[:6]
    print("worst for ours (F1 ours - best baseline): " + ", ".join(
        f"{series[i].name} {scores['ours'][i]:.2f} ({scores['ours'][i] - best[i]:+.2f})"
        for i in worst
    ))  # fmt: skip
    print(
        f"time: {time.perf_counter() - start:.1f} s in all, reviews "
        f"{sum(o.seconds for o in ours):.1f} s "
        f"({'subprocess' if args.subprocess else 'in process'})"
    )


if __name__ == "__main__":
    main()
