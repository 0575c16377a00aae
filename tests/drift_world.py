"""A world for the drift watch's end-to-end tests: the real App, the GitHub fake, fake W&B.

``open_world(tmp)`` starts what ``tests/test_e2e_wandb.py`` starts (uvicorn + worker +
SQLite, PyGithub against ``FakeGitHub``, the real wandb client against ``FakeWandb``) and
yields a ``World``: the App learns of installation ``INSTALLATION`` first, as GitHub tells
it.  ``World.nightly(repo, project, start)`` gives a ``Nightly``: a W&B project that grows
one run a day at the head of the repository's default branch, with regime changes brought
by merged PRs (``Nightly.merge``).  ``World`` sends the deliveries the drift watch acts on
(``push``, ``pull_request.closed``, a comment on an issue; each must end ``done``) and runs
the periodic watch round (``World.watch``); ``lower_rule`` is the limit rule for a lower
bound, computed independently of the product.

The nightly script is the seed's (``demo/data.py``): five gates read by ``get_summary.py
--asserts`` from the W&B project named by ``--project_name`` (``GATES``, ``LITERALS``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.github.app import client_factory
from bot.adapters.settings import Settings
from bot.adapters.store import deliveries
from bot.app.runtime import Runtime, build
from bot.app.web import create_app
from bot.features.dashboard.write import DashboardStep
from bot.features.drift.rounds import drift_job
from bot.features.drift.watch import Finish, WatchReport
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_shapes import WEB
from tests.fakes.github_state import Issue, IssueComment, Repo
from tests.fakes.wandb_server import API_KEY, FakeRun, FakeWandb, serve
from tests.live import deliver_and_wait, live_server, make_settings

INSTALLATION = 21
ENTITY = "acme"  # WANDB_ENTITY: the script names only the project
SCRIPT = "tests/ci/gsm8k_nightly.sh"
CONFIG = ".github/threshold-bot.yml"

# the five gates of the nightly: variable -> (metric, operator)
GATES: dict[str, tuple[str, str]] = {
    "EVAL_ACC_MIN_VALUE": ("eval/all/avg_score", ">="),
    "TRAIN_ACC_MIN_VALUE": ("loss/avg_final_rewards", ">="),
    "AVG_NUM_TOKENS_MAX_VALUE": ("generate/avg_num_tokens", "<="),
    "LOGPROBS_DIFF_MAX_VALUE": ("policy/rollout_train_logprobs_abs_diff_mean", "<="),
    "STEP_TIME_MAX_VALUE": ("timing/step_s", "<="),
}
# the literals on the default branch
LITERALS: dict[str, str] = {
    "EVAL_ACC_MIN_VALUE": "0.55",
    "TRAIN_ACC_MIN_VALUE": "0.32",
    "AVG_NUM_TOKENS_MAX_VALUE": "290",
    "LOGPROBS_DIFF_MAX_VALUE": "0.040",
    "STEP_TIME_MAX_VALUE": "150",
}
# half-width of the (uniform) noise of each metric around its regime's level
NOISE: dict[str, float] = {
    "eval/all/avg_score": 0.006,
    "loss/avg_final_rewards": 0.006,
    "generate/avg_num_tokens": 3.0,
    "policy/rollout_train_logprobs_abs_diff_mean": 0.0006,
    "timing/step_s": 2.0,
}
DECIMALS: dict[str, int] = {  # decimals each metric is logged with
    "eval/all/avg_score": 4,
    "loss/avg_final_rewards": 4,
    "generate/avg_num_tokens": 1,
    "policy/rollout_train_logprobs_abs_diff_mean": 5,
    "timing/step_s": 2,
}


def nightly_script(project: str, **literals: str) -> str:
    """The seed's nightly script with ``LITERALS`` (some replaced by ``literals``), reading
    the W&B project ``project``."""
    values = {**LITERALS, **literals}
    asserts = " \\\n            ".join(
        f'"{metric} {op} ${var}"' for var, (metric, op) in GATES.items()
    )
    lines = "".join(f"{var}={values[var]}\n" for var in GATES)
    return (
        "#!/usr/bin/env bash\n"
        "set -euo pipefail\n\n"
        'RUN_NAME="run_$(date +%Y%m%d%H%M%S)_$$"\n'
        'SCRIPT_DIR=$(dirname "$(realpath "$0")")\n\n'
        "# Thresholds: 5% allowance from the last CI runs\n"
        f"{lines}\n"
        "bash examples/train/fully_async/fully_async_run_gsm8k.sh \\\n"
        f'  trainer.run_name=\\"$RUN_NAME\\" trainer.project_name=\\"{project}\\"\n\n'
        'uv run --isolated --extra fsdp "$SCRIPT_DIR/get_summary.py" --run_name "$RUN_NAME" \\\n'
        f'  --project_name "{project}" \\\n'
        f"  --asserts {asserts}\n"
    )


def lower_rule(values: list[float], decimals: int, allowance: float = 0.05) -> str:
    """The limit rule for a lower bound (docs/limit-rule.md): ``allowance`` below the
    minimum, rounded down at ``decimals``; as the literal is written."""
    low = Decimal(repr(min(values)))
    unrounded = low - Decimal(repr(allowance)) * abs(low)
    assert unrounded.adjusted() >= -decimals  # 2 significant digits fit in the decimals
    return str(unrounded.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_FLOOR))


@dataclass
class Nightly:
    """One W&B project, one run a night at 08:00 UTC on the repository's default branch.

    ``values`` holds every finished run's summary, oldest first; ``commits`` and ``dates``
    go with it."""

    wandb: FakeWandb
    repo: Repo
    project: str
    next_at: datetime
    rng: random.Random
    values: list[dict[str, float]] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    dates: list[datetime] = field(default_factory=list)

    def run(self, levels: Mapping[str, float]) -> dict[str, float]:
        """Log tonight's run at main's head: each metric at its level plus bounded noise."""
        summary = {
            metric: round(level + self.rng.uniform(-NOISE[metric], NOISE[metric]), DECIMALS[metric])
            for metric, level in levels.items()
        }
        commit = self.repo.head(self.repo.default_branch)
        at = self.next_at
        self.wandb.add_run(
            ENTITY,
            self.project,
            FakeRun(
                name=f"{self.project[:4]}{len(self.values):04d}",
                created_at=at,
                display_name=f"run_{at:%Y%m%d%H%M%S}",
                tags=["nightly"],
                commit=commit,
                summary={**summary, "_step": 40, "_runtime": 3600.0},
            ),
        )
        self.values.append(summary)
        self.commits.append(commit)
        self.dates.append(at)
        self.next_at = at + timedelta(days=1)
        return summary

    def runs(self, levels: Mapping[str, float], count: int) -> None:
        """``count`` nights at ``levels``."""
        for _ in range(count):
            self.run(levels)

    def merge(self, title: str, files: Mapping[str, str | None], *, branch: str) -> int:
        """Open and merge a PR (from ``branch``, changing ``files``) between the last run and
        the next one; return its number."""
        before = self.next_at - timedelta(hours=12)
        pr = self.repo.open_pr(head=branch, head_files=dict(files), title=title, date=before)
        self.repo.merge_pr(pr.number, date=before + timedelta(hours=1))
        return pr.number

    def metric(self, name: str) -> list[float]:
        """One metric over the finished runs, oldest first."""
        return [v[name] for v in self.values]


@dataclass
class World:
    """The running App and the fakes it talks to."""

    url: str
    github: FakeGitHub
    wandb: FakeWandb
    runtime: Runtime
    settings: Settings
    seed: int = 7

    def nightly(self, repo: Repo, project: str, start: datetime) -> Nightly:
        """A nightly W&B ``project`` whose first run is at ``start``."""
        self.wandb.add_project(ENTITY, project)
        return Nightly(self.wandb, repo, project, start, random.Random(self.seed))

    def deliver(self, name: str, changes: dict[str, Any]) -> deliveries.Delivery:
        """POST a signed fixture delivery; wait until the worker has finished it."""
        found = deliver_and_wait(self.url, self.runtime.sessions, name, changes, timeout=90)
        assert (found.status, found.last_error) == ("done", None), found.last_error
        return found

    def watch(self, finish: Finish | None = None) -> WatchReport:
        """One round of the periodic drift watch, as the scheduler runs it every
        RECHECK_SECONDS (again while a periodic round holds a file's lease), with the App's
        dashboard step (or ``finish``)."""
        job = drift_job(
            self.settings,
            self.runtime.sessions,
            self.runtime.worker.github,
            self.runtime.worker.history,
            self.runtime.locks,
            finish or DashboardStep.of(self.settings),
        )
        deadline = time.monotonic() + 30
        report = job()
        while any(a.action == "busy" for a in report.acted) and time.monotonic() < deadline:
            time.sleep(0.2)
            report = job()
        return report

    def _repository(self, repo: Repo) -> dict[str, Any]:
        return {
            "repository.full_name": repo.full_name,
            "repository.name": repo.name,
            "repository.owner.login": repo.owner,
            "repository.default_branch": repo.default_branch,
            "repository.private": repo.private,
            "repository.html_url": f"{WEB}/{repo.full_name}",
            "installation.id": INSTALLATION,
        }

    def push(self, repo: Repo, before: str, paths: list[str]) -> deliveries.Delivery:
        """GitHub's ``push`` of the default branch from ``before`` to its head, one commit
        modifying ``paths``."""
        after = repo.head(repo.default_branch)
        return self.deliver(
            "push",
            {
                **self._repository(repo),
                "ref": f"refs/heads/{repo.default_branch}",
                "before": before,
                "after": after,
                "created": False,
                "deleted": False,
                "commits": [{"id": after, "added": [], "removed": [], "modified": paths}],
                "head_commit": {"id": after, "added": [], "removed": [], "modified": paths},
            },
        )

    def pull_closed(self, repo: Repo, number: int) -> deliveries.Delivery:
        """GitHub's ``pull_request.closed`` for PR ``number`` as it stands (merged or not)."""
        pr = repo.pr(number)
        return self.deliver(
            "pull_request.closed",
            {
                **self._repository(repo),
                "number": number,
                "pull_request.number": number,
                "pull_request.merged": pr.merged,
                "pull_request.merged_at": pr.merged_at.isoformat() if pr.merged_at else None,
                "pull_request.merge_commit_sha": pr.merge_commit_sha,
                "pull_request.head.sha": pr.head_sha,
                "pull_request.head.ref": pr.head_ref,
                "pull_request.base.ref": pr.base_ref,
                "sender.login": "alice",
            },
        )

    def comment_on_issue(
        self, repo: Repo, issue: Issue, user: str, body: str
    ) -> tuple[IssueComment, deliveries.Delivery]:
        """``user`` comments ``body`` on the plain ``issue``; GitHub's delivery of it is
        processed."""
        posted = repo.add_comment(issue.number, body, user=user)
        delivery = self.deliver(
            "issue_comment.created.on-issue",
            {
                **self._repository(repo),
                "issue.number": issue.number,
                "issue.title": issue.title,
                "issue.body": issue.body,
                "issue.state": issue.state,
                "comment.id": posted.id,
                "comment.body": body,
                "comment.user.login": user,
                "comment.user.type": "User",
                "sender.login": user,
                "sender.type": "User",
            },
        )
        return posted, delivery


@contextmanager
def open_world(tmp: Path, **settings: Any) -> Iterator[World]:
    """The App (with ``settings`` overrides) and its fakes, running; the GitHub fake is
    checked (schemas, endpoints) when the world closes."""
    fake_wandb = FakeWandb()
    with FakeGitHub() as github, serve(fake_wandb) as wandb_url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_API_KEY", API_KEY)
        mp.setenv("WANDB_BASE_URL", wandb_url)
        mp.setenv("WANDB_ENTITY", ENTITY)
        app_settings = make_settings(
            tmp,
            app_id=github.app_id,
            private_key=github.private_key,
            github_api_url=github.base_url,
            **settings,
        )
        runtime = build(app_settings, github=client_factory(app_settings))
        with live_server(create_app(app_settings, runtime)) as url:
            world = World(url, github, fake_wandb, runtime, app_settings)
            world.deliver("installation.created", {"installation.id": INSTALLATION})
            yield world
        github.check()


def issues_by_app(repo: Repo, title: str) -> list[Issue]:
    """The plain issues titled ``title`` that this App wrote."""
    return [i for i in repo.issues.values() if i.title == title and i.app_id == repo.state.app_id]
