"""A bounded, thread-safe map that keeps the most recently used entries.

The drift watch and the GitHub client keep what they read in process memory (branch reads,
history files, evaluations, renderings, ETags); each kind is an ``Lru``, bounded by a count
of entries and, where values differ much in size, by their summed ``weight``.  Hand-written
(an ``OrderedDict`` under a lock) rather than ``cachetools``: that is in the ``app`` extra
only, has no cache bounded by count and weight at once, and needs a lock as well.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _weightless(_value: object) -> int:
    return 0


class Lru(Generic[K, V]):
    """At most ``size`` entries and ``max_weight`` of ``weight(value)`` summed (None: no
    weight bound); the least recently used are dropped first when either is passed.  A
    value heavier than ``max_weight`` alone is not kept."""

    def __init__(
        self,
        size: int,
        *,
        max_weight: int | None = None,
        weight: Callable[[V], int] = _weightless,
    ) -> None:
        self.size = size
        self.max_weight = max_weight
        self._weight = weight
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept under ``key`` (now the most recently used), or None."""
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def peek(self, key: K) -> V | None:
        """The value kept under ``key``, or None, leaving the order as it is."""
        with self._lock:
            found = self._items.get(key)
            return None if found is None else found[0]

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key`` as the most recently used, dropping the least
        recently used entries beyond the bounds."""
        weight = self._weight(value)
        with self._lock:
            old = self._items.pop(key, None)
            self._held -= 0 if old is None else old[1]
            self._items[key] = (value, weight)
            self._held += weight
            while self._items and (
                len(self._items) > self.size
                or (self.max_weight is not None and self._held > self.max_weight)
            ):
                _, (_, dropped) = self._items.popitem(last=False)
                self._held -= dropped

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
