"""End to end over GitHub Actions artifacts: real uvicorn + worker + SQLite, PyGithub against
FakeGitHub, whose Actions endpoints serve the nightly's runs and their artifacts.

``octo/evals`` has no history but its nightly workflow, which uploads lm-evaluation-harness's
results JSON (its real layout) as the artifact ``lm-eval-results``; its config names only the
workflow and the artifact.  The metric steps up at merged PR #3.  A pull request's run of
the same workflow uploads a poisoned artifact of the same name.  ``octo/evals-file`` has the
same gate and the same runs as a history file: the two reviews must agree.  Expected figures
are computed here from the runs.
"""

from __future__ import annotations

import io
import json
import math
import random
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.adapters.github.app import client_factory
from bot.adapters.store import deliveries
from bot.app.runtime import Runtime, build
from bot.app.web import create_app
from bot.core.history.export import history_text
from bot.core.models import Run
from bot.core.render.review import MARKER
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import IssueComment, Repo
from tests.live import deliver_and_wait, live_server, make_settings

pytestmark = pytest.mark.servers

INSTALLATION = 12
METRIC = "gsm8k/acc"  # lm-eval's <task>/<metric> (a results JSON without filters)
SCRIPT = "tests/ci/gsm8k_nightly.sh"
CONFIG = ".github/threshold-bot.yml"
ACTIONS_CONFIG = (
    "sources:\n  nightly:\n    kind: actions\n    workflow: nightly.yml\n"
    "    artifact: lm-eval-results\n"
    "default_source: nightly\n"
)
FILE_CONFIG = (
    "sources:\n  nightly:\n    kind: file\n    path: ci/history.jsonl\ndefault_source: nightly\n"
)
RUNS, SHIFT_AT, WINDOW = 60, 30, 20
BASE_VALUE = "0.45"
START = datetime(2026, 7, 1, 2, 0, tzinfo=UTC)
POISON = 0.01


def script(value: str) -> str:
    """A nightly CI script with one gate on the lm-eval metric."""
    return (
        "#!/usr/bin/env bash\n"
        "set -euo pipefail\n"
        f"GSM8K_MIN={value}\n"
        f'python -m evals --asserts "{METRIC} >= $GSM8K_MIN"\n'
    )


def scores(count: int = RUNS, seed: int = 29) -> list[float]:
    """A step from ~0.40 to ~0.56 at run ``SHIFT_AT``."""
    rng = random.Random(seed)
    return [
        round((0.40 if i < SHIFT_AT else 0.56) + rng.uniform(-0.03, 0.03), 4) for i in range(count)
    ]


