"""End to end: the drift watch notices a nightly gate failing on the default branch, opens
its issue, turns it into a rebaseline PR on ``/rebaseline``, and closes it.

The real App (uvicorn + worker + SQLite) against the GitHub fake and fake W&B
(``tests/drift_world.py``).  The nightly is the seed's: five gates, ``TRAIN_ACC_MIN_VALUE``
(0.32) on ``loss/avg_final_rewards``, a history with five regimes (each started by a
merged PR) to which runs are added one night at a time; the watch round is the periodic
job, run by hand after each run.  Expected values are computed here from the runs.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from bot.adapters.store import drift as records
from bot.core.formatting import day_month_year
from bot.core.render.drift import DRIFT_MARKER_PREFIX, drift_marker
from bot.features.drift.watch import WatchReport
from tests.drift_world import (
    CONFIG,
    GATES,
    INSTALLATION,
    LITERALS,
    SCRIPT,
    Nightly,
    World,
    issues_by_app,
    lower_rule,
    nightly_script,
    open_world,
)
from tests.fakes.github_state import Issue, IssueComment, PullRequest, Repo

pytestmark = pytest.mark.servers

LOSS = "loss/avg_final_rewards"
VARIABLE = "TRAIN_ACC_MIN_VALUE"
LITERAL = LITERALS[VARIABLE]  # 0.32
DECIMALS = 2  # of the literal
TITLE = f"Nightly thresholds failing: {SCRIPT}"
BRANCH = f"threshold-bot/rebaseline/{SCRIPT}"
MIN_FAILURES = 3  # drift.min_failures' default
MIN_REGIME_RUNS = 5  # regimes.min_regime_runs' default: runs that confirm a regime
LOOKBACK = 30  # rule.failure_lookback's default
PER_REGIME = 6  # nights per regime
START = datetime(2026, 5, 31, 8, 0, tzinfo=UTC)  # five regimes: 31 May .. 29 Jun

METRICS = tuple(metric for metric, _op in GATES.values())
# each regime's level of the five gated metrics (in GATES' order); loss as in the seed
REGIMES = [
    dict(zip(METRICS, levels, strict=True))
    for levels in (
        (0.586, 0.238, 265.0, 0.0104, 121.0),
        (0.586, 0.240, 265.0, 0.0104, 97.0),
        (0.588, 0.236, 278.0, 0.0105, 98.0),
        (0.589, 0.345, 262.0, 0.0106, 97.0),
        (0.587, 0.342, 264.0, 0.0166, 88.0),
    )
]
DROP = {**REGIMES[-1], LOSS: 0.290}  # only the rewards move: below 0.32
DRIFT_CONFIG = "drift:\n  mode: issue\n"  # the defaults: min_failures 3, window regime


@dataclass
class Story:
    """A repository and its nightly, up to the night before the drop."""

    repo: Repo
    nightly: Nightly
    regime_pulls: list[int]  # the PR that started each regime after the first
    routine: int  # a PR merged the night before the last passing run
    drop: int  # the PR merged between the last passing run and the first failing one
    first_failing: int = 0  # index of the first failing run (set when the drop starts)

    def loss(self) -> list[float]:
        return self.nightly.metric(LOSS)


def arrange(world: World, name: str, regimes: list[dict[str, float]]) -> Story:
    """``name`` with the nightly script and drift config on main, and one run a night at
    each of ``regimes``; the drop PR is merged after the last run."""
    project = f"{name.split('/')[1]}_ci"
    repo = world.github.add_repo(
        name,
        installation_id=INSTALLATION,
        files={SCRIPT: nightly_script(project), CONFIG: DRIFT_CONFIG},
        date=START - timedelta(days=30),
    )
    repo.set_permission("alice", "write")
    repo.set_permission("bob", "read")
    nightly = world.nightly(repo, project, START)
    pulls: list[int] = []
    for i, levels in enumerate(regimes):
        if i:
            files: dict[str, str | None] = {f"trainer/stage{i}.py": f"STAGE = {i}\n"}
            pulls.append(nightly.merge(f"Trainer stage {i}", files, branch=f"stage{i}"))
        nightly.runs(levels, PER_REGIME - 1)
        if i == len(regimes) - 1:
            routine = nightly.merge("Docs: micro batch sizes", {"README.md": "..\n"}, branch="d")
        nightly.run(levels)
    rewards = {"trainer/rewards.py": "PARTIAL_CREDIT = False\n"}
    drop = nightly.merge("Drop partial reward credit", rewards, branch="rewards")
    return Story(repo, nightly, pulls, routine, drop)


def snapshot(repo: Repo) -> list[Issue]:
    """Copies of the plain issues of ``repo`` as they are now."""
    with repo.state.lock:
        return [copy.deepcopy(issue) for issue in repo.issues.values()]


@dataclass
class Drifted:
    """The main story after ``MIN_FAILURES + 2`` failing runs, each followed by a round."""

    story: Story
    before: WatchReport  # the round before the drop
    rounds: list[tuple[WatchReport, list[Issue]]] = field(default_factory=list)


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, module_backends: dict[str, str]
) -> Iterator[World]:
    """The App, on SQLite and on PostgreSQL + Redis."""
    with open_world(tmp_path_factory.mktemp("drift_e2e"), **module_backends) as running:
        yield running


@pytest.fixture(scope="module")
def drifted(world: World) -> Drifted:
    story = arrange(world, "octo/nightly", REGIMES)
    before = world.watch()
    story.first_failing = len(story.nightly.values)
    found = Drifted(story, before)
    for _night in range(MIN_FAILURES + 2):
        story.nightly.run(DROP)
        found.rounds.append((world.watch(), snapshot(story.repo)))
    return found


def actions(report: WatchReport, repo: Repo) -> list[tuple[str, int | None]]:
    """What a round did for the threshold script of ``repo``: (action, issue or PR)."""
    return [
        (a.action, a.number)
        for r in report.repositories
        if r.repo == repo.full_name
        for a in r.acted
        if a.file == SCRIPT
    ]


def gate_line(body: str, start: str) -> str:
    """The one line of the issue body starting with ``start``."""
    (line,) = [ln for ln in body.splitlines() if ln.startswith(start)]
    return line


def failures_phrase(loss: list[float], streak: int) -> str:
    """How the body counts the literal's failures: in the lookback, and in a row."""
    failed = sum(v < float(LITERAL) for v in loss[-LOOKBACK:])
    return f"Failed {failed} of the last {LOOKBACK} runs, the last {streak} in a row, since "


