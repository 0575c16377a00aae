"""A deterministic, realistic example: a year of nightly CI runs and a threshold PR.

The history imitates a W&B project of nightly GSM8K RL runs (``gsm8k_fully_async_ci``):
one run per night (some nights two, some none), a few crashed and failed runs, outliers,
metrics on very different scales, and five step changes, each brought by a merged PR.
The last one (fully async rollout) moved ``eval/all/avg_score`` and
``generate/avg_num_tokens`` past the script's thresholds, so the nightly has failed for
the last ~22 runs; the PR under review proposes new values: some fine, one too tight,
one far looser than the limit rule.  Everything is seeded: the same seed gives the same
bytes.

Over the ~400-line guideline on purpose: a third of it is the example's story as data
(metric levels per regime, PR titles), which reads best beside the code that uses it.
"""

from __future__ import annotations

import json
import string
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

DEFAULT_SEED = 20260910
PROJECT = "gsm8k_fully_async_ci"
SCRIPT_PATH = "tests/ci/gsm8k_nightly.sh"
START = date(2025, 10, 6)
NIGHTS = 340  # 6 Oct 2025 .. 10 Sep 2026
STALE_RUNS = 22  # finished runs after the last change: the nightly fails all of them

METRICS: tuple[str, ...] = (
    "eval/all/avg_score",
    "loss/avg_final_rewards",
    "generate/avg_num_tokens",
    "policy/rollout_train_logprobs_abs_diff_mean",
    "timing/step_s",
    "policy/clip_ratio",
    "policy/entropy",
    "policy/grad_norm",
    "perf/throughput_tokens_per_s",
    "perf/max_memory_allocated_gb",
)
# decimals each metric is logged with (W&B keeps full floats; rounding keeps the file readable)
_DECIMALS = (4, 4, 1, 5, 2, 5, 4, 4, 1, 2)
# noise (one standard deviation) of each metric within a regime
_NOISE = (0.0065, 0.006, 3.2, 0.0006, 2.4, 0.0015, 0.006, 0.02, 40.0, 0.3)
# median level of each metric in each regime (rows: regimes, columns: METRICS)
_LEVELS = (
    (0.586, 0.238, 265.0, 0.0104, 121.0, 0.0, 0.421, 0.352, 1850.0, 61.2),
    (0.586, 0.238, 265.0, 0.0104, 97.0, 0.0, 0.419, 0.348, 2310.0, 61.3),
    (0.588, 0.236, 266.0, 0.0105, 98.0, 0.0121, 0.377, 0.341, 2290.0, 61.2),
    (0.589, 0.293, 262.0, 0.0106, 97.0, 0.0119, 0.381, 0.338, 2300.0, 61.1),
    (0.587, 0.291, 264.0, 0.0166, 88.0, 0.0123, 0.375, 0.291, 2480.0, 54.4),
    (0.543, 0.284, 296.0, 0.0163, 71.0, 0.0131, 0.392, 0.296, 3020.0, 55.0),
)
# metrics that are exactly zero in a regime (the clip ratio before dual-clip PPO)
_EXACT_ZERO = "policy/clip_ratio"
# the PRs whose merge starts each regime after the first, and the night of the first
# run that includes them (None: placed so that STALE_RUNS finished runs follow it)
_EFFECTS: tuple[tuple[str, str, date | None], ...] = (
    ("Upgrade the rollout engine to vLLM 0.11", "kouroshhakha", date(2025, 11, 20)),
    ("Enable dual-clip PPO loss", "erictang000", date(2026, 1, 27)),
    (
        "Give partial reward credit to well-formatted GSM8K answers",
        "tyler-griggs",
        date(2026, 4, 14),
    ),
    ("Move the trainer to FSDP2 and PyTorch 2.8", "SumanthRH", date(2026, 6, 9)),
    ("Fully async rollout: overlap generation with training", "CharlieFRuan", None),
)

