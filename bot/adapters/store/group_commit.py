"""Group commit: concurrent writes from the event loop share one transaction.

``GroupCommit.submit`` queues an item and waits for its result.  The first item
schedules a batch at the end of the current turn of the event loop, so every
request parsed in that turn (a burst of webhooks arrives together) is stored by one
call of ``store`` (one transaction, one commit) instead of one each; whatever
arrives while a batch is being stored makes the next batch.  Each caller gets its
result only once its batch is committed: "answered" still means "stored".

With an ``executor`` (one thread), ``store`` runs there and the loop keeps parsing
the requests still arriving meanwhile (SQLite releases the interpreter lock while
it writes): about 10 % off the p99 of a burst in ``bench/bench_webhook.py``.
Without one, it runs on the loop.

``after`` (optional) gets the stored items and their results off the answer path:
it runs on the loop once the answers of the batch are out and no batch is waiting
(the webhook enqueues the jobs there; a job lost then is recovered from the store).

A caller that stops waiting (its ``submit`` cancelled, e.g. by a timeout) before its
batch is handed to ``store`` is left out of it: what was answered as not stored is
not stored behind the caller's back.  Once handed over, an item is stored or not
as the batch goes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    """Batches the items ``submit``-ted in one turn of the event loop into one ``store`` call."""

    def __init__(
        self,
        store: Callable[[list[T]], Sequence[R]],
        after: Callable[[list[tuple[T, R]]], object] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self._store = store
        self._after = after
        self._executor = executor
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._stored: list[tuple[T, R]] = []
        self._busy = False  # a batch is being stored (or scheduled to be)
        self._handing = False  # a hand-on is scheduled
        self.batches = 0  # calls of ``store`` so far

    async def submit(self, item: T) -> R:
        """Store ``item`` with the others of this turn; return its result once committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._waiting.append((item, future))
        if not self._busy:
            self._busy = True
            loop.call_soon(self._flush, loop)
        return await future

    def flush_after(self) -> None:
        """Run ``after`` on everything stored and not yet handed on (at shutdown)."""
        stored, self._stored = self._stored, []
        if stored and self._after is not None:
            try:
                self._after(stored)
            except Exception:
                log.exception("after-commit step failed")

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = [(item, future) for item, future in self._waiting if not future.cancelled()]
        self._waiting = []
        if not batch:  # every caller gave up: nothing to store
            self._busy = False
            return
        items = [item for item, _ in batch]
        self.batches += 1
        if self._executor is None:
            try:
                results = self._checked(items)
            except Exception as exc:
                self._settle(loop, batch, None, exc)
            else:
                self._settle(loop, batch, results, None)
            return
        job = loop.run_in_executor(self._executor, self._checked, items)
        job.add_done_callback(
            lambda done: (
                self._settle(loop, batch, None, done.exception())
                if done.exception() is not None
                else self._settle(loop, batch, done.result(), None)
            )
        )

    def _checked(self, items: list[T]) -> list[R]:
        results = list(self._store(items))
        if len(results) != len(items):
            raise RuntimeError(f"store returned {len(results)} results for {len(items)}")
        return results

    def _settle(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[T, asyncio.Future[R]]],
        results: list[R] | None,
        error: BaseException | None,
    ) -> None:
        for i, (_, future) in enumerate(batch):
            if future.cancelled():
                continue
            if results is None:
                future.set_exception(error or RuntimeError("store failed"))
            else:
                future.set_result(results[i])
        if results is not None:
            self._stored += zip((item for item, _ in batch), results, strict=True)
            if self._after is not None and not self._handing:
                self._handing = True
                loop.call_soon(self._hand_on)  # queued behind the callers, who answer first
        if self._waiting:  # what arrived while this batch was stored
            if self._executor is None:
                loop.call_soon(self._flush, loop)
            else:
                self._flush(loop)
        else:
            self._busy = False

    def _hand_on(self) -> None:
        self._handing = False
        if not self._waiting:  # else the batch due next schedules it again
            self.flush_after()