# --------------------------------------------------------------------------- tests


def test_the_data_drops_below_the_literal_and_nothing_else_fails(drifted: Drifted) -> None:
    values = drifted.story.nightly.values
    first = drifted.story.first_failing
    assert first == len(REGIMES) * PER_REGIME
    loss = drifted.story.loss()
    assert all(v >= float(LITERAL) for v in loss[first - 2 * PER_REGIME : first])
    assert all(v < float(LITERAL) for v in loss[first:])
    for variable, (metric, op) in GATES.items():
        if variable == VARIABLE:
            continue
        limit = float(LITERALS[variable])
        assert all((v[metric] >= limit) if op == ">=" else (v[metric] <= limit) for v in values)
    assert drifted.story.nightly.dates[first].date() == datetime(2026, 6, 30).date()


def test_no_issue_before_the_third_failing_run(drifted: Drifted) -> None:
    repo = drifted.story.repo
    assert actions(drifted.before, repo) == [("unchanged", None)]
    for report, issues in drifted.rounds[: MIN_FAILURES - 1]:
        assert issues == []
        assert actions(report, repo) == [("unchanged", None)]


def test_the_issue_opens_on_the_third_failing_run(drifted: Drifted, world: World) -> None:
    story = drifted.story
    report, issues = drifted.rounds[MIN_FAILURES - 1]
    (issue,) = issues
    assert actions(report, story.repo) == [("opened", issue.number)]
    assert (issue.title, issue.state) == (TITLE, "open")
    assert issue.app_id == world.github.app_id and issue.user == world.github.state.bot_login
    assert issue.body.startswith(drift_marker(SCRIPT)) and DRIFT_MARKER_PREFIX in issue.body
    first = story.first_failing
    since = day_month_year(story.nightly.dates[first])  # 30 Jun 2026
    loss = story.loss()[: first + MIN_FAILURES]
    assert f"{failures_phrase(loss, MIN_FAILURES)}{since}." in issue.body
    # the change: its date, and the PR merged between the last passing and the first failing run
    tied = gate_line(issue.body, "- Tied to")
    assert f"the regime change of {since}, started by [#{story.drop}]" in tied
    assert "Drop partial reward credit" in tied
    # the rule's value: the drop is not a confirmed regime yet (MIN_REGIME_RUNS), so the
    # window is the last confirmed regime plus the failing runs
    assert MIN_FAILURES < MIN_REGIME_RUNS
    window = loss[first - PER_REGIME :]
    value = lower_rule(window, DECIMALS)
    assert float(value) < min(window) < float(LITERAL)
    proposal = gate_line(issue.body, "- The rule's new value")
    assert f"**{value}**" in proposal
    dates = story.nightly.dates
    shown = f"{day_month_year(dates[first - PER_REGIME])} – {day_month_year(dates[first + 2])}"
    assert f"({len(window)} runs, {shown})" in proposal
    assert "Comment `/rebaseline` on this issue" in issue.body
    # the regime table: the five confirmed regimes, each after the first started by its PR
    table = issue.body.split("#### Regimes", 1)[1].split("####", 1)[0]
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and " Period " not in ln]
    assert len(rows) == len(REGIMES)
    for i, row in enumerate(rows):
        period, *_medians, started_by = (cell.strip() for cell in row.strip("| ").split(" | "))
        assert period.startswith(f"{day_month_year(dates[i * PER_REGIME])} – ")
        first_pull = f"[#{story.regime_pulls[i - 1]}](" if i else "—"
        assert started_by.startswith(first_pull)