_ROUTINE_TITLES = (
    "Fix typo in the GSM8K example README",
    "Bump ray to 2.49",
    "Add a unit test for the sequence packing collator",
    "[CI] Pin flash-attn to 2.8.3",
    "Refactor the generator input builder",
    "Log the learning rate every step",
    "Docs: explain micro batch sizes",
    "Fix `<think>` stripping in the chat template | Qwen3",
    "Remove the unused inference server flag",
    "Speed up checkpoint loading by 30%",
    "Bump transformers to 4.56 (thanks @dependabot)",
    "Tidy up the trainer config dataclasses",
    "Handle empty eval batches",
    "Add a Megatron smoke test",
    "Skip flaky multi-node test on A100 runners",
    "Make the weight sync timeout configurable",
)
_AUTHORS = (
    "SumanthRH",
    "erictang000",
    "tyler-griggs",
    "CharlieFRuan",
    "kouroshhakha",
    "lynnliu030",
    "dependabot[bot]",
    "devpatelio",
)

_BASE_VALUES = {
    "EVAL_ACC_MIN_VALUE": "0.56",
    "TRAIN_ACC_MIN_VALUE": "0.20",
    "AVG_NUM_TOKENS_MAX_VALUE": "283",
    "LOGPROBS_DIFF_MAX_VALUE": "0.040",
    "STEP_TIME_MAX_VALUE": "150",
}
# the PR under review: two fine, one too tight, one looser than the rule, one untouched
_HEAD_VALUES = {
    "EVAL_ACC_MIN_VALUE": "0.52",
    "TRAIN_ACC_MIN_VALUE": "0.26",
    "AVG_NUM_TOKENS_MAX_VALUE": "300",
    "LOGPROBS_DIFF_MAX_VALUE": "0.040",
    "STEP_TIME_MAX_VALUE": "180",
}
GATED_METRICS = {
    "EVAL_ACC_MIN_VALUE": ("eval/all/avg_score", ">="),
    "TRAIN_ACC_MIN_VALUE": ("loss/avg_final_rewards", ">="),
    "AVG_NUM_TOKENS_MAX_VALUE": ("generate/avg_num_tokens", "<="),
    "LOGPROBS_DIFF_MAX_VALUE": ("policy/rollout_train_logprobs_abs_diff_mean", "<="),
    "STEP_TIME_MAX_VALUE": ("timing/step_s", "<="),
}

_SCRIPT = """\
#!/usr/bin/env bash
set -euo pipefail

# Nightly GSM8K run of the fully async trainer (Qwen2.5-1.5B-Instruct, 4xH100): trains for
# MAX_STEPS steps with eval_before_train, then asserts the W&B summary metrics below.
#
# Unique per invocation (seconds + PID): the W&B project is shared, so an hour-granular
# name could collide with a concurrent run on another host.
RUN_NAME="run_$(date +%Y%m%d%H%M%S)_$$"
SCRIPT_DIR=$(dirname "$(realpath "$0")")
MAX_STEPS=40

# {header}
EVAL_ACC_MIN_VALUE={EVAL_ACC_MIN_VALUE}
TRAIN_ACC_MIN_VALUE={TRAIN_ACC_MIN_VALUE}
AVG_NUM_TOKENS_MAX_VALUE={AVG_NUM_TOKENS_MAX_VALUE}
LOGPROBS_DIFF_MAX_VALUE={LOGPROBS_DIFF_MAX_VALUE}
export STEP_TIME_MAX_VALUE={STEP_TIME_MAX_VALUE}

# The job's working_dir is the repo root, so relative paths work.
bash examples/train/fully_async/fully_async_run_gsm8k.sh \\
  trainer.epochs=1 \\
  trainer.max_steps=$MAX_STEPS \\
  trainer.eval_before_train=true \\
  trainer.micro_forward_batch_size_per_gpu=8 \\
  trainer.micro_train_batch_size_per_gpu=8 \\
  trainer.run_name=\\"$RUN_NAME\\" trainer.project_name=\\"gsm8k_fully_async_ci\\"

uv run --isolated --extra fsdp "$SCRIPT_DIR/get_summary.py" --run_name "$RUN_NAME" \\
  --project_name "gsm8k_fully_async_ci" \\
  --asserts "eval/all/avg_score >= $EVAL_ACC_MIN_VALUE" \\
            "loss/avg_final_rewards >= $TRAIN_ACC_MIN_VALUE" \\
            "generate/avg_num_tokens <= $AVG_NUM_TOKENS_MAX_VALUE" \\
            "policy/rollout_train_logprobs_abs_diff_mean <= $LOGPROBS_DIFF_MAX_VALUE" \\
            "timing/step_s <= ${{STEP_TIME_MAX_VALUE}}"
"""
_BASE_HEADER = "Thresholds: 5% allowance from min/max of the last 20 CI runs as of 2nd Feb 2026"
_HEAD_HEADER = "Thresholds: rebaselined after the fully async rollout (#{number})"


