"""A wall-clock limit for one job, checked where the work can stop cleanly.

The worker runs a delivery's handlers inside ``within(seconds)``; long loops (files of a PR,
sources, metrics segmented) call ``check(what)``, which raises ``JobTimeout`` once the time
is up.  Python threads cannot be stopped from outside, so this is cooperative: every loop
whose length an outside input decides has a check, and inputs are size-bounded in between.
The limit is per thread (a ``ContextVar``); without ``within`` nothing is ever stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from bot.core.retry import PermanentError


@dataclass(frozen=True)
class _Limit:
    ends: float  # time.monotonic() when the job must stop
    seconds: float


_limit: ContextVar[_Limit | None] = ContextVar("job_deadline", default=None)


class JobTimeout(PermanentError):
    """The job ran past its wall-clock limit and was stopped (not retried)."""


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Run the block under a limit of ``seconds``."""
    token = _limit.set(_Limit(ends=time.monotonic() + seconds, seconds=seconds))
    try:
        yield
    finally:
        _limit.reset(token)


def check(what: str) -> None:
    """Raise ``JobTimeout`` (naming ``what`` was being done) if the current limit has passed."""
    limit = _limit.get()
    if limit is not None and time.monotonic() > limit.ends:
        raise JobTimeout(
            f"stopped after {limit.seconds:g} s, the per-job limit (JOB_TIMEOUT_SECONDS), "
            f"while {what}"
        )