def test_later_failing_runs_update_the_same_issue(drifted: Drifted) -> None:
    story = drifted.story
    _report, (opened,) = drifted.rounds[MIN_FAILURES - 1]
    bodies = [opened.body]
    for streak in (MIN_FAILURES + 1, MIN_FAILURES + 2):
        report, issues = drifted.rounds[streak - 1]
        (issue,) = issues
        assert actions(report, story.repo) == [("updated", opened.number)]
        assert (issue.number, issue.state) == (opened.number, "open")
        loss = story.loss()[: story.first_failing + streak]
        assert failures_phrase(loss, streak) in issue.body
        bodies.append(issue.body)
    assert len(set(bodies)) == len(bodies)
    assert len(issues_by_app(story.repo, TITLE)) == 1


def test_every_update_names_the_first_failing_run_and_the_pr_merged_before_it(
    drifted: Drifted,
) -> None:
    story = drifted.story
    since = day_month_year(story.nightly.dates[story.first_failing])
    named = []
    for _report, (issue,) in drifted.rounds[MIN_FAILURES - 1 :]:
        tied = gate_line(issue.body, "- Tied to")
        named.append(f"the regime change of {since}, started by [#{story.drop}]" in tied)
    assert named == [True] * len(named)


@dataclass
class Rebaselined:
    """The main story after a reader's and then a maintainer's ``/rebaseline`` on its issue."""

    story: Story
    issue: Issue
    pulls_before: set[int]  # the repository's PRs before the comments
    after_refusal: set[int]  # ... after the reader's
    refusal: IssueComment  # the App's answer to the reader
    main_text: str  # the script on main before the PR
    value: str  # the rule's value over the runs present at the maintainer's comment


@pytest.fixture(scope="module")
def rebaselined(drifted: Drifted, world: World) -> Rebaselined:
    story = drifted.story
    repo = story.repo
    (issue,) = issues_by_app(repo, TITLE)
    pulls = set(repo.pulls)
    main_text = repo.file_at("main", SCRIPT)
    assert main_text is not None
    world.comment_on_issue(repo, issue, "bob", "/rebaseline")
    refusal = the_apps(repo, issue.number)[-1]
    after_refusal = set(repo.pulls)
    window = story.loss()[story.first_failing :]  # the drop is a confirmed regime by now
    assert len(window) >= MIN_REGIME_RUNS
    world.comment_on_issue(repo, issue, "alice", "/rebaseline")
    value = lower_rule(window, DECIMALS)
    return Rebaselined(story, issue, pulls, after_refusal, refusal, main_text, value)


