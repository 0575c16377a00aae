"""Shared test fixtures: paths to the shared GitHub fixtures and the repository root."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["tests.fakes.pytest_plugin"]

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
GITHUB_FIXTURES = SHARED / "fixtures" / "github"


@pytest.fixture(scope="session")
def github_fixtures() -> Path:
    """The directory of real GitHub payloads, schemas and the OpenAPI description."""
    if not GITHUB_FIXTURES.is_dir():
        pytest.fail(f"shared GitHub fixtures not found next to the repository: {GITHUB_FIXTURES}")
    return GITHUB_FIXTURES
