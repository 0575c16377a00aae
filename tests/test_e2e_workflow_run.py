"""End to end: a ``workflow_run`` ``completed`` delivery re-reviews the open PRs whose gates
read that workflow's artifacts (real uvicorn + worker threads + SQLite, PyGithub, FakeGitHub).

The PR's gate reads an ``actions`` source (the nightly ``nightly.yml``, artifact ``results``).
The history factory of these tests stands in for the artifact reader: a list of runs the test
extends as if the nightly had uploaded a new result, and counts its reads. A completed run of
the nightly on the default branch re-reviews the PR at once (its check run turns from
``success`` to ``action_required`` when the new run fails the proposed threshold); a run of a
PR branch, of a fork, or of another workflow, changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.github.app import client_factory
from bot.adapters.store import deliveries, tracked
from bot.app.runtime import Runtime, build
from bot.app.web import create_app
from bot.core.models import History, Run, SourceSpec
from bot.features.review import workflow_run
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo, WorkflowRun
from tests.live import deliver_and_wait, live_server, make_settings
from tests.test_review_pr import CONFIG, METRIC, SCRIPT, script

pytestmark = pytest.mark.servers

INSTALLATION = 7
REPO = "octo/ml"
NIGHTLY_ID = 5150
ACTIONS_SOURCE = (
    "sources:\n"
    "  nightly:\n"
    "    kind: actions\n"
    "    workflow: nightly.yml\n"
    "    artifact: results\n"
    "    file: results.json\n"
    "default_source: nightly\n"
)


@dataclass
class NightlyHistory:
    """The runs the nightly's artifacts hold, as the reader would serve them; ``reads``
    counts the reviews' reads of the actions source."""

    values: list[float]
    reads: list[SourceSpec] = field(default_factory=list)

    def fetch(self, spec: SourceSpec) -> History:
        self.reads.append(spec)
        start = datetime(2026, 8, 1, tzinfo=UTC)
        runs = tuple(
            Run(id=f"n{i}", created_at=start + timedelta(days=i), summary={METRIC: value})
            for i, value in enumerate(self.values)
        )
        return History(runs=runs, source=spec.describe())


@dataclass
class App:
    url: str
    fake: FakeGitHub
    runtime: Runtime
    repo: Repo
    history: NightlyHistory

    def deliver(self, name: str, changes: dict[str, Any]) -> deliveries.Delivery:
        return deliver_and_wait(self.url, self.runtime.sessions, name, changes, timeout=60)

    def opened(self, number: int) -> deliveries.Delivery:
        pr = self.repo.pr(number)
        return self.deliver(
            "pull_request.opened",
            {
                "number": number,
                "pull_request.number": number,
                "pull_request.head.sha": pr.head_sha,
                "pull_request.head.ref": pr.head_ref,
                "pull_request.base.ref": pr.base_ref,
                "repository.full_name": REPO,
                "repository.name": "ml",
                "repository.owner.login": "octo",
                "installation.id": INSTALLATION,
            },
        )

    def completed(self, run: WorkflowRun, **changes: Any) -> deliveries.Delivery:
        """The ``workflow_run`` ``completed`` delivery GitHub sends for ``run``."""
        head = run.head_repo
        return self.deliver(
            "workflow_run.completed",
            {
                "workflow_run.id": run.id,
                "workflow_run.event": run.event,
                "workflow_run.head_branch": run.head_branch,
                "workflow_run.head_sha": run.head_sha,
                "workflow_run.conclusion": run.conclusion,
                "workflow_run.workflow_id": run.workflow.id,
                "workflow_run.path": run.workflow.path,
                "workflow_run.head_repository.id": head.id,
                "workflow_run.head_repository.full_name": head.full_name,
                "workflow_run.repository.id": self.repo.id,
                "workflow_run.repository.full_name": REPO,
                "workflow.id": run.workflow.id,
                "workflow.path": run.workflow.path,
                "repository.id": self.repo.id,
                "repository.full_name": REPO,
                "repository.default_branch": self.repo.default_branch,
                "installation.id": INSTALLATION,
                **changes,
            },
        )

    def conclusion(self, number: int) -> str | None:
        pr = self.repo.pr(number)
        (run,) = [r for r in self.repo.check_runs(pr.head_sha) if r.name == "threshold-bot"]
        return run.conclusion


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    """octo/ml: the nightly's gate at 0.56 read from its artifacts; PR #2 lowers it to 0.53,
    which the 25 nightly runs so far (0.55 and up) all pass."""
    history = NightlyHistory([0.55 + 0.001 * (i % 5) for i in range(25)])
    with FakeGitHub() as fake:
        repo = fake.add_repo(
            REPO,
            installation_id=INSTALLATION,
            files={SCRIPT: script("0.56"), CONFIG: ACTIONS_SOURCE},
        )
        repo.add_workflow("nightly.yml", name="Nightly", workflow_id=NIGHTLY_ID)
        repo.add_workflow("lint.yml", name="Lint")
        repo.open_pr(2, head="lower", head_files={SCRIPT: script("0.53")})
        settings = make_settings(
            tmp_path,
            app_id=fake.app_id,
            private_key=fake.private_key,
            github_api_url=fake.base_url,
        )
        runtime = build(settings, github=client_factory(settings), history=lambda spec: history)
        with live_server(create_app(settings, runtime)) as url:
            yield App(url, fake, runtime, repo, history)
        fake.check()