def lm_eval_zip(value: float) -> bytes:
    """The artifact: lm-eval 0.4's results JSON, as the harness writes it, zipped."""
    results = {
        "results": {
            "gsm8k": {"alias": "gsm8k", "acc": value, "acc_stderr": 0.0137},
        },
        "group_subtasks": {"gsm8k": []},
        "configs": {"gsm8k": {"task": "gsm8k", "num_fewshot": 5}},
        "versions": {"gsm8k": 3.0},
        "n-shot": {"gsm8k": 5},
        "config": {"model": "hf", "model_args": "pretrained=Qwen/Qwen2.5-1.5B-Instruct"},
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("Qwen__Qwen2.5/results_2026-07-01T02-00-00.json", json.dumps(results))
    return out.getvalue()


LM_YAML = "tests/accuracy/Qwen2.5-1.5B-Instruct.yaml"
LM_GATES = (
    "files:\n"
    '  - path: "tests/accuracy/*.yaml"\n'
    "    kind: reference\n"
    "    gates:\n"
    '      - {key: "tasks[*].metrics[*].value", metric: "{..name}/{.name}", sides: both}\n'
)


def lm_yaml(strict: str) -> str:
    """lm-eval's reference accuracies as the harness's CI keeps them (the corpus's layout)."""
    return (
        'model_name: "Qwen/Qwen2.5-1.5B-Instruct"\n'
        "tasks:\n"
        '- name: "gsm8k"\n'
        "  metrics:\n"
        '  - name: "exact_match,strict-match"\n'
        f"    value: {strict}\n"
        "tolerance: {rel: 0.08}\n"
    )


def lm_eval_filtered_zip(value: float) -> bytes:
    """lm-eval 0.4's results JSON with filters (``exact_match,strict-match``), zipped."""
    results = {
        "results": {
            "gsm8k": {
                "alias": "gsm8k",
                "exact_match,strict-match": value,
                "exact_match_stderr,strict-match": 0.0137,
            }
        },
        "group_subtasks": {"gsm8k": []},
        "configs": {"gsm8k": {"task": "gsm8k", "num_fewshot": 5}},
        "versions": {"gsm8k": 3.0},
        "n-shot": {"gsm8k": 5},
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("Qwen__Qwen2.5/results_2026-07-01T02-00-00.json", json.dumps(results))
    return out.getvalue()


def lm_repos(fake: FakeGitHub, values: list[float]) -> tuple[Repo, Repo]:
    """``octo/lm``: a reference YAML gate, only the nightly's lm-eval artifacts as history;
    ``octo/lm-file``: the same gate and runs, as a history file."""
    repo = fake.add_repo(
        "octo/lm",
        installation_id=INSTALLATION,
        files={LM_YAML: lm_yaml("0.54"), CONFIG: ACTIONS_CONFIG + LM_GATES},
    )
    nightly = repo.add_workflow("nightly.yml")
    runs: list[Run] = []
    metric = "gsm8k/exact_match,strict-match"
    for i, value in enumerate(values):
        when = START + timedelta(days=i)
        run = repo.add_workflow_run(nightly, created_at=when)
        repo.add_artifact(run, "lm-eval-results", lm_eval_filtered_zip(value))
        runs.append(
            Run(id=str(run.id), created_at=when, commit=run.head_sha, summary={metric: value})
        )
    file_repo = fake.add_repo(
        "octo/lm-file",
        installation_id=INSTALLATION,
        files={
            LM_YAML: lm_yaml("0.54"),
            CONFIG: FILE_CONFIG + LM_GATES,
            "ci/history.jsonl": history_text(runs),
        },
    )
    return repo, file_repo


def rule_limit(window: list[float], decimals: int = 2, allowance: float = 0.05) -> float:
    """The documented lower-bound rule rounded down at ``decimals``."""
    low = min(window)
    scale = 10.0**decimals
    return math.floor((low - allowance * abs(low)) * scale) / scale


@dataclass
class World:
    url: str
    github: FakeGitHub
    runtime: Runtime
    actions: Repo
    file: Repo
    values: list[float]
    lm: Repo
    lm_file: Repo

    def pull_event(self, action: str, repo: Repo, number: int) -> deliveries.Delivery:
        pr = repo.pr(number)
        owner, name = repo.full_name.split("/")
        changes: dict[str, Any] = {
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
        }
        return deliver_and_wait(
            self.url, self.runtime.sessions, f"pull_request.{action}", changes, timeout=90
        )


def arrange(fake: FakeGitHub) -> tuple[Repo, Repo, list[float]]:
    values = scores()
    repo = fake.add_repo(
        "octo/evals",
        installation_id=INSTALLATION,
        files={SCRIPT: script(BASE_VALUE), CONFIG: ACTIONS_CONFIG},
    )
    before = repo.head("main")
    repo.open_pr(3, head="cot", head_files={"prompts.py": "COT = True\n"}, title="CoT prompts")
    after = repo.merge_pr(3)
    commits = [before] * SHIFT_AT + [after] * (RUNS - SHIFT_AT)
    nightly = repo.add_workflow("nightly.yml")
    runs: list[Run] = []
    for i, value in enumerate(values):
        when = START + timedelta(days=i)
        run = repo.add_workflow_run(nightly, head_sha=commits[i], created_at=when)
        repo.add_artifact(run, "lm-eval-results", lm_eval_zip(value))
        runs.append(
            Run(id=str(run.id), created_at=when, commit=commits[i], summary={METRIC: value})
        )
    # a PR's run of the nightly uploads an artifact of the same name: never history
    repo.branches["poison"] = repo.head("main")
    poisoned = repo.add_workflow_run(
        nightly, event="pull_request", branch="poison", created_at=START + timedelta(days=RUNS)
    )
    repo.add_artifact(poisoned, "lm-eval-results", lm_eval_zip(POISON))
    file_repo = fake.add_repo(
        "octo/evals-file",
        installation_id=INSTALLATION,
        files={
            SCRIPT: script(BASE_VALUE),
            CONFIG: FILE_CONFIG,
            "ci/history.jsonl": history_text(runs),
        },
    )
    return repo, file_repo, values


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("e2e_actions")
    with FakeGitHub() as github:
        repo, file_repo, values = arrange(github)
        lm, lm_file = lm_repos(github, values)
        settings = make_settings(
            tmp,
            app_id=github.app_id,
            private_key=github.private_key,
            github_api_url=github.base_url,
            drift_watch=False,
        )
        runtime = build(settings, github=client_factory(settings))
        with live_server(create_app(settings, runtime)) as url:
            yield World(url, github, runtime, repo, file_repo, values, lm, lm_file)
        github.check()


def the_comment(repo: Repo, number: int) -> IssueComment:
    (comment,) = [c for c in repo.comments(number) if c.body.startswith(MARKER)]
    return comment


def gate_row(body: str) -> list[str]:
    (line,) = [ln for ln in body.splitlines() if ln.startswith("| <code>GSM8K")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_a_repository_whose_only_history_is_its_nightly_artifacts_gets_a_review(
    world: World,
) -> None:
    window = world.values[-WINDOW:]
    failing = sum(v < 0.55 for v in window)
    assert 0 < failing < WINDOW
    old_fails = sum(v < float(BASE_VALUE) for v in world.values[-30:])
    world.actions.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})

    delivery = world.pull_event("opened", world.actions, 7)

    assert (delivery.status, delivery.attempts) == ("done", 1), delivery.last_error
    body = the_comment(world.actions, 7).body
    row = gate_row(body)
    assert row[4] == f"{min(window):.4f} – {max(window):.4f}"  # the poisoned 0.01 is not in it
    assert row[6] == f"**{failing}**/{WINDOW}"
    assert row[5].replace("*", "") == f"{old_fails}/30"
    assert row[3] == f"{rule_limit(window):.2f}"
    assert f"{RUNS} runs: {RUNS} finished" in body
    assert "/octo/evals/pull/3" in body  # the step is attributed to the merged PR

    # the same runs served from a history file give the same review of the gate
    world.file.open_pr(7, head="tune", head_files={SCRIPT: script("0.55")})
    other = world.pull_event("opened", world.file, 7)
    assert other.status == "done", other.last_error
    assert gate_row(the_comment(world.file, 7).body) == row


def test_an_lm_eval_yaml_gate_binds_to_the_artifacts_results_without_a_metrics_map(
    world: World,
) -> None:
    # the done-when: config naming only the workflow and artifact; lm-eval's metric names
    for repo in (world.lm, world.lm_file):
        repo.open_pr(5, head="ref", head_files={LM_YAML: lm_yaml("0.56")})
        delivery = world.pull_event("opened", repo, 5)
        assert delivery.status == "done", delivery.last_error

    def rows(repo: Repo) -> list[str]:
        body = the_comment(repo, 5).body
        return [ln for ln in body.splitlines() if ln.startswith("| <code>")]

    from_artifacts = rows(world.lm)
    assert from_artifacts and from_artifacts == rows(world.lm_file)
    window = world.values[-WINDOW:]
    assert f"{min(window):.4f} – {max(window):.4f}" in from_artifacts[0]


def test_rebaseline_commits_the_rules_value_from_the_artifacts_runs(world: World) -> None:
    maintainer = "maya"
    world.actions.set_permission(maintainer, "maintain")
    world.actions.open_pr(9, head="rebase", head_files={SCRIPT: script("0.55")})
    old_head = world.actions.pr(9).head_sha
    assert world.pull_event("opened", world.actions, 9).status == "done"
    want = f"{rule_limit(world.values[-WINDOW:]):.2f}"  # the poisoned 0.01 is not in it
    assert want != "0.55"
    state = world.github.state
    now = datetime.now(UTC).replace(microsecond=0)
    posted = IssueComment(state.next_id(), 9, maintainer, "/rebaseline\n", now, now)
    with state.lock:
        world.actions.issue_comments[posted.id] = posted
    owner, name = world.actions.full_name.split("/")
    changes: dict[str, Any] = {
        "issue.number": 9,
        "comment.id": posted.id,
        "comment.body": posted.body,
        "comment.user.login": maintainer,
        "comment.user.type": "User",
        "repository.full_name": world.actions.full_name,
        "repository.name": name,
        "repository.owner.login": owner,
        "installation.id": INSTALLATION,
        "sender.login": maintainer,
        "sender.type": "User",
    }

    delivery = deliver_and_wait(
        world.url, world.runtime.sessions, "issue_comment.created", changes, timeout=90
    )

    assert delivery.status == "done", delivery.last_error
    new_head = world.actions.pr(9).head_sha
    assert new_head != old_head
    after = world.actions.file_at(new_head, SCRIPT)
    assert after is not None and f"GSM8K_MIN={want}\n" in after
    first, last = (START + timedelta(days=d) for d in (RUNS - WINDOW, RUNS - 1))
    assert f"last 20 finished runs, 20 runs ({first.date()} .. {last.date()})" in after
    assert "GSM8K_MIN: 0.55 → " + want in world.actions.objects[new_head].message
