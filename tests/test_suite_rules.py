"""The suite's own rule (tests/conftest.py): a test not marked ``servers`` may start no
process and no listening server, so ``make test-fast`` never starts one."""

from __future__ import annotations

import socket
import subprocess

import pytest


def test_an_unmarked_test_may_not_start_a_process_or_listen() -> None:
    with pytest.raises(RuntimeError, match=r"subprocess\.Popen in a test not marked `servers`"):
        subprocess.run(["true"], check=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        with pytest.raises(RuntimeError, match=r"socket\.listen in a test not marked `servers`"):
            sock.listen()


@pytest.mark.servers
def test_a_marked_test_may() -> None:
    assert subprocess.run(["true"], check=True).returncode == 0
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert sock.getsockname()[1] > 0