def the_apps(repo: Repo, number: int) -> list[IssueComment]:
    """The comments the App wrote on issue or PR ``number``, oldest first."""
    return [c for c in repo.comments(number) if c.app_id == repo.state.app_id]


def the_pull(done: Rebaselined) -> PullRequest:
    """The one PR the maintainer's ``/rebaseline`` opened."""
    (number,) = set(done.story.repo.pulls) - done.pulls_before
    return done.story.repo.pr(number)


def test_a_reader_asking_for_the_rebaseline_gets_a_refusal(rebaselined: Rebaselined) -> None:
    assert "@bob" in rebaselined.refusal.body and "**read**" in rebaselined.refusal.body
    assert rebaselined.after_refusal == rebaselined.pulls_before


def test_rebaseline_on_the_issue_opens_a_pull_request_changing_the_literal(
    rebaselined: Rebaselined, world: World
) -> None:
    repo, value = rebaselined.story.repo, rebaselined.value
    pr = the_pull(rebaselined)
    assert (pr.head_ref, pr.base_ref, pr.state) == (BRANCH, "main", "open")
    assert pr.app_id == world.github.app_id
    (commit,) = repo.pr_commits(pr)
    (changed,) = repo.pr_files(pr)
    assert changed.path == SCRIPT
    removed = [ln[1:] for ln in changed.patch.splitlines() if ln.startswith("-")]
    added = [ln[1:] for ln in changed.patch.splitlines() if ln.startswith("+")]
    assert removed == [f"{VARIABLE}={LITERAL}"]
    assert added[-1] == f"{VARIABLE}={value}"
    assert added[0].startswith("# threshold-bot: rebaselined")
    assert all(ln.startswith("#") for ln in added[:-1])  # the provenance comment
    assert commit.files[SCRIPT] == rebaselined.main_text.replace(
        f"{VARIABLE}={LITERAL}\n", "".join(f"{ln}\n" for ln in added)
    )
    # the issue answers with the PR, and its body names it instead of /rebaseline
    reply = the_apps(repo, rebaselined.issue.number)[-1]
    assert f"#{pr.number}" in reply.body and reply.id != rebaselined.refusal.id
    assert f"#{pr.number}" in repo.issue(rebaselined.issue.number).body


def test_the_rebaseline_pull_requests_own_review_is_green(rebaselined: Rebaselined) -> None:
    pr = the_pull(rebaselined)
    runs = rebaselined.story.repo.check_runs(pr.head_sha)
    (check,) = [r for r in runs if r.name == "threshold-bot"]
    assert (check.status, check.conclusion) == ("completed", "success")


def test_merging_the_pull_request_closes_the_issue(rebaselined: Rebaselined, world: World) -> None:
    story = rebaselined.story
    repo, issue = story.repo, rebaselined.issue
    number = the_pull(rebaselined).number
    main_head = repo.head("main")
    repo.merge_pr(number)

    world.pull_closed(repo, number)  # GitHub sends both, in either order
    world.push(repo, main_head, [SCRIPT])

    assert repo.issue(issue.number).state == "closed"
    closing = the_apps(repo, issue.number)[-1]
    assert f"#{number}" in closing.body and "closing" in closing.body
    item = records.get(world.runtime.sessions, repo.full_name, SCRIPT)
    assert item is not None and item.state == "idle"
    merged_at = repo.pr(number).merged_at  # kept as the file's last rebaseline
    assert merged_at is not None
    assert (item.rebaselined, item.rebaselined_at) == (number, merged_at.replace(tzinfo=None))
    # the next night passes the new value: a round opens nothing
    tonight = story.nightly.run(DROP)
    assert tonight[LOSS] >= float(rebaselined.value)
    report = world.watch()
    assert actions(report, repo) == [("unchanged", None)]
    assert [i.number for i in issues_by_app(repo, TITLE)] == [issue.number]
    assert repo.issue(issue.number).state == "closed"
    assert set(repo.pulls) == rebaselined.pulls_before | {number}


