"""End to end over W&B: real uvicorn + worker + SQLite, PyGithub against FakeGitHub, and the
real wandb client against the fake W&B GraphQL server.

The App is built exactly as ``serve`` builds it, except for the GitHub client's base URL:
history comes from ``bot.adapters.history.factory.source_factory`` (the run cache in the
App's store, synced from W&B), and the W&B settings come from the ``WANDB_*`` environment variables.
One App, one FakeGitHub and one fake W&B serve the whole module (the wandb client starts a
sidecar process); every test uses its own pull request, and the repository or W&B project
it changes is its own.  Expected numbers are computed here from the runs loaded into W&B.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.adapters.github.app import client_factory
from bot.adapters.history.cache import CachedSource
from bot.adapters.settings import Settings
from bot.adapters.store import deliveries, runs, tracked
from bot.app.runtime import Runtime, build
from bot.app.web import create_app
from bot.core.models import SourceSpec
from bot.core.render.review import MARKER
from bot.features.review.recheck import RecheckReport, recheck_job
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import CheckRun, IssueComment, Repo
from tests.fakes.wandb_server import API_KEY, FakeRun, FakeWandb, serve
from tests.live import deliver_and_wait, live_server, make_settings

pytestmark = pytest.mark.servers

INSTALLATION = 11
ENTITY = "acme"  # WANDB_ENTITY: the script names only the project
PROJECT = "gsm8k_ci"
METRIC = "eval/all/avg_score"
SCRIPT = "tests/ci/gsm8k_nightly.sh"
CONFIG = ".github/threshold-bot.yml"
RUNS, SHIFT_AT, WINDOW = 60, 30, 20
BASE_VALUE = "0.45"  # the literal on main
START = datetime(2026, 7, 1, 8, 0, tzinfo=UTC)

# the repository whose config names the source: another entity, another project
CONFIGURED = "octo/rl"
RL_ENTITY, RL_PROJECT = "lab", "rl_ci"
RL_CONFIG = (
    f"sources:\n  wb:\n    kind: wandb\n    entity: {RL_ENTITY}\n    project: {RL_PROJECT}\n"
    "default_source: wb\n"
)


def script(value: str, project: str | None = PROJECT) -> str:
    """A nightly CI script with one gate; it names its W&B project like a real one does."""
    named = f' --project_name "{project}"' if project else ""
    return (
        "#!/usr/bin/env bash\n"
        "set -euo pipefail\n"
        f"EVAL_ACC_MIN_VALUE={value}\n"
        f'python -m trainer{named} --asserts "{METRIC} >= $EVAL_ACC_MIN_VALUE"\n'
    )


def scores(count: int = RUNS, seed: int = 11) -> list[float]:
    """A step from ~0.40 to ~0.56 at run ``SHIFT_AT``."""
    rng = random.Random(seed)
    return [
        round((0.40 if i < SHIFT_AT else 0.56) + rng.uniform(-0.03, 0.03), 4) for i in range(count)
    ]


def wandb_run(i: int, value: float, commit: str, state: str = "finished") -> FakeRun:
    """Run ``i`` of the nightly series, as W&B stores it (flat summary keys, W&B internals)."""
    summary: dict[str, Any] = {"_step": 100, "_runtime": 3600.5}
    if state == "finished":
        summary[METRIC] = value
    return FakeRun(
        name=f"r{i:04d}",
        created_at=START + timedelta(hours=i),
        state=state,
        display_name=f"run_{i}",
        tags=["nightly"],
        commit=commit,
        summary=summary,
    )


def rule_limit(window: list[float], decimals: int = 2, allowance: float = 0.05) -> float:
    """The documented lower-bound rule rounded down at ``decimals`` (enough for 2 sig. digits)."""
    low = min(window)
    unrounded = low - allowance * abs(low)
    assert unrounded >= 0.1
    scale = 10.0**decimals
    return math.floor(unrounded * scale) / scale


@dataclass
class World:
    """The running App and the fakes it talks to."""

    url: str
    github: FakeGitHub
    wandb: FakeWandb
    runtime: Runtime
    settings: Settings
    repo: Repo  # octo/ml: the script names the project, WANDB_ENTITY the entity
    values: list[float]  # eval/all/avg_score of the finished runs in W&B, oldest first
    merged: int  # the PR whose merge made the step

    def deliver(self, name: str, changes: dict[str, Any]) -> deliveries.Delivery:
        """POST a signed fixture delivery; wait until the worker has finished it."""
        return deliver_and_wait(self.url, self.runtime.sessions, name, changes, timeout=90)

    def pull_event(self, action: str, repo: Repo, number: int) -> deliveries.Delivery:
        pr = repo.pr(number)
        owner, name = repo.full_name.split("/")
        return self.deliver(
            f"pull_request.{action}",
            {
                "number": number,
                "pull_request.number": number,
                "pull_request.head.sha": pr.head_sha,
                "pull_request.head.ref": pr.head_ref,
                "pull_request.base.ref": pr.base_ref,
                "repository.full_name": repo.full_name,
                "repository.name": name,
                "repository.owner.login": owner,
                "installation.id": INSTALLATION,
                "sender.login": "alice",
            },
        )

    def comment(self, repo: Repo, number: int, user: str, body: str) -> deliveries.Delivery:
        """``user`` comments ``body`` on PR ``number``; GitHub's delivery of it is processed."""
        state = self.github.state
        now = datetime.now(UTC).replace(microsecond=0)
        posted = IssueComment(state.next_id(), number, user, body, now, now)
        with state.lock:
            repo.issue_comments[posted.id] = posted
        owner, name = repo.full_name.split("/")
        return self.deliver(
            "issue_comment.created",
            {
                "issue.number": number,
                "comment.id": posted.id,
                "comment.body": body,
                "comment.user.login": user,
                "comment.user.type": "User",
                "repository.full_name": repo.full_name,
                "repository.name": name,
                "repository.owner.login": owner,
                "installation.id": INSTALLATION,
                "sender.login": user,
                "sender.type": "User",
            },
        )

    def recheck(self) -> RecheckReport:
        """One run of the periodic re-check, as the scheduler runs it every RECHECK_SECONDS."""
        job = recheck_job(
            self.settings,
            self.runtime.sessions,
            self.runtime.worker.github,
            self.runtime.worker.history,
            self.runtime.locks,
        )
        return job()


