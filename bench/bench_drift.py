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

Then fairness (``--fairness``, about a minute): installation 1 holds ``HOSTILE_REPOS``
repositories, each with ``HOSTILE_FILES`` shell scripts of just under 1 MiB declaring
thousands of gates (the costliest file the watch accepts); installation 2 one repository whose
gate drifts.  Measured: how long after the round starts installation 2's issue is opened,
and the round's length, without budgets and with the App's default ones
(``DRIFT_REPOSITORY_SECONDS`` / ``_BYTES``, ``DRIFT_INSTALLATION_SECONDS`` / ``_BYTES``).
Target: the issue within one repository's budget (plus the drifting repository's own time).

Run: ``.venv/bin/python bench/bench_drift.py [--fairness]``.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.adapters.locks import DEFAULT_TTL  # noqa: E402
from bot.adapters.locks.rows import RowLocks  # noqa: E402
from bot.adapters.settings import Settings  # noqa: E402
from bot.adapters.store.db import init_db, make_engine  # noqa: E402
from bot.core.budget import Limits  # noqa: E402
from bot.features.drift import watch  # noqa: E402
from bot.features.drift.read import BranchCache  # noqa: E402
from bot.features.drift.rounds import watch_round  # noqa: E402
from bot.features.drift.watch import WatchOptions, WatchReport  # noqa: E402
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
HOSTILE_REPOS = 2
HOSTILE_FILES = 4
MIB = 1024 * 1024


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


def hostile_script(size: int = MIB - 1024) -> str:
    """A shell script of just under ``size`` bytes declaring as many gates as fit."""
    head = "#!/usr/bin/env bash\n"
    names: list[str] = []
    body = ""
    while len(head) + 2 * len(body) < size - 64:
        name = f"G{len(names)}_MIN_VALUE"
        names.append(name)
        body += f"{name}=0.{len(names) % 97:02d}\n"
    asserts = " ".join(f'"m/{i} >= ${n}"' for i, n in enumerate(names))
    return (head + body + f"python eval.py --asserts {asserts}\n")[: size - 1] + "\n"


def fairness(repository: Limits, installation: Limits, tmp: Path) -> tuple[float, float, int]:
    """One round over the hostile installation and the drifting one, with these budgets:
    seconds until the drifting one's issue, the round's seconds, and the cuts."""
    watch.BRANCHES, watch.HISTORIES = BranchCache(), watch._FileHistories()
    with FakeGitHub() as fake:
        script = hostile_script()
        for r in range(HOSTILE_REPOS):
            files = {f"ci/big{i}.sh": script for i in range(HOSTILE_FILES)}
            files[HISTORY] = history(r, drifting=False)
            files[".github/threshold-bot.yml"] = CONFIG
            fake.add_repo(f"hostile/big{r}", installation_id=1, files=files)
        drifting = fake.add_repo(
            "acme/nightly",
            installation_id=2,
            files={
                SCRIPT: nightly_script(),
                HISTORY: history(0, drifting=True),
                ".github/threshold-bot.yml": CONFIG,
            },
        )
        engine = make_engine(f"sqlite:///{tmp / 'fair.db'}")
        sessions = init_db(engine)
        locks = RowLocks(engine, "bench", DEFAULT_TTL)
        options = WatchOptions(
            max_bytes=MIB,
            locks=locks,
            owner="bench",
            repository=repository,
            installation=installation,
        )
        app = fake.github_app()
        reports: list[WatchReport] = []
        started = time.perf_counter()
        running = threading.Thread(
            target=lambda: reports.append(
                watch_round(sessions, app.installation, lambda _i, _o: None, options, [1, 2])
            )
        )
        running.start()
        while not drifting.issues and running.is_alive():
            time.sleep(0.01)
        issue = time.perf_counter() - started
        running.join()
        took = time.perf_counter() - started
        locks.close()
        engine.dispose()
        (tmp / "fair.db").unlink()
    return issue, took, len(reports[0].cut)


def main_fairness() -> int:
    settings = Settings(_env_file=None)
    size = len(hostile_script().encode())
    print(
        f"Fairness: installation 1 with {HOSTILE_REPOS} repositories x {HOSTILE_FILES} scripts"
        f" of {size} bytes; installation 2 with one drifting repository:"
    )
    met = True
    with tempfile.TemporaryDirectory(prefix="bench-drift-") as tmp:
        for label, budgets in (
            ("no budgets", False),
            (
                f"App defaults ({settings.drift_repository_seconds:g} s /"
                f" {settings.drift_repository_bytes} B per repository,"
                f" {settings.drift_installation_seconds:g} s /"
                f" {settings.drift_installation_bytes} B per installation)",
                True,
            ),
        ):
            repository, installation = Limits(), Limits()
            if budgets:
                repository = Limits(
                    seconds=settings.drift_repository_seconds,
                    bytes=settings.drift_repository_bytes,
                )
                installation = Limits(
                    seconds=settings.drift_installation_seconds,
                    bytes=settings.drift_installation_bytes,
                )
            issue, took, cuts = fairness(repository, installation, Path(tmp))
            print(
                f"  {label}: installation 2's issue after {issue:5.1f} s;"
                f" round {took:5.1f} s, {cuts} cut"
            )
            if budgets:
                met = issue <= settings.drift_repository_seconds + 5
    print(
        f"  target: the issue within one repository's budget (+5 s): {'met' if met else 'MISSED'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main_fairness() if "--fairness" in sys.argv[1:] else main())