def drifting_story(world: World, name: str) -> tuple[Story, Issue]:
    """``name`` with two passing regimes, then ``MIN_FAILURES`` failing runs: its issue."""
    story = arrange(world, name, REGIMES[-2:])
    story.first_failing = len(story.nightly.values)
    for _night in range(MIN_FAILURES):
        story.nightly.run(DROP)
        world.watch()
    (issue,) = issues_by_app(story.repo, TITLE)
    assert issue.state == "open"
    return story, issue


def test_the_issue_closes_when_the_metric_recovers(world: World) -> None:
    story, issue = drifting_story(world, "octo/recovers")
    pulls = set(story.repo.pulls)

    tonight = story.nightly.run(REGIMES[-1])  # back above the literal: the streak is over,
    assert tonight[LOSS] >= float(LITERAL)  # and a dip of MIN_FAILURES runs is no regime

    report = world.watch()

    assert actions(report, story.repo) == [("closed", issue.number)]
    assert story.repo.issue(issue.number).state == "closed"
    (closing,) = story.repo.comments(issue.number)
    assert closing.app_id == world.github.app_id and "passes its newest runs again" in closing.body
    assert set(story.repo.pulls) == pulls  # no PR
    item = records.get(world.runtime.sessions, story.repo.full_name, SCRIPT)
    assert item is not None and item.state == "idle"


def test_a_push_lowering_the_literal_by_hand_closes_the_issue(world: World) -> None:
    story, issue = drifting_story(world, "octo/byhand")
    repo = story.repo
    lowered = lower_rule(story.loss()[story.first_failing :], DECIMALS)
    assert all(v >= float(lowered) for v in story.loss()[story.first_failing :])
    before = repo.head("main")
    repo.commit(
        "main",
        {SCRIPT: nightly_script(story.nightly.project, **{VARIABLE: lowered})},
        message="Lower the rewards threshold",
        author="alice",
    )

    world.push(repo, before, [SCRIPT])  # no round: the push alone

    assert repo.issue(issue.number).state == "closed"
    (closing,) = repo.comments(issue.number)
    assert closing.app_id == world.github.app_id and "passes its newest runs again" in closing.body
    item = records.get(world.runtime.sessions, repo.full_name, SCRIPT)
    assert item is not None and item.state == "idle"


def test_a_dry_run_on_the_issue_says_what_would_change_and_opens_nothing(world: World) -> None:
    story, issue = drifting_story(world, "octo/dryrun")
    repo = story.repo
    pulls, branches = set(repo.pulls), set(repo.branches)
    value = lower_rule(story.loss()[story.first_failing - PER_REGIME :], DECIMALS)

    world.comment_on_issue(repo, issue, "alice", "/rebaseline --dry-run")

    reply = the_apps(repo, issue.number)[-1]
    assert "--dry-run" in reply.body
    assert f"{VARIABLE}: {LITERAL} → {value}" in reply.body.replace("\\_", "_")
    assert (set(repo.pulls), set(repo.branches)) == (pulls, branches)
    assert repo.issue(issue.number).state == "open"


def test_closing_the_pull_request_unmerged_keeps_the_issue_for_another_try(world: World) -> None:
    story, issue = drifting_story(world, "octo/unmerged")
    repo = story.repo
    world.comment_on_issue(repo, issue, "alice", "/rebaseline")
    (first,) = [p for p in repo.pulls.values() if p.head_ref == BRANCH]
    repo.close_pr(first.number)

    world.pull_closed(repo, first.number)

    assert repo.issue(issue.number).state == "open"
    item = records.get(world.runtime.sessions, repo.full_name, SCRIPT)
    assert item is not None and (item.state, item.issue, item.pull) == ("open", issue.number, None)
    world.comment_on_issue(repo, issue, "alice", "/rebaseline")  # a second try: a new PR
    opened = [p for p in repo.pulls.values() if p.head_ref == BRANCH and p.state == "open"]
    assert [p.number for p in opened] != [first.number] and len(opened) == 1