def arrange_github(fake: FakeGitHub) -> tuple[Repo, list[str], int]:
    """``octo/ml`` (script at ``BASE_VALUE``; merged PR #3 made the step) and ``octo/rl``;
    returns ``octo/ml``, the commits of the 60 runs and the merged PR."""
    repo = fake.add_repo(
        "octo/ml", installation_id=INSTALLATION, files={SCRIPT: script(BASE_VALUE)}
    )
    before = repo.head("main")
    repo.open_pr(3, head="async", head_files={"trainer.py": "mode = 'async'\n"}, title="Async RL")
    after = repo.merge_pr(3)
    commits = [before] * SHIFT_AT + [after] * (RUNS - SHIFT_AT)
    fake.add_repo(
        CONFIGURED,
        installation_id=INSTALLATION,
        files={SCRIPT: script(BASE_VALUE, project=None), CONFIG: RL_CONFIG},
    )
    return repo, commits, 3


def arrange_wandb(fake: FakeWandb, commits: list[str]) -> list[float]:
    """The 60 nightly runs of ``acme/gsm8k_ci`` plus two crashed ones; the finished values."""
    values = scores()
    for i, value in enumerate(values):
        fake.add_run(ENTITY, PROJECT, wandb_run(i, value, commits[i]))
    for i in (RUNS + 100, RUNS + 101):  # crashed runs carry no metric and are only counted
        crashed = wandb_run(i, 0.0, commits[-1], state="crashed")
        crashed.created_at = START + timedelta(hours=10, minutes=i)
        fake.add_run(ENTITY, PROJECT, crashed)
    for i, value in enumerate(scores(seed=5)):
        fake.add_run(RL_ENTITY, RL_PROJECT, wandb_run(i, value, commits[i]))
    return values


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("e2e_wandb")
    w_and_b = FakeWandb()
    with FakeGitHub() as github, serve(w_and_b) as wandb_url, pytest.MonkeyPatch.context() as mp:
        repo, commits, merged = arrange_github(github)
        values = arrange_wandb(w_and_b, commits)
        # the operator's environment (docs/app-settings.md): names shared with the W&B client
        mp.setenv("WANDB_API_KEY", API_KEY)
        mp.setenv("WANDB_BASE_URL", wandb_url)
        mp.setenv("WANDB_ENTITY", ENTITY)
        # the operator lets this installation read its two entities (default: WANDB_ENTITY only)
        grants = {f"installation:{INSTALLATION}": [ENTITY, RL_ENTITY]}
        mp.setenv("WANDB_ENTITIES", json.dumps(grants))
        settings = make_settings(
            tmp,
            app_id=github.app_id,
            private_key=github.private_key,
            github_api_url=github.base_url,
            # the drift watch's first round reads W&B too: off, so each test counts the
            # requests of its own review (tests/test_drift_*.py test the watch)
            drift_watch=False,
        )
        assert settings.wandb_base_url == wandb_url and settings.wandb_entity == ENTITY
        runtime = build(settings, github=client_factory(settings))  # history: production path
        with live_server(create_app(settings, runtime)) as url:
            yield World(url, github, w_and_b, runtime, settings, repo, values, merged)
        github.check()