@dataclass(frozen=True)
class DemoPull:
    """A pull request squash-merged into main (one commit per PR)."""

    number: int
    title: str
    author: str
    merge_commit: str
    merged_at: datetime

    def to_json(self) -> dict[str, Any]:
        """The JSON form written to ``pulls.json``."""
        return {
            "number": self.number,
            "title": self.title,
            "author": self.author,
            "merge_commit": self.merge_commit,
            "merged_at": _iso(self.merged_at),
        }


@dataclass(frozen=True)
class DemoRepo:
    """The example repository: its merged PRs, oldest first, and the PR under review."""

    initial_commit: str
    pulls: tuple[DemoPull, ...]
    effect_pulls: tuple[int, ...]  # numbers of the PRs that started each regime change
    threshold_pull: int
    threshold_base: str  # main's head when the threshold PR was opened
    threshold_head: str  # the PR's head commit


@dataclass(frozen=True)
class Example:
    """Everything ``write_example`` produces, in memory."""

    records: tuple[dict[str, Any], ...]
    repo: DemoRepo
    base_script: str
    head_script: str


@dataclass(frozen=True)
class ExamplePaths:
    """Where ``write_example`` put the example files."""

    root: Path
    history: Path  # history.jsonl
    base: Path  # base/<SCRIPT_PATH>: the threshold script before the PR
    head: Path  # head/<SCRIPT_PATH>: the script as the PR proposes it
    pulls_file: Path  # pulls.json: merged PRs with their merge commits, and the PR under review
    repo: DemoRepo
    script_path: str = SCRIPT_PATH


# --------------------------------------------------------------------------- generation


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sha(rng: np.random.Generator) -> str:
    return rng.bytes(20).hex()


def _run_id(rng: np.random.Generator) -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(alphabet[i] for i in rng.integers(0, len(alphabet), size=8))


def _schedule(rng: np.random.Generator) -> list[tuple[datetime, str]]:
    """Run start times and tags: a nightly at ~08:00 UTC, some re-runs, some missed nights."""
    times: list[tuple[datetime, str]] = []
    for night in range(NIGHTS):
        day = START + timedelta(days=night)
        if rng.random() < 0.06:  # CI outage: no run that night
            continue
        start = datetime.combine(day, time(8, 0), UTC)
        times.append((start + timedelta(seconds=int(rng.integers(0, 1500))), "nightly"))
        if rng.random() < 0.05:  # a manual re-run in the afternoon
            times.append((start + timedelta(hours=int(rng.integers(5, 10))), "manual"))
    return times


def _states(rng: np.random.Generator, count: int) -> list[str]:
    """Mostly finished; a few crashed or failed; tonight's run is still going."""
    states = [
        "crashed" if d < 0.025 else "failed" if d < 0.045 else "finished" for d in rng.random(count)
    ]
    states[-1] = "running"
    return states


def _boundaries(times: Sequence[datetime], states: Sequence[str]) -> list[int]:
    """Index of the first run of each regime after the first."""
    finished = [i for i, s in enumerate(states) if s == "finished"]
    stale_start = finished[-STALE_RUNS]
    return [
        stale_start if night is None else next(i for i, t in enumerate(times) if t.date() >= night)
        for _title, _author, night in _EFFECTS
    ]


def _regime_of(count: int, bounds: Sequence[int]) -> NDArray[np.int_]:
    return np.searchsorted(np.asarray(bounds), np.arange(count), side="right")


