"""End to end: the threshold dashboard issue of a repository, written by the drift watch's
rounds through the real App (uvicorn + worker + store) against the GitHub fake and fake W&B
(``tests/drift_world.py``).

The seed-like repository is ``tests/test_drift_e2e.py``'s: five gates, five regimes from
31 May, the rewards dropping below ``TRAIN_ACC_MIN_VALUE`` on 30 Jun; here ``EVAL_ACC_MIN_VALUE``
also fails on a few scattered nights.  Expected values are computed from the generated runs.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta

import pytest

from bot.adapters.store import dashboards
from bot.core.budget import Limits
from bot.core.dashboard.body import DASHBOARD_MARKER, DASHBOARD_TITLE, dashboard_body
from bot.core.dashboard.view import RepoView
from bot.core.formatting import day_month_year
from bot.features.dashboard import write
from bot.features.dashboard.write import DashboardStep
from bot.features.drift.rounds import remote_sources, watch_round
from bot.features.drift.watch import WatchOptions, WatchReport
from tests.drift_world import (
    CONFIG,
    GATES,
    INSTALLATION,
    LITERALS,
    SCRIPT,
    Nightly,
    World,
    issues_by_app,
    nightly_script,
    open_world,
)
from tests.fakes.github_shapes import WEB
from tests.fakes.github_state import Issue, Repo
from tests.test_drift_e2e import DROP, MIN_FAILURES, PER_REGIME, REGIMES, START

pytestmark = pytest.mark.servers

TRAIN, EVAL = "TRAIN_ACC_MIN_VALUE", "EVAL_ACC_MIN_VALUE"
LOOKBACK = 30  # rule.failure_lookback's default
HEALTHY = ("AVG_NUM_TOKENS_MAX_VALUE", "LOGPROBS_DIFF_MAX_VALUE", "STEP_TIME_MAX_VALUE")
EVAL_METRIC, LOSS = GATES[EVAL][0], GATES[TRAIN][0]
TOKENS, STEP = GATES["AVG_NUM_TOKENS_MAX_VALUE"][0], GATES["STEP_TIME_MAX_VALUE"][0]
# the seed's regimes, with tokens and step time steady (so their gates can be healthy)
SEED_REGIMES = [
    {**levels, TOKENS: tokens, STEP: 97.0}
    for levels, tokens in zip(REGIMES, (265.0, 266.0, 268.0, 264.0, 265.0), strict=True)
]
SEED_DROP = {**DROP, TOKENS: 265.0, STEP: 97.0}
# the healthy gates' literals where the history puts them: every run passes, a harmful move
# of 5% from the median would not
SEED_LITERALS = {
    "AVG_NUM_TOKENS_MAX_VALUE": "275",
    "LOGPROBS_DIFF_MAX_VALUE": "0.018",
    "STEP_TIME_MAX_VALUE": "100",
}
# nights (from 31 May) when EVAL fails, scattered: the last after the drop, not the newest
FLAKY_NIGHTS = (9, 16, 22, 27, 31)
ON = "drift:\n  mode: issue\ndashboard: on\n"


@dataclass
class Seed:
    """The seed-like repository and its nightly, after the drop and one round a night."""

    repo: Repo
    nightly: Nightly
    first_failing: int  # index of the first run below TRAIN's literal
    rounds: list[WatchReport]

    @property
    def repo_url(self) -> str:
        return f"{WEB}/{self.repo.full_name}"


def seed_repository(world: World, name: str, config: str = ON) -> tuple[Repo, Nightly]:
    """``name`` with the nightly script and ``config`` on main, and the five regimes' runs,
    EVAL's metric below its literal on ``FLAKY_NIGHTS``."""
    project = f"{name.split('/')[1]}_ci"
    repo = world.github.add_repo(
        name,
        installation_id=INSTALLATION,
        files={SCRIPT: nightly_script(project, **SEED_LITERALS), CONFIG: config},
        date=START - timedelta(days=30),
    )
    repo.set_permission("alice", "write")
    nightly = world.nightly(repo, project, START)
    for i, levels in enumerate(SEED_REGIMES):
        if i:
            files: dict[str, str | None] = {f"trainer/stage{i}.py": f"STAGE = {i}\n"}
            nightly.merge(f"Trainer stage {i}", files, branch=f"stage{i}")
        for _ in range(PER_REGIME):
            run(nightly, levels)
    rewards = {"trainer/rewards.py": "PARTIAL_CREDIT = False\n"}
    nightly.merge("Drop partial reward credit", rewards, branch="rewards")
    return repo, nightly


