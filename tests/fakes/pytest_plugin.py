"""Pytest fixtures for the fake GitHub.

Load from a conftest with ``pytest_plugins = ["tests.fakes.pytest_plugin"]``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.github_api import FakeGitHub, make_app_key


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