def _values(
    rng: np.random.Generator,
    regimes: NDArray[np.int_],
    levels: NDArray[np.float64],
    noise: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Gaussian noise around each run's regime level; exact zeros stay exact."""
    base = levels[regimes]
    values = base + rng.normal(size=base.shape) * noise
    return np.where(base == 0.0, 0.0, values)


def _repo(rng: np.random.Generator, times: Sequence[datetime], bounds: Sequence[int]) -> DemoRepo:
    """Squash merges into main: a few routine PRs a day, plus one effect PR per boundary."""
    effect_at = {i: times[b - 1] + (times[b] - times[b - 1]) / 2 for i, b in enumerate(bounds)}
    number = 1650
    pulls: list[DemoPull] = []
    effect_numbers: list[int] = []
    day = START - timedelta(days=1)
    end = times[-1].date()
    while day <= end:
        merges: list[tuple[datetime, int | None]] = [
            (datetime.combine(day, time(9, 0), UTC) + timedelta(minutes=int(m)), None)
            for m in sorted(rng.integers(0, 13 * 60, size=int(rng.poisson(1.1))))
        ]
        merges += [(at, i) for i, at in effect_at.items() if at.date() == day]
        for at, effect in sorted(merges, key=lambda m: m[0]):
            number += int(rng.geometric(0.45)) - 1  # issues take numbers too
            if effect is None:
                title = _ROUTINE_TITLES[int(rng.integers(0, len(_ROUTINE_TITLES)))]
                author = _AUTHORS[int(rng.integers(0, len(_AUTHORS)))]
            else:
                title, author, _night = _EFFECTS[effect]
                effect_numbers.append(number)
            pulls.append(DemoPull(number, title, author, _sha(rng), at))
            number += 1
        day += timedelta(days=1)
    return DemoRepo(
        initial_commit=_sha(rng),
        pulls=tuple(pulls),
        effect_pulls=tuple(effect_numbers),
        threshold_pull=number + 2,
        threshold_base=pulls[-1].merge_commit,
        threshold_head=_sha(rng),
    )


def _commit_at(repo: DemoRepo, moment: datetime) -> str:
    """Main's head commit at ``moment`` (what the nightly checked out)."""
    merged = [p.merge_commit for p in repo.pulls if p.merged_at <= moment]
    return merged[-1] if merged else repo.initial_commit


def _summary(row: NDArray[np.float64], state: str, rng: np.random.Generator) -> dict[str, float]:
    values = {m: round(float(v), d) for m, v, d in zip(METRICS, row, _DECIMALS, strict=True)}
    if state == "finished":
        return values
    if state in ("crashed", "running"):  # died (or is) mid-training: no eval, partial perf
        keep = ("timing/step_s", "perf/throughput_tokens_per_s", "perf/max_memory_allocated_gb")
        return {m: values[m] for m in keep} if rng.random() < 0.7 else {}
    return {}  # failed at start-up


def build_example(seed: int = DEFAULT_SEED) -> Example:
    """The whole example in memory: history records, the repository and both scripts."""
    rng = np.random.default_rng(seed)
    schedule = _schedule(rng)
    times = [t for t, _tag in schedule]
    states = _states(rng, len(times))
    bounds = _boundaries(times, states)
    regimes = _regime_of(len(times), bounds)
    values = _values(rng, regimes, np.asarray(_LEVELS), np.asarray(_NOISE))
    finished = [i for i, s in enumerate(states) if s == "finished"]
    _outliers(values, finished)
    repo = _repo(rng, times, bounds)
    records: list[dict[str, Any]] = []
    for i, ((moment, tag), state) in enumerate(zip(schedule, states, strict=True)):
        summary: dict[str, Any] = _summary(values[i], state, rng)
        if i == finished[len(finished) // 2]:
            summary["policy/grad_norm"] = float("nan")  # a diverged step, logged as NaN
        records.append(
            {
                "id": _run_id(rng),
                "name": f"run_{moment:%Y%m%d%H%M%S}_{int(rng.integers(1000, 65000))}",
                "created_at": _iso(moment),
                "state": state,
                "commit": _commit_at(repo, moment),
                "tags": [tag],
                "summary": summary,
            }
        )
    async_pr = repo.effect_pulls[-1]
    base_script = _SCRIPT.format(header=_BASE_HEADER, **_BASE_VALUES)
    head_script = _SCRIPT.format(header=_HEAD_HEADER.format(number=async_pr), **_HEAD_VALUES)
    return Example(tuple(records), repo, base_script, head_script)


def _outliers(values: NDArray[np.float64], finished: Sequence[int]) -> None:
    """A few bad nights, well before the recent window: slow node, bad eval, runaway lengths."""
    col = {m: j for j, m in enumerate(METRICS)}
    n = len(finished)
    values[finished[int(n * 0.21)], col["eval/all/avg_score"]] = 0.4731
    values[finished[int(n * 0.47)], col["timing/step_s"]] *= 3.4
    values[finished[int(n * 0.63)], col["generate/avg_num_tokens"]] = 341.7


def generate_history(seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    """The example's run history as JSON-lines records (docs/history-format.md)."""
    return list(build_example(seed).records)


def dump_jsonl(records: Sequence[dict[str, Any]]) -> str:
    """Records as JSON Lines text (NaN written as ``NaN``, as Python and W&B exports do)."""
    return "".join(json.dumps(r, separators=(", ", ": ")) + "\n" for r in records)


def write_example(directory: Path, seed: int = DEFAULT_SEED) -> ExamplePaths:
    """Write history.jsonl, base/ and head/ scripts and pulls.json under ``directory``."""
    example = build_example(seed)
    directory.mkdir(parents=True, exist_ok=True)
    history = directory / "history.jsonl"
    history.write_text(dump_jsonl(example.records), encoding="utf-8")
    base = directory / "base" / SCRIPT_PATH
    head = directory / "head" / SCRIPT_PATH
    for path, text in ((base, example.base_script), (head, example.head_script)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    repo = example.repo
    pulls_file = directory / "pulls.json"
    pulls_file.write_text(
        json.dumps(
            {
                "initial_commit": repo.initial_commit,
                "merged": [p.to_json() for p in repo.pulls],
                "effect_pulls": list(repo.effect_pulls),
                "threshold_pull": {
                    "number": repo.threshold_pull,
                    "title": "Rebaseline the gsm8k nightly thresholds",
                    "base_commit": repo.threshold_base,
                    "head_commit": repo.threshold_head,
                    "file": SCRIPT_PATH,
                },
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return ExamplePaths(directory, history, base, head, pulls_file, repo)


# --------------------------------------------------------------------------- benchmarks


def scaled_history(runs: int, metrics: int, seed: int = 0) -> list[dict[str, Any]]:
    """A larger synthetic history for benchmarks: ``runs`` finished-or-not runs with
    ``metrics`` metrics (the demo's, then fillers), five step changes, hourly spacing."""
    rng = np.random.default_rng(seed)
    names = list(METRICS[:metrics]) + [
        f"bench/metric_{j:02d}" for j in range(max(0, metrics - len(METRICS)))
    ]
    levels = np.asarray(_LEVELS)[:, : min(metrics, len(METRICS))]
    noise = np.asarray(_NOISE)[: min(metrics, len(METRICS))]
    extra = len(names) - levels.shape[1]
    if extra:
        fill = rng.uniform(0.5, 500.0, size=extra)
        steps = 1.0 + rng.normal(scale=0.08, size=(levels.shape[0], extra))
        levels = np.hstack([levels, fill * steps])
        noise = np.concatenate([noise, fill * 0.01])
    bounds = [int(runs * f) for f in (0.15, 0.35, 0.55, 0.75, 0.93)]
    values = _values(rng, _regime_of(runs, bounds), levels, noise)
    start = datetime.combine(START, time(8, 0), UTC)
    states = np.where(rng.random(runs) < 0.04, "crashed", "finished")
    return [
        {
            "id": f"r{i:06d}",
            "name": f"run_{i:06d}",
            "created_at": _iso(start + timedelta(hours=i)),
            "state": str(states[i]),
            "commit": f"{i:040x}",
            "summary": {n: float(v) for n, v in zip(names, values[i], strict=True)}
            if states[i] == "finished"
            else {},
        }
        for i in range(runs)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m demo.data [DIR]``: write the example into DIR (default: a new temporary
    directory, never the checkout) and print the directory on stdout."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print("usage: python -m demo.data [DIR]", file=sys.stderr)
        return 2
    directory = Path(args[0]) if args else Path(tempfile.mkdtemp(prefix="threshold-bot-example-"))
    write_example(directory)
    print(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