def reviewed(app: App, number: int = 2) -> App:
    """PR ``number`` reviewed (and tracked) once: green."""
    assert app.opened(number).status == "done"
    assert app.conclusion(number) == "success"
    with app.runtime.sessions() as session:
        assert (REPO, number) in [(t.repo, t.number) for t in tracked.tracked(session)]
    return app


def test_a_completed_nightly_re_reviews_the_pr_whose_gate_reads_it(app: App) -> None:
    reviewed(app)
    reads = len(app.history.reads)
    nightly = app.repo.workflow("nightly.yml")
    assert nightly is not None
    app.history.values += [0.51, 0.50, 0.51]  # the new nightly fails 0.53
    run = app.repo.add_workflow_run(nightly, conclusion="failure")

    delivery = app.completed(run)

    assert delivery.status == "done"
    assert len(app.history.reads) > reads  # reviewed again, reading the source
    assert app.conclusion(2) == "action_required"


def test_the_workflow_named_by_id_is_matched_too(app: App) -> None:
    app.repo.commit("main", {CONFIG: ACTIONS_SOURCE.replace("nightly.yml", f'"{NIGHTLY_ID}"')})
    app.repo.open_pr(5, head="lower-again", head_files={SCRIPT: script("0.53")})
    reviewed(app, 5)
    app.history.values += [0.50] * 3
    nightly = app.repo.workflow(str(NIGHTLY_ID))
    assert nightly is not None
    assert app.completed(app.repo.add_workflow_run(nightly, event="workflow_dispatch")).status == (
        "done"
    )
    assert app.conclusion(5) == "action_required"


@pytest.mark.parametrize(
    "case", ["pr-branch", "fork", "fork-push", "other-workflow", "pull_request-on-main"]
)
def test_runs_that_are_not_the_nightly_of_the_default_branch_change_nothing(
    app: App, case: str
) -> None:
    reviewed(app)
    nightly = app.repo.workflow("nightly.yml")
    lint = app.repo.workflow("lint.yml")
    assert nightly is not None and lint is not None
    fork = app.repo.fork("mallory")
    run = {
        "pr-branch": lambda: app.repo.add_workflow_run(nightly, event="push", branch="lower"),
        "fork": lambda: app.repo.add_workflow_run(nightly, event="pull_request", head_repo=fork),
        # not what GitHub sends for a fork, but the head repository alone must exclude it
        "fork-push": lambda: app.repo.add_workflow_run(nightly, event="push", head_repo=fork),
        "other-workflow": lambda: app.repo.add_workflow_run(lint),
        "pull_request-on-main": lambda: app.repo.add_workflow_run(nightly, event="pull_request"),
    }[case]()
    app.history.values += [0.50] * 3  # a re-review would turn the check red
    reads = len(app.history.reads)
    writes = len(app.fake.requests("PATCH")) + len(app.fake.requests("POST"))

    assert app.completed(run).status == "done"

    assert len(app.history.reads) == reads
    assert len(app.fake.requests("PATCH")) + len(app.fake.requests("POST")) == writes
    assert app.conclusion(2) == "success"


def test_one_delivery_re_reviews_a_bounded_number_of_pulls(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in (2, 3, 4):
        if number != 2:
            app.repo.open_pr(number, head=f"lower{number}", head_files={SCRIPT: script("0.53")})
        reviewed(app, number)
    monkeypatch.setattr(workflow_run, "MAX_PULLS_PER_RUN", 2)
    app.history.values += [0.50] * 3
    nightly = app.repo.workflow("nightly.yml")
    assert nightly is not None

    assert app.completed(app.repo.add_workflow_run(nightly)).status == "done"

    # the newest two now, the oldest owed to the next re-check round
    assert [app.conclusion(n) for n in (2, 3, 4)] == [
        "success",
        "action_required",
        "action_required",
    ]
    with app.runtime.sessions() as session:
        owed = {t.number: t.conclusion for t in tracked.tracked(session)}
    assert owed[2] == tracked.DUE and owed[3] != tracked.DUE
