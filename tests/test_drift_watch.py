"""The drift watch's behaviour, round by round: ``watch_round`` with the real PyGithub client
against ``FakeGitHub`` and a real SQLite store.

Each repository keeps its run history as a JSON Lines file on its default branch (a ``file``
source named ``default_source`` in ``.github/threshold-bot.yml``), so no W&B is needed: a
new night is a commit of the grown file.  The nightly script has two gates,
``ACC_MIN_VALUE`` (``eval/acc >= 0.55``) and ``LOSS_MAX_VALUE`` (``train/loss <= 1.10``);
healthy runs pass both.  Expected values are computed here from the runs written.
"""

from __future__ import annotations

import io
import json
import logging
import random
import re
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import event
from typer.testing import CliRunner

from bot.adapters.github.app import GitHubApp
from bot.adapters.history.factory import source_factory
from bot.adapters.locks import DEFAULT_TTL, Locks
from bot.adapters.locks.rows import RowLocks
from bot.adapters.store import cursors, installations
from bot.adapters.store import drift as records
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.drift import Sessions
from bot.app.metrics import Metrics
from bot.cli.main import app as cli
from bot.core.budget import Limits
from bot.core.formatting import day_month_year
from bot.core.history.sources import HistoryFactory
from bot.core.render.drift import drift_marker
from bot.features.drift import watch
from bot.features.drift.cache import Evaluations
from bot.features.drift.read import BranchCache
from bot.features.drift.rounds import remote_sources, watch_round
from bot.features.drift.watch import WatchOptions, WatchReport
from tests.drift_world import lower_rule
from tests.fakes.github_api import Call, FakeGitHub
from tests.fakes.github_state import Issue, Repo
from tests.fakes.wandb_server import API_KEY, FakeRun, FakeWandb, serve
from tests.live import make_settings

pytestmark = pytest.mark.servers

START = datetime(2026, 7, 1, 8, 0, tzinfo=UTC)
SCRIPT = "ci/nightly.sh"
HISTORY = "ci/history/runs.jsonl"
CONFIG = ".github/threshold-bot.yml"
ACC, LOSS = "eval/acc", "train/loss"
ACC_LITERAL, LOSS_LITERAL = "0.55", "1.10"
HEALTHY = {ACC: 0.60, LOSS: 1.00}
DROPPED = {ACC: 0.45, LOSS: 1.00}  # a step change: ACC_MIN_VALUE fails every run
NOISE = {ACC: 0.01, LOSS: 0.02}
MAX_BYTES = 4000  # MAX_THRESHOLD_FILE_BYTES of these tests
WRITES = ("POST", "PATCH", "PUT", "DELETE")
ISSUE_TITLE = f"Nightly thresholds failing: {SCRIPT}"


