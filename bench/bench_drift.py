"""Benchmark: drift-watch rounds over 2,000 repositories x 5 gates, against the local fakes.

Each repository of one installation holds the seed's nightly script (five gates, as in
``make demo``) and its run history as a JSON Lines file on the default branch (a ``file``
source named ``default_source`` in ``.github/threshold-bot.yml``): 60 nights, each metric
with bounded noise around its level.  In every twentieth repository (5 %)
``TRAIN_ACC_MIN_VALUE`` has failed its last 5 nights (a drift issue to open); the rest pass.

The rounds run as production runs them: ``watch_round`` with the App's client factory
(``fake.github_app().installation``: the real PyGithub client against the fake GitHub), a
SQLite store, each round in a new thread as ``bot.app.periodic`` runs each job (the App's
clients are per thread).  Measured: the cold round (empty caches: every repository's tree,
config, script and history read; the issues opened), then warm rounds with nothing new.
Per round: wall seconds; CPU per repository, as ``time.thread_time()`` of the round's own
thread (the fake serves requests on its own threads, so its CPU is not counted, nor is the
SQLite work of other threads: there is none); GitHub requests per repository that count
against the rate limit (every response but a 304, the installation-token POST and the
installation's repository list included) and 304s apart; GitHub writes (requests other than
GET, the token POST aside) and store writes (INSERT / UPDATE / DELETE statements).
Targets for a warm round with nothing new: <= 0.05 rate-limited requests and <= 2 ms CPU
per repository, no writes.  PyGithub's 1 s spacing of writes, kept against real GitHub, is
off against a loopback fake.

Then fairness (``--fairness``, about a minute): installation 1 holds ``HOSTILE_REPOS``
repositories, each with ``HOSTILE_FILES`` shell scripts of just under 1 MiB declaring
thousands of gates (the costliest file the watch accepts); installation 2 one repository whose
gate drifts.  Measured: how long after the round starts installation 2's issue is opened,
and the round's length, without budgets and with the App's default ones
(``DRIFT_REPOSITORY_SECONDS`` / ``_BYTES``, ``DRIFT_INSTALLATION_SECONDS`` / ``_BYTES``).
Target: the issue within one repository's budget (plus the drifting repository's own time).

Run: ``.venv/bin/python bench/bench_drift.py [--repos N] [--warm N] [--dashboard] [--fairness]``
(``--repos``: how many repositories, default 2,000; ``--warm``: how many warm rounds,
default 2, the targets judged on the last one; ``--dashboard``: every repository keeps a
threshold dashboard too, which the cold round opens and a warm round must not touch).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.adapters.locks import DEFAULT_TTL  # noqa: E402
from bot.adapters.locks.rows import RowLocks  # noqa: E402
from bot.adapters.settings import Settings  # noqa: E402
from bot.adapters.store.db import init_db, make_engine  # noqa: E402
from bot.core.budget import Limits  # noqa: E402
from bot.features.dashboard.write import DashboardStep  # noqa: E402
from bot.features.drift import watch  # noqa: E402
from bot.features.drift.cache import Evaluations  # noqa: E402
from bot.features.drift.read import BranchCache  # noqa: E402
from bot.features.drift.rounds import watch_round  # noqa: E402
from bot.features.drift.watch import WatchOptions, WatchReport  # noqa: E402
from tests.fakes.github_api import FakeGitHub  # noqa: E402

REPOS = 2000
NIGHTS = 60
DRIFTING_EVERY = 20  # every twentieth repository drifts (5 %)
INSTALLATION = 1
TARGET_REQUESTS = 0.05  # rate-limited GitHub requests per repository, warm
TARGET_CPU_MS = 2.0  # CPU milliseconds per repository, warm
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
TOKEN_PATH = f"/app/installations/{INSTALLATION}/access_tokens"


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


@dataclass(frozen=True)
class Round:
    """What one round cost."""

    report: WatchReport
    seconds: float  # wall
    cpu: float  # the round thread's CPU seconds
    limited: int  # GitHub responses that count against the rate limit (all but 304s)
    not_modified: int  # 304s
    writes: int  # GitHub requests other than GET (the token POST aside)
    store_writes: int  # INSERT / UPDATE / DELETE statements

    def line(self, label: str, repos: int) -> str:
        return (
            f"  {label:<12} {self.seconds:7.2f} s wall, {1000 * self.cpu / repos:6.2f} ms CPU"
            f" per repository; {self.limited / repos:6.3f} rate-limited requests per"
            f" repository ({self.limited}), {self.not_modified} 304s;"
            f" {self.writes} GitHub writes, {self.store_writes} store writes"
        )


class StoreWrites:
    """Counts the statements that write, on every thread (the round's own)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE"):
            self.count += 1


def in_thread(fake: FakeGitHub, writes: StoreWrites, run: Callable[[], WatchReport]) -> Round:
    """Run one round in a new thread, as ``bot.app.periodic`` does, and measure it."""
    before, stored = len(fake.calls), writes.count
    out: dict[str, Any] = {}

    def target() -> None:
        cpu = time.thread_time()
        out["report"] = run()
        out["cpu"] = time.thread_time() - cpu

    started = time.perf_counter()
    thread = threading.Thread(target=target, name="periodic-drift")
    thread.start()
    thread.join()
    seconds = time.perf_counter() - started
    calls = fake.calls[before:]
    return Round(
        out["report"],
        seconds,
        out["cpu"],
        limited=sum(c.status != 304 for c in calls),
        not_modified=sum(c.status == 304 for c in calls),
        writes=sum(c.method != "GET" and c.path != TOKEN_PATH for c in calls),
        store_writes=writes.count - stored,
    )


def main(repos: int, warm_rounds: int, dashboard: bool = False) -> int:
    with FakeGitHub() as fake, tempfile.TemporaryDirectory(prefix="bench-drift-") as tmp:
        script = nightly_script()
        drifting = 0
        for i in range(repos):
            drifts = i % DRIFTING_EVERY == 0
            drifting += drifts
            fake.add_repo(
                f"org{i // 50}/repo{i:04d}",
                installation_id=INSTALLATION,
                files={
                    SCRIPT: script,
                    HISTORY: history(i, drifts),
                    ".github/threshold-bot.yml": CONFIG,
                },
            )
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bot.db'}")
        sessions = init_db(engine)
        writes = StoreWrites()
        event.listen(engine, "before_cursor_execute", writes)
        app = fake.github_app()
        locks = RowLocks(engine, "bench", DEFAULT_TTL)
        finish = DashboardStep(everywhere=True) if dashboard else None
        options = WatchOptions(max_bytes=1_000_000, locks=locks, owner="bench", finish=finish)

        def run() -> WatchReport:
            return watch_round(
                sessions, app.installation, lambda _i, _o: None, options, [INSTALLATION]
            )

        cold = in_thread(fake, writes, run)
        warm = [in_thread(fake, writes, run) for _ in range(warm_rounds)]
        fake.check()
        locks.close()

    opened = sum(a.action == "opened" for a in cold.report.acted)
    problems = [r.problem for x in (cold, *warm) for r in x.report.repositories if r.problem]
    print(
        f"Drift watch{' with dashboards' if dashboard else ''},"
        f" {repos} repositories x {len(GATES)} gates ({drifting} drifting),"
        f" {NIGHTS}-night history files, one installation, each round in a new thread:"
    )
    print(cold.line("cold round", repos) + f"; {opened} issues opened of {drifting} drifting")
    for n, done in enumerate(warm, 1):
        print(done.line(f"warm round {n}", repos))
    if problems:
        print(f"  problems: {problems[:3]}")
    last = warm[-1]
    requests_met = last.limited / repos <= TARGET_REQUESTS
    cpu_met = 1000 * last.cpu / repos <= TARGET_CPU_MS
    writes_met = not last.writes and not last.store_writes
    print(
        f"  target (last warm round): <= {TARGET_REQUESTS} rate-limited requests per repository:"
        f" {'met' if requests_met else 'MISSED'}; <= {TARGET_CPU_MS:g} ms CPU per repository:"
        f" {'met' if cpu_met else 'MISSED'}; no writes: {'met' if writes_met else 'MISSED'}"
    )
    met = requests_met and cpu_met and writes_met and not problems
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
    watch.EVALUATIONS = Evaluations()
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
    parser = argparse.ArgumentParser(description="Benchmark the drift watch's rounds.")
    parser.add_argument("--repos", type=int, default=REPOS, help="repositories (default 2,000)")
    parser.add_argument("--warm", type=int, default=2, help="warm rounds (default 2)")
    parser.add_argument("--fairness", action="store_true", help="the fairness part instead")
    parser.add_argument(
        "--dashboard", action="store_true", help="every repository with a dashboard too"
    )
    args = parser.parse_args()
    sys.exit(main_fairness() if args.fairness else main(args.repos, args.warm, args.dashboard))