def md(text: str) -> str:
    """``text`` as the comment shows it (Markdown-escaped underscores)."""
    return text.replace("_", "\\_")


def check_runs(repo: Repo, sha: str) -> list[CheckRun]:
    return [r for r in repo.check_runs(sha) if r.name == "threshold-bot"]


def the_comment(repo: Repo, number: int) -> IssueComment:
    """The App's one review comment on PR ``number``."""
    (comment,) = [c for c in repo.comments(number) if c.body.startswith(MARKER)]
    return comment


def gate_row(body: str) -> list[str]:
    """The cells of the gates table's one row."""
    (line,) = [ln for ln in body.splitlines() if ln.startswith("| <code>EVAL")]
    return [cell.strip() for cell in line.strip("|").split("|")]


# --------------------------------------------------------------------------- tests


def test_review_reads_the_wandb_project_named_in_the_script(world: World) -> None:
    window = world.values[-WINDOW:]
    failing = sum(v < 0.55 for v in window)
    assert 0 < failing < WINDOW  # 0.55 is too tight for these runs
    old_fails = sum(v < float(BASE_VALUE) for v in world.values[-30:])
    pr = world.repo.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})
    world.wandb.requests.clear()

    delivery = world.pull_event("opened", world.repo, 7)

    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    body = the_comment(world.repo, 7).body
    row = gate_row(body)
    assert row[4] == f"{min(window):.4f} – {max(window):.4f}"
    assert row[6] == f"**{failing}**/{WINDOW}"  # failures of the proposed value, in bold
    assert row[5].replace("*", "") == f"{old_fails}/30"  # the old value vs. the last 30 runs
    assert row[3] == f"{rule_limit(window):.2f}"
    history = f"wandb:{ENTITY}/{md(PROJECT)}</code>, {RUNS + 2} runs: {RUNS} finished, 2 crashed"
    assert history in body
    (run,) = check_runs(world.repo, pr.head_sha)
    assert (run.status, run.conclusion) == ("completed", "action_required")
    assert f"/octo/ml/pull/{world.merged}" in body  # the step is attributed to the merged PR
    # one page brought every run with its summary: no per-run queries, no entity lookup
    assert world.wandb.requests["Runs"] == 1 and set(world.wandb.requests) <= {"Viewer", "Runs"}


