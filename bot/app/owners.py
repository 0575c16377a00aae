"""Lease holders: the name a worker process claims deliveries under, and whether it is alive.

A holder is named ``HOST:PID:START:SPACE``: the host name, the process id, the process's
start time (clock ticks since boot, from ``/proc/PID/stat``) and the pid space (the boot
id and the pid namespace, in which ``PID`` names that process).  A process on the same
host and in the same pid space can tell for sure that a holder is gone: no process has
that pid, or the one that has it started at another time (the pid was reused).  Only then
are its deliveries taken over at once; a holder on another host, in another container,
or whose name cannot be read, keeps its deliveries until their lease runs out.

Linux only (``/proc``); elsewhere the pid space is unknown and every holder waits for
its lease.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Owner:
    """A worker process as named in ``deliveries.claimed_by``."""

    host: str
    pid: int
    start: str  # start time in clock ticks since boot; a random token without /proc
    space: str  # "BOOT_ID/PID_NAMESPACE"; "" when unknown

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}:{self.start}:{self.space}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        """The owner named by ``text``; None if it is not such a name."""
        parts = text.rsplit(":", 3)
        if len(parts) != 4 or not parts[1].isdigit():
            return None
        host, pid, start, space = parts
        return cls(host=host, pid=int(pid), start=start, space=space)


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot); None if there is no such
    process, or only its exit status is left (a zombie)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name in parentheses may hold spaces
    return None if fields[0] in ("Z", "X") else fields[19]  # fields 3 and 22 of proc(5)


def _pid_space() -> str:
    try:
        boot = (PROC / "sys/kernel/random/boot_id").read_text().strip()
        namespace = os.stat(PROC / "self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot}/{namespace}"


@cache
def _this_process(pid: int) -> Owner:
    start = _start_time(pid) if _pid_space() else None
    return Owner(
        host=socket.gethostname(),
        pid=pid,
        start=start or uuid.uuid4().hex[:12],
        space=_pid_space() if start else "",
    )


def current() -> Owner:
    """This process (computed once per process id, so a forked child gets its own)."""
    return _this_process(os.getpid())


def is_gone(holder: str) -> bool:
    """Whether the process named ``holder`` is surely dead: it is on this host and pid space,
    and no process with its pid and start time exists.  False when it cannot be told."""
    owner, here = Owner.parse(holder), current()
    if owner is None or not here.space or (owner.host, owner.space) != (here.host, here.space):
        return False
    return _start_time(owner.pid) != owner.start