def run(nightly: Nightly, levels: dict[str, float] = SEED_DROP) -> int:
    """Tonight's run at ``levels``, EVAL's metric low on ``FLAKY_NIGHTS``; the next night."""
    night = len(nightly.values)
    low = night in FLAKY_NIGHTS
    nightly.run({**levels, EVAL_METRIC: 0.540} if low else levels)
    return night + 1


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, module_backends: dict[str, str]
) -> Iterator[World]:
    """The App, on SQLite and on PostgreSQL + Redis."""
    with open_world(tmp_path_factory.mktemp("dashboard_e2e"), **module_backends) as running:
        yield running


@pytest.fixture(scope="module")
def seed(world: World) -> Seed:
    repo, nightly = seed_repository(world, "octo/seed")
    first = len(nightly.values)
    rounds = [world.watch()]
    for _night in range(MIN_FAILURES + 1):
        run(nightly)
        rounds.append(world.watch())
    return Seed(repo, nightly, first, rounds)


def the_dashboard(repo: Repo) -> Issue:
    """The one dashboard issue this App wrote in ``repo``."""
    (issue,) = issues_by_app(repo, DASHBOARD_TITLE)
    assert issue.body.startswith(DASHBOARD_MARKER)
    return issue


def section(body: str, heading: str) -> str:
    """The part of ``body`` from ``heading`` to the next section."""
    start = body.index(heading)
    ends = [
        at
        for mark in ("\n## ", "\n<details>")
        if (at := body.find(mark, start + len(heading))) != -1
    ]
    return body[start : min(ends, default=len(body))]


def md(name: str) -> str:
    """``name`` as the body writes it (Markdown's ``_`` escaped)."""
    return name.replace("_", "\\_")


def lines_naming(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if f"<code>{md(name)}</code>" in line]


def healthy_part(body: str) -> str:
    start = body.index("<summary>Healthy")
    return body[start : body.index("</details>", start)]


def dashboard_requests(world: World, repo: Repo) -> list[str]:
    """The requests to ``repo``'s issues (the dashboard's, and the drift items')."""
    return [
        f"{c.method} {c.path}"
        for c in world.github.requests(repo=repo.full_name)
        if c.path.startswith(f"/repos/{repo.full_name}/issues")
    ]


# --------------------------------------------------------------------------- the seed


def test_the_seed_data_has_train_failing_since_30_june_and_eval_scattered(seed: Seed) -> None:
    train = seed.nightly.metric(GATES[TRAIN][0])
    evals = seed.nightly.metric(EVAL_METRIC)
    assert seed.nightly.dates[seed.first_failing].date().isoformat() == "2026-06-30"
    assert all(v < float(LITERALS[TRAIN]) for v in train[seed.first_failing :])
    failed = [i for i, v in enumerate(evals) if v < float(LITERALS[EVAL])]
    assert failed == list(FLAKY_NIGHTS)


def test_the_seed_dashboard_puts_each_gate_where_its_history_says(seed: Seed) -> None:
    body = the_dashboard(seed.repo).body
    attention = section(body, "## Needs attention")
    since = day_month_year(seed.nightly.dates[seed.first_failing])
    assert since == "30 Jun 2026"
    train = seed.nightly.metric(GATES[TRAIN][0])
    streak = len(train) - seed.first_failing
    (train_line,) = lines_naming(attention, TRAIN)
    failing = sum(v < float(LITERALS[TRAIN]) for v in train[-LOOKBACK:])
    assert f"failing since {since}: {failing} of the last {LOOKBACK} runs" in train_line
    assert f"the last {streak} in a row" in train_line
    flaky = section(body, "## Flaky")
    (eval_line,) = lines_naming(flaky, EVAL)
    evals = seed.nightly.metric(EVAL_METRIC)[-LOOKBACK:]
    failed = sum(v < float(LITERALS[EVAL]) for v in evals)
    assert failed == len(FLAKY_NIGHTS)
    assert f"{failed} of the last {LOOKBACK} runs" in eval_line
    healthy = healthy_part(body)
    for name in HEALTHY:
        assert lines_naming(healthy, name)
        assert not lines_naming(attention, name) and not lines_naming(flaky, name)
    assert not lines_naming(attention, EVAL) and not lines_naming(healthy, TRAIN)
    assert not lines_naming(flaky, TRAIN) and not lines_naming(healthy, EVAL)
    detected = section(body, "## Detected threshold files")
    assert f"<code>{md(SCRIPT)}</code>" in detected
    assert all(lines_naming(detected, name) for name in GATES)


