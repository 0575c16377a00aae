"""Shared test fixtures: the repository root and the GitHub fixtures under ``tests/fixtures``."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = [
    "tests.fakes.pytest_plugin",
    "tests.browser_harness",
    "tests.services",
    "tests.clean_install",
]
# threshold files written as test modules (tests/fixtures/gates): data, not tests
collect_ignore_glob = ["fixtures/*"]

ROOT = Path(__file__).resolve().parent.parent
# Real webhook payloads, REST examples and the trimmed OpenAPI description (see SOURCES.md there).
GITHUB_FIXTURES = ROOT / "tests" / "fixtures" / "github"


@pytest.fixture(scope="session")
def github_fixtures() -> Path:
    """The directory of real GitHub payloads, REST examples and the OpenAPI description."""
    if not GITHUB_FIXTURES.is_dir():
        pytest.fail(f"GitHub fixtures not found in the repository: {GITHUB_FIXTURES}")
    return GITHUB_FIXTURES
