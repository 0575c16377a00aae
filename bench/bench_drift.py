"""Benchmark: one drift-watch round over 200 repositories x 5 gates, against the local fakes.

Each repository of one installation holds the seed's nightly script (five gates, as in
``make demo``) and its run history as a JSON Lines file on the default branch (a ``file``
source named ``default_source`` in ``.github/threshold-bot.yml``): 60 nights, each metric
with bounded noise around its level.  In every tenth repository ``TRAIN_ACC_MIN_VALUE``
has failed its last 5 nights (a drift issue to open); the rest pass.  The round is
``watch_round`` as the App's periodic job runs it: the real PyGithub client against the
fake GitHub, a SQLite store.  Measured: the cold round (empty caches: every repository's
tree, config, script and history read; the issues opened), then a warm round with nothing
new (the head of each default branch only).  Target: <= 4 GitHub requests per repository
when nothing changed.  PyGithub's 1 s spacing of writes, kept against real GitHub, is off
against a loopback fake.

Run: ``.venv/bin/python bench/bench_drift.py``.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.adapters.locks import DEFAULT_TTL  # noqa: E402
from bot.adapters.locks.rows import RowLocks  # noqa: E402
from bot.adapters.store.db import init_db, make_engine  # noqa: E402
from bot.features.drift.watch import WatchOptions, WatchReport, watch_round  # noqa: E402
from tests.fakes.github_api import FakeGitHub  # noqa: E402

REPOS = 200
NIGHTS = 60
DRIFTING_EVERY = 10  # every tenth repository drifts
INSTALLATION = 1
TARGET_REQUESTS = 4
START = datetime(2026, 7, 1, 8, 0, tzinfo=UTC)
SCRIPT = "tests/ci/gsm8k_nightly.sh"
HISTORY = "ci/history/nightly.jsonl"
CONFIG = f"sources:\n  nightly:\n    kind: file\n    path: {HISTORY}\ndefault_source: nightly\n"
# the seed's five gates: variable -> (metric, operator, literal, healthy level, noise)
GATES = {
    "EVAL_ACC_MIN_VALUE": ("eval/all/avg_score", ">=", "0.55", 0.60, 0.006),
    "TRAIN_ACC_MIN_VALUE": ("loss/avg_final_rewards", ">=", "0.32", 0.36, 0.006),
    "AVG_NUM_TOKENS_MAX_VALUE": ("generate/avg_num_tokens", "<=", "290", 262.0, 3.0),
    "LOGPROBS_DIFF_MAX_VALUE": (
        "policy/rollout_train_logprobs_abs_diff_mean",
        "<=",
        "0.040",
        0.030,
        0.0006,
    ),
    "STEP_TIME_MAX_VALUE": ("timing/step_s", "<=", "150", 130.0, 2.0),
}
DRIFTED = ("loss/avg_final_rewards", 0.28)  # below TRAIN_ACC_MIN_VALUE's 0.32
DRIFT_NIGHTS = 5


def nightly_script() -> str:
    """The seed's nightly script: five gates asserted on the run's summary."""
    literals = "".join(f"{var}={gate[2]}\n" for var, gate in GATES.items())
    asserts = " \\\n            ".join(f'"{m} {op} ${var}"' for var, (m, op, *_) in GATES.items())
    return (
        "#!/usr/bin/env bash\n"
        "set -euo pipefail\n"
        'RUN_NAME="run_$(date +%Y%m%d%H%M%S)_$$"\n'
        "# Thresholds: 5% allowance from the last CI runs\n"
        f"{literals}"
        'uv run --isolated get_summary.py --run_name "$RUN_NAME" \\\n'
        f"  --asserts {asserts}\n"
    )


def history(seed: int, drifting: bool) -> str:
    """``NIGHTS`` nightly runs; the last ``DRIFT_NIGHTS`` dropped when ``drifting``."""
    rng = random.Random(seed)
    lines = []
    for night in range(NIGHTS):
        summary = {}
        for metric, _op, _literal, level, noise in GATES.values():
            if drifting and metric == DRIFTED[0] and night >= NIGHTS - DRIFT_NIGHTS:
                level = DRIFTED[1]
            summary[metric] = round(level + rng.uniform(-noise, noise), 5)
        at = START + timedelta(days=night)
        run = {"id": f"n{night:04d}", "created_at": at.isoformat(), "summary": summary}
        lines.append(json.dumps(run) + "\n")
    return "".join(lines)


def timed_round(
    fake: FakeGitHub, run: Callable[[], WatchReport]
) -> tuple[WatchReport, float, int, int]:
    """Run one round: its report, seconds, GitHub requests and writes."""
    before = len(fake.calls)
    started = time.perf_counter()
    report = run()
    seconds = time.perf_counter() - started
    calls = fake.calls[before:]
    return report, seconds, len(calls), sum(c.method != "GET" for c in calls)


def main() -> int:
    with FakeGitHub() as fake, tempfile.TemporaryDirectory(prefix="bench-drift-") as tmp:
        script = nightly_script()
        drifting = 0
        for i in range(REPOS):
            drifts = i % DRIFTING_EVERY == 0
            drifting += drifts
            fake.add_repo(
                f"org{i // 50}/repo{i:03d}",
                installation_id=INSTALLATION,
                files={
                    SCRIPT: script,
                    HISTORY: history(i, drifts),
                    ".github/threshold-bot.yml": CONFIG,
                },
            )
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bot.db'}")
        sessions = init_db(engine)
        app = fake.github_app()
        locks = RowLocks(engine, "bench", DEFAULT_TTL)
        options = WatchOptions(max_bytes=1_000_000, locks=locks, owner="bench")

        def run() -> WatchReport:
            return watch_round(
                sessions, app.installation, lambda _i, _o: None, options, [INSTALLATION]
            )

        app.installation(INSTALLATION).installation_repositories()  # the token, fetched once
        cold, cold_s, cold_calls, cold_writes = timed_round(fake, run)
        warm, warm_s, warm_calls, warm_writes = timed_round(fake, run)
        fake.check()

    opened = sum(a.action == "opened" for a in cold.acted)
    problems = [r.problem for r in (*cold.repositories, *warm.repositories) if r.problem]
    gates = len(GATES)
    print(f"Drift watch, {REPOS} repositories x {gates} gates, {NIGHTS}-night history files:")
    print(
        f"  cold round   {cold_s:6.2f} s  ({1000 * cold_s / REPOS:5.1f} ms per repository),"
        f" {cold_calls} GitHub requests ({cold_calls / REPOS:.2f} per repository),"
        f" {cold_writes} writes; {opened} issues opened of {drifting} drifting"
    )
    print(
        f"  warm round   {warm_s:6.2f} s  ({1000 * warm_s / REPOS:5.1f} ms per repository),"
        f" {warm_calls} GitHub requests ({warm_calls / REPOS:.2f} per repository),"
        f" {warm_writes} writes"
    )
    if problems:
        print(f"  problems: {problems[:3]}")
    per_repo = warm_calls / REPOS
    met = per_repo <= TARGET_REQUESTS and not warm_writes and not problems
    verdict = "met" if met else "MISSED"
    print(f"  target <= {TARGET_REQUESTS} requests per repository, nothing changed: {verdict}")
    return 0 if met and opened == drifting else 1


if __name__ == "__main__":
    sys.exit(main())
