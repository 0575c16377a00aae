"""Test helper: a command run as a user runs it at a terminal, its stdout a pseudo-terminal
of a given size (``sys.stdout.isatty()`` is true in it), its output read back as plain text."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from bot.cli.main import app; app(prog_name='threshold-bot')"]
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def at_a_terminal(
    args: Sequence[str], *, cwd: Path, columns: int = 100, timeout: float = 300
) -> tuple[int, str]:
    """Run ``args`` in ``cwd`` with a terminal of ``columns`` as stdin, stdout and stderr;
    the exit status and what it printed, without escape sequences, with ``\\n`` newlines."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        list(args), cwd=cwd, env=env, stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the command closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    status = process.wait(timeout=timeout)
    text = b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")
    return status, _ESCAPES.sub("", text)