def test_a_pull_request_closed_between_two_quiet_rounds_is_acted_on_at_the_next(
    world: World,
) -> None:
    story, issue = drifting_story(world, "octo/quiet")
    repo = story.repo
    world.comment_on_issue(repo, issue, "alice", "/rebaseline")
    (pr,) = [p for p in repo.pulls.values() if p.head_ref == BRANCH]
    quiet = world.watch()  # nothing new: the kept evaluation, no act
    assert actions(quiet, repo) == [("unchanged", pr.number)]
    assert not next(r for r in quiet.repositories if r.repo == repo.full_name).fresh

    repo.close_pr(pr.number)  # by a maintainer; the App hears of it
    world.pull_closed(repo, pr.number)
    before = len(world.github.calls)
    report = world.watch()

    assert actions(report, repo) == [("updated", issue.number)]  # the issue offers it again
    patched = world.github.calls[before:]
    assert any(
        c.method == "PATCH" and c.path == f"/repos/{repo.full_name}/issues/{issue.number}"
        for c in patched
    )
    assert repo.issue(issue.number).state == "open"


def test_a_push_of_the_merge_before_its_closed_event_still_says_merged(world: World) -> None:
    story, issue = drifting_story(world, "octo/pushfirst")
    repo = story.repo
    world.comment_on_issue(repo, issue, "alice", "/rebaseline")
    (pr,) = [p for p in repo.pulls.values() if p.head_ref == BRANCH]
    before = repo.head("main")
    repo.merge_pr(pr.number)

    world.push(repo, before, [SCRIPT])  # the push first: the gate passes the merged value
    world.pull_closed(repo, pr.number)

    assert repo.issue(issue.number).state == "closed"
    closing = the_apps(repo, issue.number)[-1]
    assert f"#{pr.number} merged" in closing.body
    assert not [c for c in the_apps(repo, pr.number) if "closing" in c.body]  # PR left alone
    item = records.get(world.runtime.sessions, repo.full_name, SCRIPT)
    assert item is not None and item.state == "idle"


# ----- an actions source: the nightly's own artifacts ---------------------------------------


def results_zip(value: float) -> bytes:
    """A nightly's artifact: a zip holding its results JSON."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("results.json", json.dumps({"accuracy": value}))
    return out.getvalue()


def test_a_gate_reading_the_nightly_artifacts_drifts_and_its_rebaseline_pr_opens(
    world: World,
) -> None:
    path = "ci/eval.sh"
    config = (
        "sources:\n  nightly:\n    kind: actions\n    workflow: nightly.yml\n"
        "    artifact: results\n    file: results.json\ndefault_source: nightly\n"
    )
    main_text = 'ACC_MIN=0.75\npython -m evals --asserts "accuracy >= $ACC_MIN"\n'
    repo = world.github.add_repo(
        "octo/artifacts", installation_id=INSTALLATION, files={path: main_text, CONFIG: config}
    )
    repo.set_permission("alice", "maintain")
    nightly = repo.add_workflow("nightly.yml")
    values = [round(0.80 + 0.002 * (i % 3), 4) for i in range(30)]
    values += [round(0.71 - 0.003 * (i % 4), 4) for i in range(MIN_REGIME_RUNS + 1)]
    for i, value in enumerate(values):
        run = repo.add_workflow_run(nightly, created_at=START + timedelta(days=i))
        repo.add_artifact(run, "results", results_zip(value))
    repo.branches["poison"] = repo.head("main")  # a PR's run, newest of all, looking healthy
    poisoned = repo.add_workflow_run(
        nightly, event="pull_request", branch="poison", created_at=START + timedelta(days=60)
    )
    repo.add_artifact(poisoned, "results", results_zip(0.99))
    title = f"Nightly thresholds failing: {path}"

    world.watch()

    (issue,) = issues_by_app(repo, title)
    failing = len(values) - 30
    since = day_month_year(START + timedelta(days=30))
    assert f"Failed its last {failing} runs in a row, since {since}." in issue.body
    value = lower_rule(values[30:], DECIMALS)  # the drop is a confirmed regime
    assert f"**{value}**" in issue.body

    world.comment_on_issue(repo, issue, "alice", "/rebaseline")

    (pr,) = repo.pulls.values()
    (changed,) = repo.pr_files(pr)
    added = [ln[1:] for ln in changed.patch.splitlines() if ln.startswith("+")]
    assert changed.path == path and added[-1] == f"ACC_MIN={value}"
    (check,) = [r for r in repo.check_runs(pr.head_sha) if r.name == "threshold-bot"]
    assert (check.status, check.conclusion) == ("completed", "success")