def test_the_dashboard_links_the_open_drift_issue(seed: Seed) -> None:
    (item,) = issues_by_app(seed.repo, f"Nightly thresholds failing: {SCRIPT}")
    (train_line,) = lines_naming(
        section(the_dashboard(seed.repo).body, "## Needs attention"), TRAIN
    )
    assert f"]({seed.repo_url}/issues/{item.number})" in train_line


def test_the_dashboard_was_opened_once_then_edited_in_place(seed: Seed, world: World) -> None:
    issue = the_dashboard(seed.repo)
    posts = [
        c
        for c in world.github.requests("POST", f"/repos/{seed.repo.full_name}/issues")
        if DASHBOARD_MARKER in str(c.body)
    ]
    assert len(posts) == 1
    assert issue.state == "open"
    assert issue.title == DASHBOARD_TITLE


def test_a_round_with_nothing_new_makes_no_request_for_the_dashboard(
    seed: Seed, world: World
) -> None:
    before = len(world.github.requests(repo=seed.repo.full_name))
    body = the_dashboard(seed.repo).body
    world.watch()
    calls = world.github.requests(repo=seed.repo.full_name)[before:]
    assert [c.path for c in calls if "/issues" in c.path] == []
    assert the_dashboard(seed.repo).body == body


def test_a_round_with_nothing_new_does_not_even_render_it(seed: Seed, world: World) -> None:
    world.watch()  # as warm as it gets
    rendered: list[str] = []

    def counted(view: RepoView) -> str:
        rendered.append(view.repo)
        return dashboard_body(view)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(write, "dashboard_body", counted)
        report = world.watch()
    (watched,) = [r for r in report.repositories if r.repo == seed.repo.full_name]
    assert not watched.fresh and watched.finished == ""
    assert seed.repo.full_name not in rendered


def test_a_new_run_that_changes_what_it_shows_edits_the_same_issue(
    seed: Seed, world: World
) -> None:
    issue = copy.deepcopy(the_dashboard(seed.repo))
    path = f"/repos/{seed.repo.full_name}/issues/{issue.number}"
    before = len(world.github.requests("PATCH", path))
    run(seed.nightly)
    world.watch()
    after = the_dashboard(seed.repo)
    assert after.number == issue.number
    assert after.body != issue.body
    assert len(world.github.requests("PATCH", path)) == before + 1
    assert len(issues_by_app(seed.repo, DASHBOARD_TITLE)) == 1


def test_a_merged_rebaseline_shows_on_the_dashboard_with_its_date(world: World) -> None:
    repo, nightly = seed_repository(world, "octo/rebaselined")
    for _night in range(MIN_FAILURES):
        run(nightly)
        world.watch()
    (item,) = issues_by_app(repo, f"Nightly thresholds failing: {SCRIPT}")
    pulls = set(repo.pulls)
    world.comment_on_issue(repo, item, "alice", "/rebaseline")
    (number,) = set(repo.pulls) - pulls
    before = repo.head("main")
    repo.merge_pr(number)
    world.pull_closed(repo, number)
    world.push(repo, before, [SCRIPT])
    run(nightly)
    world.watch()
    merged_at = repo.pr(number).merged_at
    assert merged_at is not None
    body = the_dashboard(repo).body
    placed = body[: body.index("## Detected threshold files")]
    (line,) = lines_naming(placed, TRAIN)  # in whichever section its history puts it
    assert f"Last rebaselined {day_month_year(merged_at)} in [" in line
    assert f"]({WEB}/{repo.full_name}/pull/{number})" in line


