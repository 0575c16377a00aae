"""Every line a real ``threshold-bot serve`` or ``worker`` writes is a JSON object,
third-party output included: PyGithub's retry logger, prints, warnings, a library that
adds its own handler after start-up (MLflow), an exception escaping a thread or stopping
the process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.adapters.store import deliveries
from bot.adapters.store.db import init_db, make_engine
from tests import noisy_handler
from tests.conftest import ROOT
from tests.fakes.github_api import FakeGitHub
from tests.live import SECRET, ServerProcess, make_pem, wait_until
from tests.webhooks import signed

pytestmark = pytest.mark.servers

INSTALLATION = 7
REPO = "octo/ml"


def test_every_line_the_app_writes_is_json(tmp_path: Path) -> None:
    log = tmp_path / "server.log"  # the server's stdout and stderr, interleaved
    with FakeGitHub() as fake:
        repo = fake.add_repo(REPO, installation_id=INSTALLATION, files={"README.md": "# ml\n"})
        repo.open_pr(5, head="tune", head_files={"README.md": "# tuned\n"})
        fake.secondary_rate_limit("GET", rf"/repos/{REPO}/pulls/5$")  # then the PR
        assert fake.private_key is not None
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
        env.update(
            {
                "PYTHONPATH": str(ROOT),
                "APP_ID": str(fake.app_id),
                "PRIVATE_KEY": fake.private_key,
                "GITHUB_API_URL": fake.base_url,
                "WEBHOOK_SECRET": SECRET,
                "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
                "EXTRA_HANDLERS": "tests.noisy_handler",
                "WORKERS": "1",
            }
        )
        server = ServerProcess(env, tmp_path, log)
        try:
            payload = {"installation": {"id": INSTALLATION}, "repository": {"full_name": REPO}}
            body, headers = signed(noisy_handler.EVENT, {**payload, "number": 5}, SECRET)
            answer = httpx.post(f"{server.url}/webhook", content=body, headers=headers, timeout=30)
            assert answer.status_code == 202, answer.text
            sessions = init_db(make_engine(env["DATABASE_URL"]))

            def settled() -> bool:
                found = deliveries.get(sessions, headers["X-GitHub-Delivery"])
                return found is not None and found.status in ("done", "failed")

            wait_until(settled, timeout=120, what="the noisy delivery to be processed")
        finally:
            server.stop(signal.SIGTERM)
        fake.check()
        rate_limited = fake.requests("GET", f"/repos/{REPO}/pulls/5")
        assert [r.status for r in rate_limited] == [403, 200]

    text = log.read_text(encoding="utf-8")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        record = json.loads(line)  # raises on the first line that is not JSON
        assert isinstance(record, dict), (number, line)
        records.append(record)

    def by(logger: str) -> list[str]:
        return [str(r["msg"]) for r in records if r["logger"] == logger]

    stored = deliveries.get(sessions, headers["X-GitHub-Delivery"])
    assert stored is not None and stored.status == "done", stored
    assert any("failed with 403" in m for m in by("github.GithubRetry"))
    assert by("stdout") == [noisy_handler.PRINTED]
    stderr = by("stderr")
    assert "printed to stderr: ***" in stderr and SECRET not in text
    late = f"WARNING mlflow.tracking: {noisy_handler.LATE}"  # MLflow's handler, its own text
    assert [m for m in stderr if m.endswith(late)] != []
    # a plain handler on the root logger: its line comes back once, as the stderr it wrote
    assert by("rooted.library") == [noisy_handler.ROOTED]
    assert stderr.count(noisy_handler.ROOTED) == 1
    assert any(noisy_handler.WARNED in m for m in by("py.warnings"))
    (escaped,) = [r for r in records if "exc" in r]
    assert f"RuntimeError: {noisy_handler.UNCAUGHT}" in escaped["exc"]
    assert "Application shutdown complete." in by("uvicorn.error")


def test_an_exception_that_stops_the_process_is_logged_as_json(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "APP_ID": "4242",
            "PRIVATE_KEY": make_pem(),
            "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
            "EXTRA_HANDLERS": "tests.no_such_handlers",  # fails as the worker starts
        }
    )
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli.serve", "worker"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 1
    assert result.stdout == ""
    records = [json.loads(line) for line in result.stderr.splitlines()]
    (fatal,) = [r for r in records if r["level"] == "critical"]
    assert fatal["msg"] == "uncaught exception"
    assert "ModuleNotFoundError: No module named 'tests.no_such_handlers'" in fatal["exc"]