def script(acc: str = ACC_LITERAL, loss: str = LOSS_LITERAL, padding: int = 0) -> str:
    """The nightly script; ``padding`` bytes of comment make it as large as wanted."""
    pad = "".join(f"# {'-' * 76}\n" for _ in range(padding // 79 + 1)) if padding else ""
    return (
        "#!/usr/bin/env bash\n"
        "set -euo pipefail\n"
        f"{pad}"
        f"ACC_MIN_VALUE={acc}\n"
        f"LOSS_MAX_VALUE={loss}\n"
        'python eval.py --asserts "eval/acc >= $ACC_MIN_VALUE" "train/loss <= $LOSS_MAX_VALUE"\n'
    )


def config(drift: str = "", extra: str = "") -> str:
    """The repository config: the history file as the default source, then ``drift``
    (YAML lines under ``drift:``) and ``extra`` top-level YAML."""
    text = f"sources:\n  runs:\n    kind: file\n    path: {HISTORY}\ndefault_source: runs\n"
    if drift:
        text += "drift:\n" + "".join(f"  {line}\n" for line in drift.splitlines())
    return text + extra


@dataclass
class Runs:
    """A nightly's finished runs, one a day from ``START``, as a history file."""

    seed: int = 3
    summaries: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def add(self, levels: dict[str, float], count: int = 1) -> None:
        """``count`` runs at ``levels``, each metric with bounded noise."""
        for _ in range(count):
            self.summaries.append(
                {m: round(v + self._rng.uniform(-NOISE[m], NOISE[m]), 4) for m, v in levels.items()}
            )

    def metric(self, name: str, since: int = 0) -> list[float]:
        return [s[name] for s in self.summaries[since:]]

    def text(self) -> str:
        lines = (
            json.dumps(
                {
                    "id": f"r{i:04d}",
                    "created_at": (START + timedelta(days=i)).isoformat(),
                    "state": "finished",
                    "summary": summary,
                }
            )
            for i, summary in enumerate(self.summaries)
        )
        return "".join(line + "\n" for line in lines)


def drifted(seed: int = 3, healthy: int = 30, dropped: int = 5) -> Runs:
    """``healthy`` passing nights, then ``dropped`` nights where ``ACC_MIN_VALUE`` fails."""
    runs = Runs(seed)
    runs.add(HEALTHY, healthy)
    runs.add(DROPPED, dropped)
    return runs


@dataclass
class World:
    """A FakeGitHub, the App's client factory for it, and a store."""

    fake: FakeGitHub
    app: GitHubApp
    sessions: Sessions
    locks: Locks

    def repo(
        self,
        name: str,
        runs: Runs,
        *,
        installation: int = 7,
        drift: str = "",
        files: dict[str, str] | None = None,
    ) -> Repo:
        """A repository with the nightly script, its history and a config."""
        return self.fake.add_repo(
            name,
            installation_id=installation,
            files={SCRIPT: script(), HISTORY: runs.text(), CONFIG: config(drift), **(files or {})},
        )

    def night(self, repo: Repo, runs: Runs, files: dict[str, str | None] | None = None) -> str:
        """Commit the grown history (and ``files``) to the default branch."""
        return repo.commit(
            repo.default_branch, {HISTORY: runs.text(), **(files or {})}, message="Nightly"
        )

    def round(
        self,
        owner: str = "worker-1",
        installations: Sequence[int] = (7,),
        min_rate: int = 0,
        repository: Limits | None = None,
        installation: Limits | None = None,
        remote_for: Callable[[int, str], HistoryFactory | None] | None = None,
    ) -> WatchReport:
        """One watch round as the periodic job runs it (with these budgets; none: no limit;
        ``remote_for``: the remote history sources, none by default)."""
        options = WatchOptions(
            max_bytes=MAX_BYTES,
            locks=self.locks,
            owner=owner,
            min_rate_remaining=min_rate,
            repository=repository or Limits(),
            installation=installation or Limits(),
        )
        return watch_round(
            self.sessions,
            self.app.installation,
            remote_for or (lambda _i, _o: None),
            options,
            installations=installations,
        )


def open_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A running ``World`` with a store in ``tmp_path``; the fake is checked at the end."""
    # the watch's per-process caches start empty in every test
    monkeypatch.setattr(watch, "BRANCHES", BranchCache())
    monkeypatch.setattr(watch, "HISTORIES", watch._FileHistories())
    monkeypatch.setattr(watch, "EVALUATIONS", Evaluations())
    with FakeGitHub() as fake:
        engine = make_engine(f"sqlite:///{tmp_path / 'bot.db'}")
        sessions = init_db(engine)
        locks = RowLocks(engine, "tests", DEFAULT_TTL)
        yield World(fake, fake.github_app(), sessions, locks)
        locks.close()
        fake.check()


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    yield from open_world(tmp_path, monkeypatch)


def app_issues(repo: Repo) -> list[Issue]:
    """The issues the App opened in ``repo``, by number."""
    return [i for _, i in sorted(repo.issues.items()) if i.app_id == repo.state.app_id]


def actions(report: WatchReport) -> list[tuple[str, str]]:
    return [(a.file, a.action) for a in report.acted]


def writes(calls: list[Call]) -> list[Call]:
    return [c for c in calls if c.method in WRITES]


# ----- flaky gates ------------------------------------------------------------------------------


def flaky_runs() -> tuple[Runs, list[int]]:
    """30 healthy nights but three, scattered, where ``ACC_MIN_VALUE`` fails."""
    runs = Runs(seed=5)
    failing = [4, 13, 22]
    for i in range(30):
        runs.add({ACC: 0.50, LOSS: 1.00} if i in failing else HEALTHY)
    return runs, failing


def test_a_flaky_gate_is_reported_flaky_and_never_opens_an_item(
    world: World, tmp_path: Path
) -> None:
    runs, failing = flaky_runs()
    repo = world.repo("octo/flaky", runs)
    assert [i for i, v in enumerate(runs.metric(ACC)) if v < float(ACC_LITERAL)] == failing

    seen = []
    for night in range(3):  # three rounds; the second sees one more failure (a streak of 1)
        seen.append(world.round())
        runs.add({ACC: 0.50, LOSS: 1.00} if night == 0 else HEALTHY)
        world.night(repo, runs)
    seen.append(world.round())

    assert [actions(r) for r in seen] == [[(SCRIPT, "unchanged")]] * 4
    assert app_issues(repo) == [] and repo.pulls == {}
    assert writes(world.fake.requests(repo=repo.full_name)) == []
    item = records.get(world.sessions, repo.full_name, SCRIPT)
    assert item is not None and item.state == "idle" and item.issue is None

    # the offline report (the CLI) calls it flaky, with its failure rate, and exit status 0
    (tmp_path / "nightly.sh").write_text(script())
    (tmp_path / "runs.jsonl").write_text(runs.text())
    (tmp_path / "config.yml").write_text(config())
    result = CliRunner().invoke(
        cli,
        [
            "drift",
            "--file",
            str(tmp_path / "nightly.sh"),
            "--history",
            str(tmp_path / "runs.jsonl"),
            "--config",
            str(tmp_path / "config.yml"),
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.output)["files"]
    gates = {g["name"]: g for g in report["gates"]}
    failed = sum(
        v < float(ACC_LITERAL) for v in runs.metric(ACC)[-gates["ACC_MIN_VALUE"]["total"] :]
    )
    assert gates["ACC_MIN_VALUE"]["status"] == "flaky"
    assert gates["ACC_MIN_VALUE"]["failed"] == failed == 4
    assert gates["LOSS_MAX_VALUE"]["status"] == "passing"


# ----- outages and unreadable files -------------------------------------------------------------


def test_a_history_outage_neither_opens_nor_closes_an_item(world: World) -> None:
    runs = drifted()
    repo = world.repo("octo/outage", runs)
    assert actions(world.round()) == [(SCRIPT, "opened")]
    (issue,) = app_issues(repo)

    runs.add(HEALTHY, 10)  # the gate passes again: read, this would close the issue
    world.night(repo, runs)
    history = f"/repos/{repo.full_name}/contents/{HISTORY}"
    world.fake.fail_next("GET", re.escape(history), 502, times=4)  # the client retries 3 times
    before = len(world.fake.calls)
    outage = world.round()

    (acted,) = outage.acted
    assert acted.action == "skipped"
    assert f"{HISTORY} could not be read from GitHub" in acted.detail
    failed = [c for c in world.fake.calls[before:] if c.status == 502]
    assert len(failed) == 4 and {c.path for c in failed} == {history}
    assert writes(world.fake.calls[before:]) == []
    assert issue.state == "open"
    item = records.get(world.sessions, repo.full_name, SCRIPT)
    assert item is not None and (item.state, item.issue) == ("open", issue.number)
    metrics = Metrics()
    metrics.record_drift(outage)
    exposed = metrics.render().decode()
    assert 'threshold_bot_drift_files_total{action="skipped"} 1.0' in exposed
    assert 'threshold_bot_drift_rounds_total{outcome="complete"} 1.0' in exposed

    # GitHub answers again: the next round reads the history and closes the issue
    assert actions(world.round()) == [(SCRIPT, "closed")]
    assert issue.state == "closed"


THRESHOLDS = "ci/thresholds.yaml"
YAML_GATES = (
    "files:\n"
    f"  - path: {THRESHOLDS}\n"
    "    gates:\n"
    '      - {key: eval.acc_min, metric: eval/acc, op: ">=", name: YAML_ACC_MIN}\n'
)


def test_an_unreadable_threshold_file_neither_opens_nor_closes_its_item(world: World) -> None:
    runs = drifted()
    yaml_text = f"eval:\n  acc_min: {ACC_LITERAL}\n"
    repo = world.repo(
        "octo/unreadable",
        runs,
        files={THRESHOLDS: yaml_text, CONFIG: config(extra=YAML_GATES)},
    )
    assert sorted(actions(world.round())) == [(SCRIPT, "opened"), (THRESHOLDS, "opened")]
    opened = app_issues(repo)
    assert len(opened) == 2

    runs.add(HEALTHY, 10)  # both gates pass again, but neither file can be read
    too_large = script(padding=MAX_BYTES)
    assert len(too_large.encode()) > MAX_BYTES
    world.night(repo, runs, {SCRIPT: too_large, THRESHOLDS: "eval:\n  acc_min: [0.55\n"})
    before = len(world.fake.calls)
    report = world.round()

    skipped = {a.file: a.detail for a in report.acted if a.action == "skipped"}
    assert sorted(skipped) == [SCRIPT, THRESHOLDS] and len(report.acted) == 2
    assert "over the limit" in skipped[SCRIPT]
    assert THRESHOLDS in skipped[THRESHOLDS]
    assert writes(world.fake.calls[before:]) == []
    assert [i.state for i in opened] == ["open", "open"]
    assert [i.state for i in records.of_repo(world.sessions, repo.full_name)] == ["open", "open"]

    # readable again: both items close
    world.night(repo, runs, {SCRIPT: script(), THRESHOLDS: yaml_text})
    assert sorted(actions(world.round())) == [(SCRIPT, "closed"), (THRESHOLDS, "closed")]
    assert [i.state for i in opened] == ["closed", "closed"]


# ----- permissions and rate limits --------------------------------------------------------------


def test_without_the_issues_permission_no_issue_and_one_log_line(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    runs = drifted()
    repo = world.repo("octo/noissues", runs)
    world.fake.deny(7, "issues")
    caplog.set_level(logging.WARNING)
    first = world.round()
    runs.add(DROPPED)
    world.night(repo, runs)
    second = world.round()

    assert [actions(first), actions(second)] == [[(SCRIPT, "forbidden")]] * 2
    assert repo.issues == {}
    denied = [c for c in world.fake.calls if c.method == "POST" and c.path.endswith("/issues")]
    assert [c.status for c in denied] == [403, 403]
    lines = [r for r in caplog.records if r.name.startswith("bot.")]  # the bot's warnings
    assert len(lines) == 1
    assert repo.full_name in lines[0].getMessage() and "`issues`" in lines[0].getMessage()
    item = records.get(world.sessions, repo.full_name, SCRIPT)
    assert item is not None and item.state == "idle" and "issues" in item.note


def test_installations_are_visited_in_turn_each_with_its_token_and_a_low_rate_limit_waits(
    world: World,
) -> None:
    first = [world.repo(f"octo/a{i}", drifted(seed=i), installation=7) for i in (1, 2, 3)]
    second = [world.repo(f"acme/b{i}", drifted(seed=i), installation=8) for i in (1, 2)]
    a1, a2, a3 = (r.full_name for r in first)
    b1, b2 = (r.full_name for r in second)
    cold = world.round(installations=(7, 8))
    # one repository of each installation in turn, installation 7 first
    assert [r.repo for r in cold.repositories] == [a1, b1, a2, b2, a3]
    assert {a.action for a in cold.acted} == {"opened"} and cold.stopped_early == ()
    tokens = [c.path for c in world.fake.calls if c.path.endswith("/access_tokens")]
    assert tokens == ["/app/installations/7/access_tokens", "/app/installations/8/access_tokens"]

    runs = drifted(seed=2)
    runs.add(DROPPED)
    world.night(first[1], runs)  # news for octo/a2, which the limited round must not reach
    min_rate = 200
    world.fake.rate_cost = 1  # every response leaves one request less
    # GitHub's rate limit is per installation: 7's listing says 200 left, a1's read 199
    world.fake.installation_rates[7] = min_rate

    before = len(world.fake.calls)
    limited = world.round(installations=(7, 8), min_rate=min_rate)
    calls = world.fake.calls[before:]
    per_repo = {
        r.full_name: len([c for c in calls if c.path.startswith(f"/repos/{r.full_name}/")])
        for r in first + second
    }
    assert per_repo == {a1: 1, a2: 0, a3: 0, b1: 1, b2: 1}
    assert limited.stopped_early == (7,)
    # installation 8 goes first this round (the first installation moves on every round)
    assert [r.repo for r in limited.repositories] == [b1, a1, b2]
    metrics = Metrics()
    metrics.record_drift(limited)
    assert 'threshold_bot_drift_rounds_total{outcome="stopped_early"} 1.0' in (
        metrics.render().decode()
    )

    world.fake.rate_cost = 0
    world.fake.installation_rates.clear()
    later = world.round(installations=(7, 8), min_rate=min_rate)
    assert later.stopped_early == ()
    # installation 7 starts where the rate limit stopped it: octo/a2 gets its news first
    assert [r.repo for r in later.repositories] == [a2, b1, a3, b2, a1]
    assert [(a.file, a.action) for a in later.repositories[0].acted] == [(SCRIPT, "updated")]


# ----- settings ---------------------------------------------------------------------------------


def test_an_invalid_mode_falls_back_to_issue_and_the_issue_says_so(world: World) -> None:
    runs = drifted()
    repo = world.repo("octo/badmode", runs, drift="mode: sometimes")
    assert actions(world.round()) == [(SCRIPT, "opened")]
    (issue,) = app_issues(repo)
    assert issue.title == ISSUE_TITLE and repo.pulls == {}
    assert "sometimes" in issue.body and "using issue" in issue.body
    assert f"**{lower_rule(runs.metric(ACC, since=30), decimals=2)}**" in issue.body
    item = records.get(world.sessions, repo.full_name, SCRIPT)
    assert item is not None and item.mode == "issue"


def test_the_issue_carries_the_configured_labels_and_assignees(world: World) -> None:
    repo = world.repo(
        "octo/labels", drifted(), drift="labels: [ci, nightly]\nassignees: ['@alice']"
    )
    repo.set_permission("alice", "write")
    assert actions(world.round()) == [(SCRIPT, "opened")]
    (issue,) = app_issues(repo)
    assert (sorted(issue.labels), issue.assignees) == (["ci", "nightly"], ["alice"])


def test_mode_off_opens_nothing_and_files_limits_what_is_watched(world: World) -> None:
    other = "ci/eval.sh"
    off = world.repo("octo/off", drifted(), drift='mode: "off"', files={other: script()})
    some = world.repo("octo/some", drifted(), drift=f"files: [{SCRIPT}]", files={other: script()})
    report = world.round()
    by_repo = {r.repo: [(a.file, a.action) for a in r.acted] for r in report.repositories}
    assert by_repo == {"octo/off": [], "octo/some": [(SCRIPT, "opened")]}
    assert off.issues == {} and writes(world.fake.requests(repo=off.full_name)) == []
    assert records.of_repo(world.sessions, off.full_name) == []
    assert [i.title for i in app_issues(some)] == [ISSUE_TITLE]
    # without drift.files both scripts would be watched
    assert [i.file for i in records.of_repo(world.sessions, some.full_name)] == [SCRIPT]


def test_mode_off_written_bare_is_off_not_yaml_false(world: World) -> None:
    # YAML 1.1 reads a bare ``off`` as false; the config documents ``mode: off``
    repo = world.repo("octo/bare-off", drifted(), drift="mode: off")
    report = world.round()
    assert actions(report) == [] and repo.issues == {}


# ----- warm caches, dismissals, several workers -------------------------------------------------


def test_a_round_with_nothing_new_costs_at_most_4_requests_per_repository_and_writes_nothing(
    world: World,
) -> None:
    repos = [
        world.repo("octo/drifting", drifted()),
        world.repo("octo/healthy", Runs(seed=8)),
        world.repo("octo/flaky", flaky_runs()[0]),
    ]
    healthy = Runs(seed=8)
    healthy.add(HEALTHY, 30)
    world.night(repos[1], healthy)
    cold = world.round()
    assert actions(cold) == [(SCRIPT, "opened"), (SCRIPT, "unchanged"), (SCRIPT, "unchanged")]

    before = len(world.fake.calls)
    warm = world.round()
    calls = world.fake.calls[before:]
    assert actions(warm) == [(SCRIPT, "unchanged")] * 3
    assert writes(calls) == []
    per_repo = [
        len([c for c in calls if c.path.startswith(f"/repos/{r.full_name}/")]) for r in repos
    ]
    assert all(n <= 4 for n in per_repo), per_repo
    assert len(calls) <= 4 * len(repos)  # the installation's listing included


@contextmanager
def store_writes(sessions: Sessions) -> Iterator[list[str]]:
    """The statements that write to the store while in the block."""
    engine = sessions.kw["bind"]
    written: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        if statement.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE"):
            written.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        yield written
    finally:
        event.remove(engine, "before_cursor_execute", seen)


def three_repos(world: World) -> list[Repo]:
    """A drifting repository, a healthy one and a flaky one."""
    healthy = Runs(seed=8)
    healthy.add(HEALTHY, 30)
    return [
        world.repo("octo/drifting", drifted()),
        world.repo("octo/healthy", healthy),
        world.repo("octo/flaky", flaky_runs()[0]),
    ]


def test_a_warm_round_reads_each_head_evaluates_nothing_and_writes_nothing(world: World) -> None:
    repos = three_repos(world)
    cold = world.round()
    assert actions(cold) == [(SCRIPT, "opened"), (SCRIPT, "unchanged"), (SCRIPT, "unchanged")]
    assert [r.fresh for r in cold.repositories] == [True] * 3
    (issue,) = app_issues(repos[0])

    before = len(world.fake.calls)
    with store_writes(world.sessions) as written:
        warm = world.round()
    calls = world.fake.calls[before:]

    assert written == []  # act claims and releases each record it looks at: it was not called
    assert actions(warm) == [(SCRIPT, "unchanged")] * 3
    assert warm.acted[0].number == issue.number
    assert [r.fresh for r in warm.repositories] == [False] * 3
    reused = [[(d.file, d.report and d.report.gates) for d in r.drifts] for r in warm.repositories]
    assert reused == [
        [(d.file, d.report and d.report.gates) for d in r.drifts] for r in cold.repositories
    ]
    assert all(len(r.drifts) == 1 and r.drifts[0].report is not None for r in warm.repositories)
    for repo in repos:  # the head of the default branch, nothing else
        mine = [c for c in calls if c.path.startswith(f"/repos/{repo.full_name}/")]
        assert [(c.method, c.path) for c in mine] == [
            ("GET", f"/repos/{repo.full_name}/git/ref/heads/main")
        ]


def test_a_new_night_in_the_history_file_is_evaluated_and_acted_on(world: World) -> None:
    runs = drifted()
    repo = world.repo("octo/nightly", runs)
    assert actions(world.round()) == [(SCRIPT, "opened")]
    (issue,) = app_issues(repo)
    assert "Failed its last 5 runs in a row" in issue.body
    assert not world.round().repositories[0].fresh

    runs.add(DROPPED)  # a sixth failing night: a new SHA of the history file
    world.night(repo, runs)
    with store_writes(world.sessions) as written:
        report = world.round()

    assert report.repositories[0].fresh
    assert [(a.file, a.action, a.number) for a in report.acted] == [
        (SCRIPT, "updated", issue.number)
    ]
    assert "Failed its last 6 runs in a row" in issue.body
    assert written  # the record says what the issue shows now
    assert not world.round().repositories[0].fresh  # and the next round is warm again


def test_a_wandb_run_added_is_evaluated_and_acted_on_and_nothing_else_is(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeWandb()
    runs = drifted()
    for i, summary in enumerate(runs.summaries):
        fake.add_run(
            "acme", "nightly", FakeRun(f"r{i:04d}", START + timedelta(days=i), summary=summary)
        )
    wandb = "sources:\n  runs:\n    kind: wandb\n    entity: acme\n    project: nightly\n"
    repo = world.repo("octo/wandb", runs, files={CONFIG: wandb + "default_source: runs\n"})
    with serve(fake) as url:
        monkeypatch.setenv("WANDB_API_KEY", API_KEY)
        monkeypatch.setenv("WANDB_BASE_URL", url)
        monkeypatch.setenv("WANDB_ENTITY", "acme")
        settings = make_settings(tmp_path, database_url=f"sqlite:///{tmp_path / 'bot.db'}")
        remote_for = remote_sources(settings, source_factory(settings, world.sessions))
        assert actions(world.round(remote_for=remote_for)) == [(SCRIPT, "opened")]
        (issue,) = app_issues(repo)
        asked = sum(fake.requests.values())

        with store_writes(world.sessions) as written:
            warm = world.round(remote_for=remote_for)
        assert sum(fake.requests.values()) > asked  # W&B is asked for new runs every round
        assert not warm.repositories[0].fresh and actions(warm) == [(SCRIPT, "unchanged")]
        assert [w for w in written if "drift_items" in w] == []  # no act

        runs.add(DROPPED)  # tonight's run fails too
        fake.add_run(
            "acme",
            "nightly",
            FakeRun("r0035", START + timedelta(days=35), summary=runs.summaries[-1]),
        )
        report = world.round(remote_for=remote_for)

    assert report.repositories[0].fresh
    assert [(a.action, a.number) for a in report.acted] == [("updated", issue.number)]
    assert "Failed its last 6 runs in a row" in issue.body


def test_the_kept_evaluations_are_bounded_least_recently_used_first(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    three_repos(world)
    monkeypatch.setattr(watch, "EVALUATIONS", Evaluations(size=2))
    world.round()
    # a round visits the three in turn: each evicts the one visited two before it
    assert [r.fresh for r in world.round().repositories] == [True] * 3

    monkeypatch.setattr(watch, "EVALUATIONS", Evaluations(size=3))
    world.round()
    assert [r.fresh for r in world.round().repositories] == [False] * 3

    monkeypatch.setattr(watch, "EVALUATIONS", Evaluations(max_bytes=1000))  # under one report
    world.round()
    assert [r.fresh for r in world.round().repositories] == [True] * 3


def test_a_record_left_under_a_dead_workers_lease_is_acted_on_by_the_next_round(
    world: World,
) -> None:
    repo = world.repo("octo/lease", drifted())
    assert actions(world.round()) == [(SCRIPT, "opened")]
    dead = records.claim(  # a worker claimed it, then died: its lease has run out
        world.sessions,
        repo=repo.full_name,
        file=SCRIPT,
        installation_id=7,
        owner="worker-dead",
        seconds=-1,
    )
    assert dead is not None

    with store_writes(world.sessions) as written:
        assert actions(world.round()) == [(SCRIPT, "unchanged")]
    assert any("lease_owner" in w for w in written)  # taken over and let go
    with store_writes(world.sessions) as written:
        assert actions(world.round()) == [(SCRIPT, "unchanged")]
    assert written == []
    assert len(app_issues(repo)) == 1


def test_the_branch_reads_kept_are_bounded_in_bytes(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    repos = three_repos(world)
    size = len(script().encode())  # the one threshold file of each
    monkeypatch.setattr(watch, "BRANCHES", BranchCache(max_bytes=2 * size))
    world.round()
    before = len(world.fake.calls)
    warm = world.round()
    read = {c.path.split("/")[3] for c in world.fake.calls[before:] if "/contents/" in c.path}
    assert read == {r.name for r in repos}  # each evicted by the next two: read again
    assert [r.fresh for r in warm.repositories] == [False] * 3  # the same SHA: not evaluated

    monkeypatch.setattr(watch, "BRANCHES", BranchCache(max_bytes=3 * size))
    world.round()
    before = len(world.fake.calls)
    world.round()
    assert [c for c in world.fake.calls[before:] if "/contents/" in c.path] == []


def test_a_maintainer_closing_the_issue_dismisses_that_drift_until_another_one(
    world: World,
) -> None:
    runs = drifted()
    repo = world.repo("octo/dismiss", runs)
    assert actions(world.round()) == [(SCRIPT, "opened")]
    (issue,) = app_issues(repo)
    with world.fake.state.lock:  # a maintainer closes it
        issue.state, issue.state_reason, issue.closed_at = "closed", "not_planned", START

    runs.add(DROPPED)  # the same drift, one night longer
    world.night(repo, runs)
    assert actions(world.round()) == [(SCRIPT, "dismissed")]
    runs.add(DROPPED)
    world.night(repo, runs)
    assert actions(world.round()) == [(SCRIPT, "unchanged")]
    assert app_issues(repo) == [issue] and issue.state == "closed"  # not reopened
    item = records.get(world.sessions, repo.full_name, SCRIPT)
    assert item is not None and item.state == "idle" and item.dismissed

    runs.add({ACC: 0.45, LOSS: 1.30}, 4)  # now LOSS_MAX_VALUE fails too: a new drift
    world.night(repo, runs)
    assert actions(world.round()) == [(SCRIPT, "opened")]
    old, new = app_issues(repo)
    assert old is issue and old.state == "closed"
    assert new.state == "open" and new.number > issue.number
    assert "LOSS\\_MAX\\_VALUE" in new.body


def test_two_workers_watching_at_once_open_one_issue(world: World) -> None:
    runs = drifted()
    repo = world.repo("octo/race", runs)
    hold = world.fake.hold_next("POST", f"^/repos/{repo.full_name}/issues$", 1.0)
    reports: dict[str, WatchReport] = {}

    def run(owner: str) -> None:
        reports[owner] = world.round(owner=owner)

    first = threading.Thread(target=run, args=("host-a:1",))
    first.start()
    assert hold.reached.wait(30)  # the issue exists; worker a has not recorded it yet
    second = threading.Thread(target=run, args=("host-b:2",))
    second.start()
    first.join(60)
    second.join(60)
    assert actions(reports["host-a:1"]) == [(SCRIPT, "opened")]
    assert actions(reports["host-b:2"]) == [(SCRIPT, "busy")]
    # a third worker (a restart) finds the record: nothing new, nothing written
    assert actions(world.round(owner="host-c:3")) == [(SCRIPT, "unchanged")]
    assert len(app_issues(repo)) == 1
    assert len(records.of_repo(world.sessions, repo.full_name)) == 1


def test_a_worker_that_lost_its_record_finds_the_issue_by_its_marker(world: World) -> None:
    repo = world.repo("octo/lost", drifted())
    # a worker killed after GitHub created the issue, before it saved the record, left this
    left = repo.add_issue(ISSUE_TITLE, drift_marker(SCRIPT) + "\nhalf-written", by_app=True)
    assert actions(world.round(owner="restarted")) == [(SCRIPT, "opened")]
    assert app_issues(repo) == [left]
    assert left.body.startswith(drift_marker(SCRIPT)) and "ACC\\_MIN\\_VALUE" in left.body
    assert [c.path for c in writes(world.fake.requests(repo=repo.full_name))] == [
        f"/repos/{repo.full_name}/issues/{left.number}"
    ]
    item = records.get(world.sessions, repo.full_name, SCRIPT)
    assert item is not None and (item.state, item.issue) == ("open", left.number)


# ----- budgets: one installation cannot stall the round for the others --------------------------

SLOW_FILES = [f"ci/slow{i}.sh" for i in range(4)]
HELD_SECONDS = 3.0  # each of the slow repository's scripts takes this long to arrive
# the other installation's issue, from the round's start (one held script, then its turn;
# without turns it waited for all four: over 12 s)
ISSUE_WITHIN = 2.5 * HELD_SECONDS


def test_a_slow_repository_does_not_hold_back_another_installations_drift_issue(
    world: World,
) -> None:
    slow = world.repo(
        "slow/big", Runs(seed=4), installation=7, files={p: script() for p in SLOW_FILES}
    )
    other = world.repo("acme/drifting", drifted(), installation=8)
    for path in [SCRIPT, *SLOW_FILES]:  # every script of slow/big is slow to read
        world.fake.hold_next("GET", f"^/repos/{slow.full_name}/contents/{path}$", HELD_SECONDS)
    reports: list[WatchReport] = []
    started = time.monotonic()
    budget = Limits(seconds=HELD_SECONDS / 2)

    def run() -> None:
        reports.append(world.round(installations=(7, 8), repository=budget))

    running = threading.Thread(target=run)
    running.start()
    while not app_issues(other) and time.monotonic() - started < 4 * ISSUE_WITHIN:
        time.sleep(0.02)
    waited = time.monotonic() - started
    reads = [c for c in world.fake.requests(repo=slow.full_name) if "/contents/ci/" in c.path]
    running.join(120)

    assert [i.title for i in app_issues(other)] == [ISSUE_TITLE]
    assert waited < ISSUE_WITHIN, f"the issue took {waited:.1f} s"
    assert len(reads) < 1 + len(SLOW_FILES)  # slow/big was still being read then
    (first,) = reports
    (cut,) = first.cut
    assert (cut.scope, cut.installation_id, cut.repo) == ("repository", 7, slow.full_name)
    assert cut.resume in [SCRIPT, *SLOW_FILES]

    # the next round (nothing slow any more) starts slow/big where it was cut, and completes it
    world.fake.cancel_holds()
    done = world.round(installations=(7, 8), repository=budget)
    assert done.cut == ()
    (again,) = [r for r in done.repositories if r.repo == slow.full_name]
    visited = [a.file for a in again.acted]
    assert visited[0] == cut.resume and sorted(visited) == sorted([SCRIPT, *SLOW_FILES])
    assert cursors.stored(world.sessions) == {"round": "7"}  # nothing is cut any more


def test_a_repository_cut_by_its_bytes_resumes_where_it_stopped_and_completes_later(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    extra = ["ci/n1.sh", "ci/n2.sh", "ci/n3.sh"]
    repo = world.repo("octo/many", drifted(), files={p: script() for p in extra})
    paths = sorted([SCRIPT, *extra])  # the order the watch reads them in
    size = len(script().encode())
    budget = Limits(bytes=2 * size)  # two scripts a round: a read starts while there is room
    metrics = Metrics()
    caplog.set_level(logging.WARNING)

    def reads(since: int) -> list[str]:
        calls = world.fake.calls[since:]
        return [c.path.split("/contents/")[1] for c in calls if "/contents/ci/n" in c.path]

    first = world.round(repository=budget)
    metrics.record_drift(first)
    assert [(a.file, a.action) for a in first.acted] == [(p, "opened") for p in paths[:2]]
    (cut,) = first.cut
    assert (cut.scope, cut.repo, cut.resume) == ("repository", repo.full_name, paths[2])
    logged = [r.getMessage() for r in caplog.records if " cut at " in r.getMessage()]
    assert logged == [
        f"drift watch: installation 7: {repo.full_name} cut at {paths[2]}: its {2 * size} bytes"
        " spent; it resumes there next round"
    ]

    # another process (empty caches) takes the next round: it starts at the stored cursor
    monkeypatch.setattr(watch, "BRANCHES", BranchCache())
    monkeypatch.setattr(watch, "EVALUATIONS", Evaluations())
    before = len(world.fake.calls)
    second = world.round(repository=budget)
    metrics.record_drift(second)
    assert reads(before) == paths[2:]
    assert [(a.file, a.action) for a in second.acted] == [(p, "opened") for p in paths[2:]]
    assert [c.resume for c in second.cut] == [paths[0]]

    # the same process again: the two files it has not read yet, the others from its cache
    before = len(world.fake.calls)
    third = world.round(repository=budget)
    metrics.record_drift(third)
    assert reads(before) == paths[:2] and third.cut == ()
    assert [(a.file, a.action) for a in third.acted] == [(p, "unchanged") for p in paths]
    assert cursors.stored(world.sessions) == {}
    assert len(app_issues(repo)) == len(paths)
    exposed = metrics.render().decode()
    assert 'threshold_bot_drift_cut_total{scope="repository"} 2.0' in exposed


def test_an_installation_out_of_budget_resumes_at_the_repository_it_stopped_at(
    world: World,
) -> None:
    repos = [world.repo(f"octo/r{i}", drifted(seed=i)).full_name for i in (1, 2, 3)]
    share = Limits(bytes=2 * len(script().encode()))  # two repositories' scripts a round
    first = world.round(installation=share)
    # octo/r3 is reached (a repository read from the cache costs no bytes), but not read
    assert [(r.repo, len(r.acted)) for r in first.repositories] == [
        (repos[0], 1),
        (repos[1], 1),
        (repos[2], 0),
    ]
    (cut,) = first.cut
    assert (cut.scope, cut.installation_id, cut.repo, cut.resume) == (
        "installation",
        7,
        repos[2],
        SCRIPT,
    )
    assert cursors.stored(world.sessions) == {
        "installation:7": repos[2],
        f"repository:{repos[2]}": SCRIPT,
    }

    second = world.round(installation=share)
    assert [r.repo for r in second.repositories] == [repos[2], *repos[:2]]
    assert [a.action for a in second.acted] == ["opened", "unchanged", "unchanged"]
    assert second.cut == () and cursors.stored(world.sessions) == {}
    metrics = Metrics()
    metrics.record_drift(first)
    assert 'threshold_bot_drift_cut_total{scope="installation"} 1.0' in metrics.render().decode()


def test_the_watch_command_says_what_its_budget_cut_and_the_next_run_goes_on_from_there(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    large = script(padding=1100)  # over 1024 bytes: one script a run
    repo = world.repo("octo/cli", drifted(), files={"ci/a.sh": large, SCRIPT: large})
    installations.upsert(world.sessions, 7, "octo", "active")
    assert world.fake.private_key is not None
    env = {
        "APP_ID": str(world.fake.app_id),
        "PRIVATE_KEY": world.fake.private_key,
        "GITHUB_API_URL": world.fake.base_url,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",  # the world's store
        "MAX_THRESHOLD_FILE_BYTES": str(MAX_BYTES),
        "DRIFT_REPOSITORY_BYTES": "1024",
    }
    monkeypatch.delenv("REDIS_URL", raising=False)
    runner = CliRunner()
    first = runner.invoke(cli, ["watch"], env=env)
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines() == [
        f"{repo.full_name}: ci/a.sh: opened #1",
        f"{repo.full_name}: cut at {SCRIPT} (its 1024 bytes spent); resumes there next round",
    ]
    second = runner.invoke(cli, ["watch"], env=env)
    assert second.exit_code == 0, second.output
    assert second.stdout.splitlines() == [
        f"{repo.full_name}: {SCRIPT}: opened #2",
        f"{repo.full_name}: ci/a.sh: unchanged #1",
    ]


def test_the_watch_command_writes_the_dashboards_the_app_setting_asks_for(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = world.repo("octo/dash", drifted())
    installations.upsert(world.sessions, 7, "octo", "active")
    assert world.fake.private_key is not None
    env = {
        "APP_ID": str(world.fake.app_id),
        "PRIVATE_KEY": world.fake.private_key,
        "GITHUB_API_URL": world.fake.base_url,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",  # the world's store
        "MAX_THRESHOLD_FILE_BYTES": str(MAX_BYTES),
        "DASHBOARD": "all",
    }
    monkeypatch.delenv("REDIS_URL", raising=False)
    runner = CliRunner()
    first = runner.invoke(cli, ["watch", "--repo", repo.full_name], env=env)
    assert first.exit_code == 0, first.output
    (dashboard,) = [i for i in repo.issues.values() if i.title == "Threshold dashboard"]
    assert first.stdout.splitlines() == [
        f"{repo.full_name}: {SCRIPT}: opened #1",
        f"{repo.full_name}: dashboard opened #{dashboard.number}",
    ]
    second = runner.invoke(cli, ["watch", "--repo", repo.full_name], env=env)
    assert second.exit_code == 0, second.output
    assert second.stdout.splitlines() == [f"{repo.full_name}: {SCRIPT}: unchanged #1"]


# ----- an actions source: the nightly's own artifacts ---------------------------------------


def results_zip(accuracy: float) -> bytes:
    """A nightly's artifact: a zip holding its results JSON."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("results.json", json.dumps({"accuracy": accuracy}))
    return out.getvalue()


def test_a_gate_reading_the_nightly_artifacts_opens_its_issue_and_a_pr_run_changes_nothing(
    world: World, tmp_path: Path
) -> None:
    path = "ci/eval.sh"
    config_text = (
        "sources:\n  nightly:\n    kind: actions\n    workflow: nightly.yml\n"
        "    artifact: results\n    file: results.json\ndefault_source: nightly\n"
    )
    gate = 'ACC_MIN=0.75\npython -m evals --asserts "accuracy >= $ACC_MIN"\n'
    repo = world.fake.add_repo(
        "octo/artifacts", installation_id=7, files={path: gate, CONFIG: config_text}
    )
    nightly = repo.add_workflow("nightly.yml")
    values = [round(0.80 + 0.002 * (i % 3), 4) for i in range(30)]
    values += [round(0.70 + 0.002 * (i % 3), 4) for i in range(5)]  # failing since run 30
    for i, value in enumerate(values):
        run = repo.add_workflow_run(nightly, created_at=START + timedelta(days=i))
        repo.add_artifact(run, "results", results_zip(value))
    repo.branches["poison"] = repo.head("main")  # a PR's run, newest of all, looking healthy
    poisoned = repo.add_workflow_run(
        nightly, event="pull_request", branch="poison", created_at=START + timedelta(days=40)
    )
    repo.add_artifact(poisoned, "results", results_zip(0.99))
    settings = make_settings(tmp_path, database_url=f"sqlite:///{tmp_path / 'bot.db'}")
    remote_for = remote_sources(settings, source_factory(settings, world.sessions))
    options = WatchOptions(
        max_bytes=MAX_BYTES, locks=world.locks, owner="worker-1", min_rate_remaining=0
    )

    report = watch_round(world.sessions, world.app.installation, remote_for, options, [7])

    assert actions(report) == [(path, "opened")]
    (issue,) = app_issues(repo)
    assert issue.title == f"Nightly thresholds failing: {path}"
    since = day_month_year(START + timedelta(days=30))
    assert f"Failed its last 5 runs in a row, since {since}." in issue.body
    window = values[-5:]
    assert f"**{lower_rule(window, 2)}**" in issue.body
    assert all(f"/runs/{poisoned.id}" not in c.path for c in world.fake.calls)
