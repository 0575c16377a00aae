"""Pytest fixtures for the fakes: GitHub, and a W&B project the Action's tests review.

Load from a conftest with ``pytest_plugins = ["tests.fakes.pytest_plugin"]``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.github_api import FakeGitHub, make_app_key
from tests.fakes.wandb_server import API_KEY, FakeWandb, nightly_run, serve


@pytest.fixture(scope="session")
def github_app_key() -> tuple[str, rsa.RSAPublicKey]:
    """One App key pair for the session: (private key PEM, public key)."""
    return make_app_key()


@pytest.fixture
def fake_github(github_app_key: tuple[str, rsa.RSAPublicKey]) -> Iterator[FakeGitHub]:
    """A running fake GitHub; at teardown it fails the test on any invalid response shape,
    unimplemented endpoint or handler crash."""
    private_pem, public_key = github_app_key
    with FakeGitHub(private_key=private_pem, public_key=public_key) as fake:
        yield fake
        fake.check()


@pytest.fixture
def async_ci_wandb() -> Iterator[tuple[FakeWandb, dict[str, str]]]:
    """A running fake W&B holding 30 runs of ``acme/gsm8k_fully_async_ci`` (the project the
    Action's example script names), and the W&B settings of a job that reads it."""
    fake = FakeWandb()
    for i in range(30):
        score = {"eval": {"all": {"avg_score": 0.45 + i / 1000}}, "_step": i}
        fake.add_run("acme", "gsm8k_fully_async_ci", nightly_run(i, summary=score))
    with serve(fake) as url:
        yield fake, {"WANDB_API_KEY": API_KEY, "WANDB_BASE_URL": url, "WANDB_ENTITY": "acme"}
