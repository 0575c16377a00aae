"""What a pull request can make the App read (docs/security.md), end to end: real uvicorn +
worker + SQLite, PyGithub against FakeGitHub, the real wandb client against the fake W&B.

The base decides which W&B project a gate reads; a project the PR names instead is not
requested until a maintainer approves it; and the operator's ``WANDB_ENTITIES`` decides
which entities an installation may read at all, whatever its repository's config says.
Every assertion about what was read is made on the fake W&B's own request log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bot.adapters.github.app import client_factory
from bot.adapters.store import deliveries, tracked
from bot.app.runtime import build
from bot.app.web import create_app
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo
from tests.fakes.wandb_server import API_KEY, FakeWandb, serve
from tests.live import live_server, make_settings
from tests.test_e2e_wandb import (
    CONFIG,
    ENTITY,
    INSTALLATION,
    PROJECT,
    SCRIPT,
    WINDOW,
    World,
    arrange_github,
    arrange_wandb,
    check_runs,
    gate_row,
    md,
    scores,
    script,
    the_comment,
    wandb_run,
)

pytestmark = pytest.mark.servers

SECRET_PROJECT = "secret_ci"  # acme's other project, which no script on main names
OTHER_INSTALLATION = 12
OTHER_REPO = "mallory/evil"  # installed by another customer of the same App
NUMBERED_INSTALLATION = 22
NUMBERED_REPO = f"{INSTALLATION}/probe"  # an account whose login is installation 11's id


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("e2e_sources")
    w_and_b = FakeWandb()
    with FakeGitHub() as github, serve(w_and_b) as wandb_url, pytest.MonkeyPatch.context() as mp:
        repo, commits, merged = arrange_github(github)
        values = arrange_wandb(w_and_b, commits)
        for i, value in enumerate(scores(seed=9)):  # acme's secret project: other numbers
            w_and_b.add_run(ENTITY, SECRET_PROJECT, wandb_run(i, value - 0.3, commits[i]))
        pinned = f"sources:\n  ci:\n    kind: wandb\n    entity: {ENTITY}\n    project: {PROJECT}\n"
        github.add_repo(
            OTHER_REPO,
            installation_id=OTHER_INSTALLATION,
            files={SCRIPT: script("0.45", project=None), CONFIG: pinned + "default_source: ci\n"},
        )
        github.add_repo(
            NUMBERED_REPO,
            installation_id=NUMBERED_INSTALLATION,
            files={SCRIPT: script("0.45", project=None), CONFIG: pinned + "default_source: ci\n"},
        )
        mp.setenv("WANDB_API_KEY", API_KEY)
        mp.setenv("WANDB_BASE_URL", wandb_url)
        mp.setenv("WANDB_ENTITY", ENTITY)
        # the operator: installation 11 may read acme and lab; mallory's only its own entity
        entities = {f"installation:{INSTALLATION}": [ENTITY, "lab"], "owner:mallory": ["mallory"]}
        mp.setenv("WANDB_ENTITIES", json.dumps(entities))
        settings = make_settings(
            tmp,
            app_id=github.app_id,
            private_key=github.private_key,
            github_api_url=github.base_url,
        )
        runtime = build(settings, github=client_factory(settings))
        with live_server(create_app(settings, runtime)) as url:
            yield World(url, github, w_and_b, runtime, settings, repo, values, merged)
        github.check()


def approve(world: World, repo: Repo, number: int, user: str) -> deliveries.Delivery:
    """``user`` clicks **Approve thresholds** on the PR's check run."""
    pr = repo.pr(number)
    (run,) = check_runs(repo, pr.head_sha)
    owner, name = repo.full_name.split("/")
    return world.deliver(
        "check_run.requested_action",
        {
            "check_run.id": run.id,
            "check_run.name": "threshold-bot",
            "check_run.head_sha": pr.head_sha,
            "check_run.external_id": str(number),
            "check_run.pull_requests": [],
            "check_run.app.id": world.github.app_id,
            "requested_action.identifier": "approve",
            "repository.full_name": repo.full_name,
            "repository.name": name,
            "repository.owner.login": owner,
            "installation.id": INSTALLATION if repo is world.repo else OTHER_INSTALLATION,
            "sender.login": user,
        },
    )


