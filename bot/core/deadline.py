"""A wall-clock limit for one job, checked where the work can stop cleanly.

The worker runs a delivery's handlers inside ``within(seconds)``; long loops (files of a PR,
sources, metrics segmented) call ``check(what)``, which raises ``JobTimeout`` once the time
is up.  Python threads cannot be stopped from outside, so this is cooperative: every loop
whose length an outside input decides has a check, and inputs are size-bounded in between.
The limit is per thread (a ``ContextVar``); without ``within`` nothing is ever stopped.
Limits nest: every enclosing one still holds, and ``check`` raises the error of the first
one found passed (a ``stop`` given to ``within``, e.g. ``bot.core.budget``'s, else
``JobTimeout``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from bot.core.retry import PermanentError


@dataclass(frozen=True)
class _Limit:
    ends: float  # time.monotonic() when the job must stop
    stop: Callable[[str], Exception]  # the error raised then, given what was being done


_limits: ContextVar[tuple[_Limit, ...]] = ContextVar("job_deadline", default=())


class JobTimeout(PermanentError):
    """The job ran past its wall-clock limit and was stopped (not retried)."""


def _timeout(seconds: float) -> Callable[[str], Exception]:
    def stop(what: str) -> Exception:
        return JobTimeout(
            f"stopped after {seconds:g} s, the per-job limit (JOB_TIMEOUT_SECONDS), while {what}"
        )

    return stop


@contextmanager
def within(seconds: float, stop: Callable[[str], Exception] | None = None) -> Iterator[None]:
    """Run the block under a limit of ``seconds`` (and every enclosing one); ``stop(what)``:
    the error ``check`` raises once it has passed (default: ``JobTimeout``)."""
    limit = _Limit(ends=time.monotonic() + seconds, stop=stop or _timeout(seconds))
    token = _limits.set((*_limits.get(), limit))
    try:
        yield
    finally:
        _limits.reset(token)


def check(what: str) -> None:
    """Raise the error of a limit that has passed (naming ``what`` was being done), if any."""
    limits = _limits.get()
    if not limits:
        return
    now = time.monotonic()
    for limit in limits:
        if now > limit.ends:
            raise limit.stop(what)
