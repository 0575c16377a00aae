"""Shared test fixtures and the suite's rules.

Fixtures: the repository root and the GitHub fixtures under ``tests/fixtures``.

Rules: a test module that starts a process or a listening server (a subprocess, uvicorn,
PostgreSQL, Redis, MLflow, a fake on a socket, a browser) carries ``pytestmark =
pytest.mark.servers``: ``make test-fast`` leaves those out, and any other test that tries
fails at once (``subprocess.Popen`` and ``socket.listen`` refuse while its fixtures are set
up and while it runs).  Under pytest-xdist (``make test``: ``--dist loadfile``, each module
on one worker) the slowest modules are handed out first, so the run does not end waiting
on one long module.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Generator
from pathlib import Path
from typing import Any, NoReturn

import pytest

pytest_plugins = [
    "tests.fakes.pytest_plugin",
    "tests.browser_harness",
    "tests.services",
    "tests.clean_install",
    "tests.mlflow_server",
]
# threshold files written as test modules (tests/fixtures/gates): data, not tests
collect_ignore_glob = ["fixtures/*"]

ROOT = Path(__file__).resolve().parent.parent
# Real webhook payloads, REST examples and the trimmed OpenAPI description (see SOURCES.md there).
GITHUB_FIXTURES = ROOT / "tests" / "fixtures" / "github"

# The modules that take longest (measured with `pytest --durations`), longest first: started
# first under xdist so that the shorter ones fill the workers' tails.  Order only, never a filter.
SLOW_MODULES = (
    "test_scale_e2e.py",
    "test_clean_install.py",
    "test_crash.py",
    "test_store_faults.py",
    "test_action_yml.py",
    "test_locks.py",
    "test_log_floods.py",
    "test_periodic.py",
    "test_schema_migrations.py",
    "test_cli_export.py",
    "test_drift_pull_mode.py",
    "test_worker.py",
    "test_mlflow_source.py",
    "test_action.py",
)


@pytest.fixture(scope="session")
def github_fixtures() -> Path:
    """The directory of real GitHub payloads, REST examples and the OpenAPI description."""
    if not GITHUB_FIXTURES.is_dir():
        pytest.fail(f"GitHub fixtures not found in the repository: {GITHUB_FIXTURES}")
    return GITHUB_FIXTURES


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow modules first (in ``SLOW_MODULES``' order), the rest as collected."""
    rank = {name: n for n, name in enumerate(SLOW_MODULES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: order kept


def _refuse(what: str) -> Any:
    def refused(*args: object, **kwargs: object) -> NoReturn:
        raise RuntimeError(
            f"{what} in a test not marked `servers`: a module that starts a process or a "
            "server carries `pytestmark = pytest.mark.servers` (tests/conftest.py)"
        )

    return refused


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """No process or server while an unmarked test's fixtures are set up."""
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """No process or server while an unmarked test runs."""
    return (yield from _guarded(item))


def _guarded(item: pytest.Item) -> Generator[None, None, None]:
    if item.get_closest_marker("servers") is not None:
        return (yield)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", _refuse("subprocess.Popen"))
        patch.setattr(socket.socket, "listen", _refuse("socket.listen"))
        return (yield)