def test_a_project_the_pr_names_is_read_only_once_a_maintainer_approves(world: World) -> None:
    window = world.values[-WINDOW:]
    assert min(window) >= 0.52  # 0.52 passes the base's project
    pr = world.repo.open_pr(
        21, head="steer", head_files={SCRIPT: script("0.52", project=SECRET_PROJECT)}
    )
    world.wandb.projects_asked.clear()

    opened = world.pull_event("opened", world.repo, 21)

    assert (opened.status, opened.attempts) == ("done", 1), opened.last_error
    assert world.wandb.projects_asked[(ENTITY, SECRET_PROJECT)] == 0  # never requested
    assert world.wandb.projects_asked[(ENTITY, PROJECT)] >= 1  # the base's project instead
    body = the_comment(world.repo, 21).body
    assert f"wandb:{md(SECRET_PROJECT)}" in body  # the entity is WANDB_ENTITY's
    assert "it is not read until a maintainer approves" in body
    assert f"{min(window):.4f} – {max(window):.4f}" in gate_row(body)[4]  # the base's runs
    (run,) = check_runs(world.repo, pr.head_sha)
    assert run.conclusion == "action_required"
    assert [a["identifier"] for a in run.actions] == ["approve"]

    world.repo.set_permission("maya", "maintain")
    approved = approve(world, world.repo, 21, "maya")

    assert approved.status == "done", approved.last_error
    assert world.wandb.projects_asked[(ENTITY, SECRET_PROJECT)] >= 1  # read once approved
    secret = [v - 0.3 for v in scores(seed=9)][-WINDOW:]
    after = the_comment(world.repo, 21).body
    assert f"{min(secret):.4f} – {max(secret):.4f}" in gate_row(after)[4]
    (run,) = check_runs(world.repo, pr.head_sha)
    assert run.conclusion == "success"  # the maintainer vouched for this gate and source
    assert "Approved by @maya" in run.output["summary"] + run.output["title"]


def test_an_installation_never_reads_an_entity_the_operator_did_not_give_it(
    world: World,
) -> None:
    evil = world.github.repo(OTHER_REPO)  # its own main names acme/gsm8k_ci in the config
    pr = evil.open_pr(3, head="probe", head_files={SCRIPT: script("0.10", project=None)})
    world.wandb.projects_asked.clear()
    owner, name = OTHER_REPO.split("/")

    delivery = world.deliver(
        "pull_request.opened",
        {
            "number": 3,
            "pull_request.number": 3,
            "pull_request.head.sha": pr.head_sha,
            "pull_request.head.ref": pr.head_ref,
            "pull_request.base.ref": pr.base_ref,
            "repository.full_name": OTHER_REPO,
            "repository.name": name,
            "repository.owner.login": owner,
            "installation.id": OTHER_INSTALLATION,
            "sender.login": "mallory",
        },
    )

    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    assert sum(world.wandb.projects_asked.values()) == 0  # nothing of acme's was requested
    body = the_comment(evil, 3).body
    assert "is not one this installation may read" in body
    assert "WANDB\\_ENTITIES" in body
    for value in world.values:  # none of acme's numbers leak into mallory's PR
        assert f"{value:.4f}" not in body
    (run,) = check_runs(evil, pr.head_sha)
    assert run.conclusion == "action_required"  # a changed gate nothing verified
    with world.runtime.sessions() as session:
        mine = [t for t in tracked.tracked(session) if t.repo == OTHER_REPO]
    assert all(not t.sources for t in mine)  # nothing refused is re-synced every 15 minutes


def test_an_account_named_like_an_installation_id_reads_nothing_of_that_installation(
    world: World,
) -> None:
    """The GitHub account ``11`` (installation 22) is not installation 11: the operator's
    grant to installation 11 is not its grant."""
    probe = world.github.repo(NUMBERED_REPO)  # its main names acme/gsm8k_ci in the config
    pr = probe.open_pr(4, head="probe", head_files={SCRIPT: script("0.10", project=None)})
    world.wandb.projects_asked.clear()
    owner, name = NUMBERED_REPO.split("/")

    delivery = world.deliver(
        "pull_request.opened",
        {
            "number": 4,
            "pull_request.number": 4,
            "pull_request.head.sha": pr.head_sha,
            "pull_request.head.ref": pr.head_ref,
            "pull_request.base.ref": pr.base_ref,
            "repository.full_name": NUMBERED_REPO,
            "repository.name": name,
            "repository.owner.login": owner,
            "installation.id": NUMBERED_INSTALLATION,
            "sender.login": owner,
        },
    )

    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    assert sum(world.wandb.projects_asked.values()) == 0  # nothing of acme's was requested
    body = the_comment(probe, 4).body
    assert "is not one this installation may read" in body
    for value in world.values:  # none of acme's numbers in the account's PR
        assert f"{value:.4f}" not in body
    (run,) = check_runs(probe, pr.head_sha)
    assert run.conclusion == "action_required"