def test_synchronize_reuses_the_run_cache(world: World) -> None:
    window = world.values[-WINDOW:]
    assert min(window) >= 0.52 > rule_limit(window)  # 0.52 passes; not looser than the rule
    world.repo.open_pr(8, head="tune8", head_files={SCRIPT: script("0.52")})
    opened = world.pull_event("opened", world.repo, 8)
    assert opened.status == "done", opened.last_error
    first = the_comment(world.repo, 8)
    first_id, first_body = first.id, first.body  # the fake edits the comment in place
    (first_run,) = check_runs(world.repo, world.repo.pr(8).head_sha)
    assert first_run.conclusion == "success"
    before = world.wandb.total_requests
    runs_before = world.wandb.requests["Runs"]
    world.repo.commit("tune8", {SCRIPT: script("0.55")}, message="Tighten")

    delivery = world.pull_event("synchronize", world.repo, 8)

    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    assert world.wandb.total_requests - before <= 3  # the warm-sync budget
    assert world.wandb.requests["Runs"] - runs_before == 1  # one page: nothing new since
    after = the_comment(world.repo, 8)
    assert after.id == first_id and after.body != first_body
    failing = sum(v < 0.55 for v in window)
    assert f"**{failing}**/{WINDOW}" in gate_row(after.body)[6]
    (run,) = check_runs(world.repo, world.repo.pr(8).head_sha)
    assert run.conclusion == "action_required"
    # the run cache shares the App's store, keyed with the entity WANDB_ENTITY supplied
    spec = SourceSpec(kind="wandb", entity=ENTITY, project=PROJECT)
    source = world.runtime.worker.history(spec)
    assert isinstance(source, CachedSource) and source.sessions is world.runtime.sessions
    with world.runtime.sessions() as session:
        assert runs.count_runs(session, runs.source_key(spec)) == RUNS + 2


def test_wandb_outage_gives_a_neutral_check_then_the_recheck_recovers(world: World) -> None:
    rl = world.github.repo(CONFIGURED)  # its config names the source: lab/rl_ci
    pr = rl.open_pr(4, head="tune", head_files={SCRIPT: script("0.52", project=None)})
    # W&B is down for good (its Retry-After keeps the test short: wandb-core honours it)
    world.wandb.fail(503, count=1000, retry_after=1, operation="Runs")
    runs_before = world.wandb.requests["Runs"]
    try:
        delivery = world.pull_event("opened", rl, 4)
    finally:
        world.wandb.faults.clear()

    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    assert 2 <= world.wandb.requests["Runs"] - runs_before <= 5  # retried, a bounded few times
    comment = the_comment(rl, 4)
    comment_id = comment.id
    assert f"wandb:{md(RL_ENTITY)}/{md(RL_PROJECT)}" in comment.body
    assert "503" in comment.body and "/threshold-bot retry" in comment.body
    (run,) = check_runs(rl, pr.head_sha)
    # the PR changes a gate the unread history cannot verify: action; a maintainer may vouch
    assert run.conclusion == "action_required"
    assert [a["identifier"] for a in run.actions] == ["approve"]
    assert run.output["title"] == "Run history unavailable" and "503" in run.output["summary"]
    check_id = run.id

    values = scores(seed=5)[-WINDOW:]
    assert min(values) >= 0.52  # once readable, the history passes 0.52

    report = world.recheck()  # W&B is back: the neutral review is redone

    assert f"{CONFIGURED}#4" in report.reviewed
    after = the_comment(rl, 4)
    assert after.id == comment_id and len(rl.comments(4)) == 1
    assert f"{min(values):.4f} – {max(values):.4f}" in gate_row(after.body)[4]
    (run,) = check_runs(rl, pr.head_sha)
    assert (run.id, run.conclusion) == (check_id, "success")


