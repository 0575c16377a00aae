"""Which summary key a gate's metric reads, and the keys closest to a metric no run has.

Nested summaries are read as ``a/b`` keys (``bot.core.history.runs.flatten``), so a gate on
``eval.all.avg_score`` reads ``eval/all/avg_score`` when no run has the dotted key itself.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Set

from bot.core.models import Run

__all__ = [
    "closest_keys",
    "gate_key",
    "per_test_key",
    "resolve_key",
    "series_keys",
    "summary_keys",
]

CLOSE_KEYS = 3  # suggestions at most
CLOSE_CUTOFF = 0.6  # difflib's similarity ratio a suggestion needs


def summary_keys(runs: Iterable[Run]) -> frozenset[str]:
    """Every summary key of ``runs``."""
    keys: set[str] = set()
    for run in runs:
        keys.update(run.summary)
    return frozenset(keys)


def series_keys(runs: Iterable[Run]) -> frozenset[str]:
    """Every key of ``runs``' per-step series."""
    keys: set[str] = set()
    for run in runs:
        keys.update(run.series)
    return frozenset(keys)


def _path(key: str) -> str:
    return key.replace(".", "/")


def resolve_key(metric: str, keys: Set[str]) -> str:
    """The key of ``keys`` that ``metric`` reads: itself, else the one spelling the same path
    with ``/`` or ``.`` separators; ``metric`` when none does."""
    if metric in keys:
        return metric
    path = _path(metric)
    if path in keys:
        return path
    return next((k for k in sorted(keys) if _path(k) == path), metric)


def closest_keys(metric: str, keys: Iterable[str]) -> tuple[str, ...]:
    """The keys ending with ``/metric`` (a bare key read per test or per task: ``score`` ->
    ``test_bm25/score``), then those most like ``metric`` (difflib's ratio), best first:
    ``did you mean …?``."""
    keys = list(keys)
    suffix = "/" + _path(metric)
    ending = sorted(k for k in keys if _path(k).endswith(suffix))
    close = difflib.get_close_matches(metric, keys, n=CLOSE_KEYS, cutoff=CLOSE_CUTOFF)
    return tuple(dict.fromkeys([*ending, *close]))[:CLOSE_KEYS]


def per_test_key(metric: str, names: Iterable[str], keys: Set[str]) -> str | None:
    """The one key of ``keys`` ending with ``/metric`` whose other segments include one of
    ``names``, the names of the test checking the gate (``test_bm25/score`` or
    ``bm25/score`` for ``test_bm25``); None when none or several do."""
    wanted = set(names) - {""}
    suffix = "/" + _path(metric)
    found = [
        k
        for k in keys
        if _path(k).endswith(suffix) and wanted & set(_path(k)[: -len(suffix)].split("/"))
    ]
    return found[0] if len(found) == 1 else None


def gate_key(metric: str, summary: Set[str], series: Callable[[], Set[str]]) -> str:
    """The key a gate on ``metric`` reads: a ``summary`` key (:func:`resolve_key`), else a
    key of the per-step ``series`` (asked for only then), else ``metric`` itself."""
    key = resolve_key(metric, summary)
    return key if key in summary else resolve_key(metric, series())
