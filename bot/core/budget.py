"""Budgets: what one share of a periodic job may spend before it is cut and left for later.

A ``Budget`` is one scope's share (the drift watch: an installation's part of a round, and
one repository's part of that): ``Limits`` on working seconds, files read and bytes read.
A child budget's spending is charged to its parent as well, so a repository's reads count
against its installation's share, and a child never has more room than its parent has left.

Time is *working* time: what is spent inside ``enforced()`` or ``counted()``, not the time
since the budget was made (an installation whose turn comes late has lost nothing).  Inside
``enforced()`` the time left is also a ``bot.core.deadline`` limit, so the cooperative checks
deep in the work (parsers, the analysis) stop there with ``BudgetSpent``; between steps the
caller asks ``spent()``.  Files and bytes are charged by the caller after each read
(``charge``): a read is started only while there is room, so a scope may go over by its
last read (which is itself bounded, e.g. by ``MAX_THRESHOLD_FILE_BYTES``).

A budget belongs to one thread at a time.  Nothing here knows what is being read: what is
cut, and where it resumes, is the caller's (``bot.features.drift.rounds``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from bot.core import deadline
from bot.core.retry import PermanentError

Limit = Literal["seconds", "files", "bytes"]


@dataclass(frozen=True)
class Limits:
    """What one scope may spend; None: no limit on that."""

    seconds: float | None = None
    files: int | None = None
    bytes: int | None = None


class BudgetSpent(PermanentError):
    """A scope's budget ran out while ``what`` was being done: the work is cut there."""

    def __init__(self, scope: str, limit: Limit, reason: str, what: str) -> None:
        super().__init__(f"{scope}: {reason} spent while {what}")
        self.scope = scope  # the budget that ran out (the scope's own, or an enclosing one)
        self.limit = limit  # which of its limits
        self.reason = reason
        self.what = what


class Budget:
    """One scope's share: its ``Limits``, what it has spent, and its parent's."""

    def __init__(
        self,
        scope: str,
        limits: Limits,
        parent: Budget | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.scope = scope
        self.limits = limits
        self.parent = parent
        self.clock = clock
        self.seconds = 0.0  # working time spent (inside ``enforced``)
        self.files = 0
        self.bytes = 0

    def child(self, scope: str, limits: Limits) -> Budget:
        """A share of this budget, limited by ``limits`` too."""
        return Budget(scope, limits, parent=self, clock=self.clock)

    def charge(self, *, seconds: float = 0.0, files: int = 0, bytes: int = 0) -> None:
        """Count what was spent, here and in every enclosing budget."""
        budget: Budget | None = self
        while budget is not None:
            budget.seconds += seconds
            budget.files += files
            budget.bytes += bytes
            budget = budget.parent

    def _chain(self) -> Iterator[Budget]:
        budget: Budget | None = self
        while budget is not None:
            yield budget
            budget = budget.parent

    def _over(self, running: float = 0.0) -> BudgetSpent | None:
        """The first budget of the chain out of room (with ``running`` seconds not yet
        charged), as the error that says so; ``what`` is filled in by the caller."""
        for budget in self._chain():
            limits = budget.limits
            if limits.seconds is not None and budget.seconds + running >= limits.seconds:
                return BudgetSpent(budget.scope, "seconds", f"its {limits.seconds:g} s", "")
            if limits.files is not None and budget.files >= limits.files:
                return BudgetSpent(budget.scope, "files", f"its {limits.files} files", "")
            if limits.bytes is not None and budget.bytes >= limits.bytes:
                return BudgetSpent(budget.scope, "bytes", f"its {limits.bytes} bytes", "")
        return None

    def spent(self) -> BudgetSpent | None:
        """Why no more may be started here (this budget or an enclosing one is out of room),
        or None while there is room."""
        return self._over()

    def seconds_left(self) -> float | None:
        """The working time left here and in every enclosing budget (None: no time limit)."""
        left = [b.limits.seconds - b.seconds for b in self._chain() if b.limits.seconds is not None]
        return max(0.0, min(left)) if left else None

    @contextmanager
    def counted(self) -> Iterator[None]:
        """Run the block as working time of this budget, charged when it ends, but never
        stopped (work that must not be cut half-way, e.g. writing an issue)."""
        started = self.clock()
        try:
            yield
        finally:
            self.charge(seconds=self.clock() - started)

    @contextmanager
    def enforced(self) -> Iterator[None]:
        """Run the block as working time of this budget: charged when it ends, and stopped
        with ``BudgetSpent`` by ``bot.core.deadline.check`` once the time left is gone."""
        started = self.clock()
        left = self.seconds_left()

        def stop(what: str) -> Exception:
            over = self._over(running=self.clock() - started)
            if over is None:  # the deadline's clock ran ahead of this budget's
                return BudgetSpent(self.scope, "seconds", "its time", what)
            return BudgetSpent(over.scope, over.limit, over.reason, what)

        try:
            if left is None:
                yield
            else:
                with deadline.within(left, stop):
                    yield
        finally:
            self.charge(seconds=self.clock() - started)