def test_rejected_api_key_gives_a_neutral_check_and_retry_recovers(world: World) -> None:
    rl = world.github.repo(CONFIGURED)
    values = scores(seed=5)[-WINDOW:]
    proposed = f"{rule_limit(values):.2f}"  # what the rule says: an ok verdict once readable
    pr = rl.open_pr(5, head="tune5", head_files={SCRIPT: script(proposed, project=None)})
    world.wandb.fail(401, count=1000, operation="Runs")  # e.g. the key was revoked
    try:
        delivery = world.pull_event("opened", rl, 5)
    finally:
        world.wandb.faults.clear()

    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    comment = the_comment(rl, 5)
    comment_id, body = comment.id, comment.body
    assert "W\\&B rejected the API key; check WANDB\\_API\\_KEY on the server" in body
    assert "/threshold-bot retry" in body
    (run,) = check_runs(rl, pr.head_sha)
    assert run.conclusion == "action_required"  # a changed gate, unverified
    assert API_KEY not in body and API_KEY not in str(run.output)
    check_id = run.id

    retry = world.comment(rl, 5, "alice", "/threshold-bot retry")  # as the comment says

    assert (retry.status, retry.attempts) == ("done", 1), retry.last_error
    after = the_comment(rl, 5)
    assert after.id == comment_id
    assert f"{min(values):.4f} – {max(values):.4f}" in gate_row(after.body)[4]
    (run,) = check_runs(rl, pr.head_sha)
    assert (run.id, run.conclusion) == (check_id, "success")


def test_recheck_edits_the_comment_when_new_runs_fail_the_proposed_value(world: World) -> None:
    window = world.values[-WINDOW:]
    assert min(window) >= 0.52  # 0.52 passes every run in the window today
    pr = world.repo.open_pr(9, head="tune9", head_files={SCRIPT: script("0.52")})
    opened = world.pull_event("opened", world.repo, 9)
    assert opened.status == "done", opened.last_error
    comment_id = the_comment(world.repo, 9).id
    (run,) = check_runs(world.repo, pr.head_sha)
    assert run.conclusion == "success"
    check_id = run.id
    # three new nightly runs regress below 0.52
    newest = max(r.created_at for r in world.wandb.projects[(ENTITY, PROJECT)].values())
    regressed = [0.515, 0.5, 0.51]
    for i, value in enumerate(regressed):
        new = wandb_run(RUNS + i, value, world.repo.head("main"))
        new.created_at = newest + timedelta(hours=i + 1)
        world.wandb.add_run(ENTITY, PROJECT, new)
    world.values.extend(regressed)
    window = world.values[-WINDOW:]
    failing = sum(v < 0.52 for v in window)

    report = world.recheck()

    assert report.changed == (f"wandb:{ENTITY}/{PROJECT}",)
    assert "octo/ml#9" in report.reviewed and not report.failed
    assert len(world.repo.comments(9)) == 1
    after = the_comment(world.repo, 9)
    assert after.id == comment_id
    row = gate_row(after.body)
    assert f"**{failing}**/{WINDOW}" in row[6]
    assert f"{min(window):.4f} – {max(window):.4f}" in row[4]
    (run,) = check_runs(world.repo, pr.head_sha)
    assert (run.id, run.conclusion) == (check_id, "action_required")
    with world.runtime.sessions() as session:
        (mine,) = [t for t in tracked.tracked(session) if t.number == 9]
    assert mine.conclusion == "action_required"


def test_a_project_the_pr_renames_is_not_read_and_the_review_says_so(world: World) -> None:
    pr = world.repo.open_pr(
        10, head="typo", head_files={SCRIPT: script("0.52", project="gsm8k_cj")}
    )
    asked = world.wandb.projects_asked[(ENTITY, "gsm8k_cj")]

    delivery = world.pull_event("opened", world.repo, 10)

    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    assert world.wandb.projects_asked[(ENTITY, "gsm8k_cj")] == asked  # the base decides
    body = the_comment(world.repo, 10).body
    assert "wandb:gsm8k\\_cj" in body and "until a maintainer approves" in body
    (run,) = check_runs(world.repo, pr.head_sha)
    assert run.conclusion == "action_required"  # the PR changes what the gate reads