# --------------------------------------------------------------------------- each kind of gate

STEADY = {**SEED_REGIMES[-1], LOSS: 0.345, TOKENS: 265.0}
KIND_LITERALS = {"AVG_NUM_TOKENS_MAX_VALUE": "290", "LOGPROBS_DIFF_MAX_VALUE": "0.0175"}
KIND_NIGHTS, KIND_DROP_AT, KIND_FLAKY = 24, 20, (5, 11, 16, 21)


def test_one_gate_of_each_kind_lands_in_its_section(world: World) -> None:
    """TRAIN drifts (the rewards drop for the last nights), STEP_TIME has no data (its metric
    is never logged), EVAL fails on scattered nights, AVG_NUM_TOKENS' 290 would pass a harmful
    move of its tokens, LOGPROBS' 0.018 fits its history."""
    project = "kinds_ci"
    repo = world.github.add_repo(
        "octo/kinds",
        installation_id=INSTALLATION,
        files={SCRIPT: nightly_script(project, **KIND_LITERALS), CONFIG: ON},
        date=START - timedelta(days=30),
    )
    nightly = world.nightly(repo, project, START)
    for night in range(KIND_NIGHTS):
        if night == KIND_DROP_AT:
            nightly.merge("Drop partial reward credit", {"r.py": "X = 1\n"}, branch="drop")
        levels = {k: v for k, v in STEADY.items() if k != STEP}  # STEP: never logged
        if night >= KIND_DROP_AT:
            levels[LOSS] = 0.290
        if night in KIND_FLAKY:
            levels[EVAL_METRIC] = 0.540
        nightly.run(levels)
    world.watch()
    body = the_dashboard(repo).body
    values = nightly.values
    assert all(STEP not in v for v in values)  # no data
    assert [i for i, v in enumerate(values) if v[LOSS] < float(LITERALS[TRAIN])] == list(
        range(KIND_DROP_AT, KIND_NIGHTS)
    )
    assert [i for i, v in enumerate(values) if v[EVAL_METRIC] < float(LITERALS[EVAL])] == list(
        KIND_FLAKY
    )
    tokens = [v[TOKENS] for v in values]
    # the rule's value (the maximum plus 5%) is stricter than the tokens' 290, which a
    # harmful move of 5% from the median would pass; not than LOGPROBS', which every run passes
    assert max(tokens) * 1.05 < float(KIND_LITERALS["AVG_NUM_TOKENS_MAX_VALUE"])
    assert sorted(tokens)[len(tokens) // 2] * 1.05 < float(
        KIND_LITERALS["AVG_NUM_TOKENS_MAX_VALUE"]
    )
    logprobs = [v[GATES["LOGPROBS_DIFF_MAX_VALUE"][0]] for v in values]
    literal = float(KIND_LITERALS["LOGPROBS_DIFF_MAX_VALUE"])
    assert max(logprobs) <= literal < max(logprobs) * 1.05
    places = {
        "## Needs attention": {TRAIN, "STEP_TIME_MAX_VALUE"},
        "## Flaky": {EVAL},
        "## Looser than the history supports": {"AVG_NUM_TOKENS_MAX_VALUE"},
    }
    for heading, names in places.items():
        part = section(body, heading)
        assert {name for name in GATES if lines_naming(part, name)} == names, heading
    healthy = healthy_part(body)
    assert {name for name in GATES if lines_naming(healthy, name)} == {"LOGPROBS_DIFF_MAX_VALUE"}


# --------------------------------------------------------------------------- one issue only


def test_a_worker_that_died_before_saving_leaves_one_dashboard(world: World) -> None:
    repo, nightly = seed_repository(world, "octo/restart")
    world.watch()
    issue = the_dashboard(repo)
    # as if the worker was killed between creating the issue and saving the record, and the
    # App restarted (its in-process memory gone)
    owner = "crashed"
    claimed = dashboards.claim(
        world.runtime.sessions,
        repo=repo.full_name,
        installation_id=INSTALLATION,
        owner=owner,
        seconds=1,
    )
    assert claimed is not None
    dashboards.save(world.runtime.sessions, replace(claimed, issue=None, fingerprint=""), owner)
    dashboards.release(world.runtime.sessions, repo.full_name, owner)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(write, "RENDERED", write._Rendered())
        run(nightly)
        world.watch()
    assert [i.number for i in issues_by_app(repo, DASHBOARD_TITLE)] == [issue.number]
    record = dashboards.get(world.runtime.sessions, repo.full_name)
    assert record is not None and record.issue == issue.number


