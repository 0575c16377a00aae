"""Benchmark: an ``actions`` history source's cost against the fake GitHub.

300 nightly runs of one workflow on the default branch, each uploading an lm-eval results
JSON (zipped), plus 30 pull-request runs uploading an artifact of the same name (never
read).  Cold read into an empty SQLite run cache, then a warm read with nothing new, then
one with one new nightly; each through a fresh client and ``CachedSource`` (as a new job).
Counts GitHub API requests (the artifact storage host's downloads, which GitHub's 302 points
to, are counted apart) and checks the targets: cold <= 1.1 API requests per run, warm <= 2.
Run: ``.venv/bin/python bench/bench_actions.py``.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.adapters.history.actions_source import ActionsSource  # noqa: E402
from bot.adapters.history.cache import CachedSource  # noqa: E402
from bot.adapters.store.db import init_db, make_engine  # noqa: E402
from bot.core.models import SourceSpec  # noqa: E402
from tests.fakes.github_api import FakeGitHub  # noqa: E402
from tests.fakes.github_routes import BLOB_PREFIX  # noqa: E402
from tests.fakes.github_state import Repo, Workflow  # noqa: E402

RUNS, PR_RUNS = 300, 30
REPO, INSTALLATION, ARTIFACT = "octo/evals", 1, "lm-eval-results"
SPEC = SourceSpec(kind="actions", repo=REPO, workflow="nightly.yml", artifact=ARTIFACT)
START = datetime(2026, 1, 1, 2, tzinfo=UTC)


def lm_eval_zip(value: float) -> bytes:
    results = {
        "results": {"gsm8k": {"alias": "gsm8k", "exact_match,strict-match": value}},
        "configs": {"gsm8k": {"task": "gsm8k"}},
        "versions": {"gsm8k": 3.0},
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model/results_2026-01-01T02-00-00.json", json.dumps(results))
    return out.getvalue()


def nightly(repo: Repo, workflow: Workflow, i: int) -> None:
    run = repo.add_workflow_run(workflow, created_at=START + timedelta(days=i))
    repo.add_artifact(run, ARTIFACT, lm_eval_zip(0.5 + (i % 10) / 100))


def counted(fake: FakeGitHub, since: int) -> tuple[int, int]:
    """(GitHub API requests, artifact storage requests) recorded after call ``since``."""
    calls = fake.calls[since:]
    blobs = sum(1 for c in calls if c.path.startswith(BLOB_PREFIX))
    return len(calls) - blobs, blobs


def read(fake: FakeGitHub, sessions: object) -> tuple[int, int, int, float]:
    """One read through a fresh client: (runs, API requests, downloads, seconds)."""
    client = fake.github_app().installation(INSTALLATION)
    client.default_branch(REPO)  # the installation token, minted before counting
    since = len(fake.calls)
    start = time.perf_counter()
    history = CachedSource(sessions, ActionsSource(client, 50 << 20)).fetch(SPEC)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    api, blobs = counted(fake, since)
    return len(history.runs), api, blobs, seconds


def main() -> int:
    ok = True
    with FakeGitHub() as fake, tempfile.TemporaryDirectory() as tmp:
        repo = fake.add_repo(REPO, installation_id=INSTALLATION, files={"README.md": "x\n"})
        workflow = repo.add_workflow("nightly.yml")
        for i in range(RUNS):
            nightly(repo, workflow, i)
        repo.branches["pr"] = repo.head("main")
        for i in range(PR_RUNS):
            run = repo.add_workflow_run(
                workflow,
                event="pull_request",
                branch="pr",
                created_at=START + timedelta(days=i, hours=5),
            )
            repo.add_artifact(run, ARTIFACT, lm_eval_zip(0.0))
        sessions = init_db(make_engine(f"sqlite:///{tmp}/runs.db"))
        runs, api, blobs, seconds = read(fake, sessions)
        per_run = api / runs
        print(
            f"cold: {runs} runs, {api} GitHub API requests ({per_run:.3f} per run), "
            f"{blobs} artifact downloads from the storage host, {seconds:.2f} s"
        )
        ok &= runs == RUNS and per_run <= 1.1
        runs, api, blobs, seconds = read(fake, sessions)
        print(f"warm, nothing new: {api} API requests, {blobs} downloads, {seconds:.3f} s")
        ok &= api <= 2 and blobs == 0
        nightly(repo, workflow, RUNS)
        runs, api, blobs, seconds = read(fake, sessions)
        print(
            f"warm, 1 new nightly: {runs} runs, {api} API requests, {blobs} download, "
            f"{seconds:.3f} s"
        )
        ok &= runs == RUNS + 1 and blobs == 1
        fake.check()
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