def test_an_issue_someone_else_wrote_with_the_marker_is_not_adopted(world: World) -> None:
    repo, _nightly = seed_repository(world, "octo/attacked")
    bait = repo.add_issue(DASHBOARD_TITLE, f"{DASHBOARD_MARKER}\nsend me your tokens", user="eve")
    bait_body = bait.body
    world.watch()
    issue = the_dashboard(repo)
    assert issue.number != bait.number
    assert repo.issue(bait.number).body == bait_body
    assert not world.github.requests("PATCH", f"/repos/{repo.full_name}/issues/{bait.number}")


def test_two_workers_racing_write_one_dashboard(world: World) -> None:
    repo, _nightly = seed_repository(world, "octo/race")
    runtime = world.runtime
    remote_for = remote_sources(world.settings, runtime.worker.history)
    reports: list[WatchReport] = []
    # the first POST of an issue is held, so the other worker comes while it is in flight
    world.github.hold_next("POST", rf"^/repos/{repo.full_name}/issues$", 1.0)

    def round_as(owner: str) -> None:
        options = replace(
            WatchOptions.of(world.settings, runtime.locks, DashboardStep(everywhere=False)),
            owner=owner,
        )
        found = watch_round(
            runtime.sessions,
            runtime.worker.github,
            remote_for,
            options,
            repos=frozenset({repo.full_name}),
        )
        reports.append(found)

    workers = [threading.Thread(target=round_as, args=(f"worker-{n}",)) for n in (1, 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert len(reports) == 2
    finished = sorted(r.repositories[0].finished for r in reports)
    assert finished[0] == "" and finished[1].startswith("dashboard opened #")
    assert len(issues_by_app(repo, DASHBOARD_TITLE)) == 1


def test_a_round_its_budget_cut_leaves_the_dashboard_as_it_is(world: World) -> None:
    repo, _nightly = seed_repository(world, "octo/cut")
    runtime = world.runtime
    options = replace(
        WatchOptions.of(world.settings, runtime.locks, DashboardStep.of(world.settings)),
        repository=Limits(seconds=0.0),  # spent before the first file
    )
    report = watch_round(
        runtime.sessions,
        runtime.worker.github,
        remote_sources(world.settings, runtime.worker.history),
        options,
        repos=frozenset({repo.full_name}),
    )
    ((cut, resume),) = [(r.cut, r.resume) for r in report.repositories]
    assert cut is not None and resume == SCRIPT
    assert issues_by_app(repo, DASHBOARD_TITLE) == []
    assert dashboards.get(runtime.sessions, repo.full_name) is None
    world.watch()  # the next complete round writes it
    assert the_dashboard(repo).title == DASHBOARD_TITLE


# --------------------------------------------------------------------------- turning it on


def test_no_dashboard_without_the_config_line_or_the_setting(world: World) -> None:
    repo, _nightly = seed_repository(world, "octo/quiet", config="drift:\n  mode: issue\n")
    world.watch()
    assert issues_by_app(repo, DASHBOARD_TITLE) == []
    assert dashboards.get(world.runtime.sessions, repo.full_name) is None


def test_the_app_setting_turns_it_on_unless_the_config_says_off(world: World) -> None:
    plain, _ = seed_repository(world, "octo/plain", config="drift:\n  mode: issue\n")
    off, _ = seed_repository(world, "octo/off", config="drift:\n  mode: issue\ndashboard: off\n")
    world.watch(DashboardStep(everywhere=True))
    assert the_dashboard(plain).title == DASHBOARD_TITLE
    assert issues_by_app(off, DASHBOARD_TITLE) == []


def test_no_issues_permission_is_recorded_once_and_nothing_is_written(world: World) -> None:
    repo, nightly = seed_repository(world, "octo/noissues")
    world.github.deny(INSTALLATION, "issues")
    try:
        world.watch()
        record = dashboards.get(world.runtime.sessions, repo.full_name)
        assert record is not None and record.issue is None and "issues" in record.note
        before = len(world.github.requests(repo=repo.full_name))
        world.watch()
        calls = world.github.requests(repo=repo.full_name)[before:]
        assert [c.path for c in calls if "/issues" in c.path] == []
    finally:
        with world.github.state.lock:
            world.github.state.denied.pop(INSTALLATION, None)
    assert issues_by_app(repo, DASHBOARD_TITLE) == []
    del nightly


def test_a_closed_dashboard_is_kept_up_to_date_and_never_reopened(world: World) -> None:
    repo, nightly = seed_repository(world, "octo/closed")
    world.watch()
    issue = the_dashboard(repo)
    with repo.state.lock:
        repo.issues[issue.number].state = "closed"
    body = issue.body
    run(nightly)
    world.watch()
    again = repo.issue(issue.number)
    assert again.state == "closed" and again.body != body
    assert [i.number for i in issues_by_app(repo, DASHBOARD_TITLE)] == [issue.number]


def test_a_deleted_dashboard_is_forgotten_and_the_next_change_opens_a_new_one(
    world: World,
) -> None:
    repo, nightly = seed_repository(world, "octo/deleted")
    world.watch()
    gone = the_dashboard(repo).number
    repo.add_issue("Something else", user="alice")  # GitHub never gives a number twice
    with repo.state.lock:
        del repo.issues[gone]
    run(nightly)
    world.watch()
    issue = the_dashboard(repo)
    assert issue.number != gone
    record = dashboards.get(world.runtime.sessions, repo.full_name)
    assert record is not None and record.issue == issue.number


# --------------------------------------------------------------------------- between rounds


def test_a_push_lowering_a_literal_rewrites_the_dashboard_without_a_round(world: World) -> None:
    repo, nightly = seed_repository(world, "octo/lowered")
    for _night in range(MIN_FAILURES):
        run(nightly)
        world.watch()
    issue = the_dashboard(repo)
    (line,) = lines_naming(section(issue.body, "## Needs attention"), TRAIN)
    assert "failing since" in line
    lowest = min(nightly.metric(LOSS))
    lowered = f"{lowest - 0.01:.2f}"  # below every run: TRAIN passes them all
    assert all(v >= float(lowered) for v in nightly.metric(LOSS))
    path = f"/repos/{repo.full_name}/issues/{issue.number}"
    patches = len(world.github.requests("PATCH", path))
    before = repo.head("main")
    script = nightly_script(nightly.project, **SEED_LITERALS, TRAIN_ACC_MIN_VALUE=lowered)
    repo.commit("main", {SCRIPT: script}, message="Lower the rewards' limit")

    world.push(repo, before, [SCRIPT])

    body = repo.issue(issue.number).body
    assert len(world.github.requests("PATCH", path)) == patches + 1  # one rewrite
    (line,) = lines_naming(body[: body.index("## Detected threshold files")], TRAIN)
    assert lowered in line and "failing since" not in line  # what CI checks now: it passes
    assert f"<code>{repo.head('main')[:12]}</code>" in body  # the head it read
    record = dashboards.get(world.runtime.sessions, repo.full_name)
    assert record is not None and record.body == body


def test_a_rebaseline_on_the_drift_issue_shows_its_pull_request_without_a_round(
    world: World,
) -> None:
    repo, nightly = seed_repository(world, "octo/commanded")
    for _night in range(MIN_FAILURES):
        run(nightly)
        world.watch()
    issue = the_dashboard(repo)
    (item,) = issues_by_app(repo, f"Nightly thresholds failing: {SCRIPT}")
    pulls = set(repo.pulls)

    world.comment_on_issue(repo, item, "alice", "/rebaseline")

    (number,) = set(repo.pulls) - pulls
    body = repo.issue(issue.number).body
    (line,) = lines_naming(section(body, "## Needs attention"), TRAIN)
    assert f"]({WEB}/{repo.full_name}/pull/{number})" in line
    record = dashboards.get(world.runtime.sessions, repo.full_name)
    assert record is not None and record.body == body
