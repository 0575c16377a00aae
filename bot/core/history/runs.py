"""What remote sources (W&B, MLflow) share: the run-fetcher interface and pure conversions.

``read_summary`` is also how history files read a run's summary (``bot.core.history.formats``):
nested objects are flattened to ``a/b`` keys and numbers written as text are read as numbers,
both counted (docs/history-format.md#values-and-runs).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from bot.core.models import History, HistoryStats, Run, SourceSpec

Progress = Callable[[int, int | None], None]
"""Called as ``progress(runs_read, runs_total_or_None)`` while a source pages through runs."""


class SourceRun(NamedTuple):
    """A run read from a remote source, with how many summary values were set aside."""

    run: Run
    non_numeric: int = 0
    non_finite: int = 0
    flattened: int = 0
    numeric_strings: int = 0
    not_numbers: tuple[str, ...] = ()  # the summary keys of the values set aside
    skipped: str = ""  # why the run is left out of the history, counted (empty: it is not)
    # ``run.series`` is all the per-step series the run has (an ``actions`` artifact's file,
    # read whole): the run cache keeps those of ``SourceSpec.series`` at this first read
    series_read: bool = False


class RunFetcher(Protocol):
    """A remote source that reads all runs of a spec, or only recent and given ones."""

    def fetch_runs(
        self,
        spec: SourceSpec,
        *,
        created_since: datetime | None = None,
        run_ids: Sequence[str] = (),
        progress: Progress | None = None,
    ) -> list[SourceRun]:
        """Runs of ``spec``; with ``created_since``/``run_ids``, only runs created since
        then plus the runs with those ids, deduplicated by id."""
        ...


class Summary(NamedTuple):
    """The finite numeric metrics of one run, how many values were dropped (and under which
    keys), and how many numbers were read from nested objects or from text."""

    metrics: dict[str, float]
    non_numeric: int
    non_finite: int
    flattened: int = 0
    numeric_strings: int = 0
    not_numbers: tuple[str, ...] = ()  # the keys of the dropped values


def flatten(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested summary dicts with ``/`` (``{"eval": {"acc": 1}}`` → ``eval/acc``).

    W&B media and histogram objects (dicts with a ``_type``) are kept as one opaque
    value; a flat key wins over a nested one spelling the same path.
    """
    flat: dict[str, Any] = {}
    nested: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and "_type" not in value:
            nested.update(flatten(value, f"{name}/"))
        else:
            flat[name] = value
    return {**nested, **flat}


def read_summary(raw: Mapping[str, Any], skip: Callable[[str], bool] | None = None) -> Summary:
    """The finite numbers of a raw summary, nested objects flattened (:func:`flatten`).

    Numbers written as text (``"0.58"``, ``" 1e-3 "``) are read as numbers; booleans, other
    text, objects, lists and nulls count as non-numeric; NaN and infinities (also as text,
    and integers beyond a float's range) as non-finite.  Keys for which ``skip`` is true
    are left out and not counted.
    """
    metrics: dict[str, float] = {}
    non_numeric = non_finite = flattened = texts = 0
    dropped: list[str] = []
    nested = any(isinstance(v, Mapping) for v in raw.values())
    for key, value in (flatten(raw) if nested else raw).items():
        if skip is not None and skip(key):
            continue
        kind = type(value)
        if kind is float or kind is int:  # the common case, first
            number: float | None = _float(value)
        else:
            number = _number(value)
            texts += number is not None and kind is str and math.isfinite(number)
        if number is None:
            non_numeric += 1
            dropped.append(key)
        elif not math.isfinite(number):
            non_finite += 1
            dropped.append(key)
        else:
            metrics[key] = number
            flattened += nested and key not in raw
    return Summary(metrics, non_numeric, non_finite, flattened, texts, tuple(dropped))


def numeric_summary(raw: Mapping[str, Any], summary_keys: Mapping[str, str]) -> Summary:
    """The finite numeric metrics of a remote run's summary (:func:`read_summary`).

    Keys starting with ``_`` (W&B internals such as ``_step``, ``_runtime``) are
    dropped unless ``summary_keys`` asks for them; ``summary_keys`` maps a metric
    name to the summary key holding its value, which is then also exposed under
    the metric name.
    """
    wanted = set(summary_keys.values())
    summary = read_summary(raw, lambda key: key.startswith("_") and key not in wanted)
    for metric, key in summary_keys.items():
        if key in summary.metrics:
            summary.metrics[metric] = summary.metrics[key]
    return summary


_DECIMAL = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*")
_NON_FINITE = frozenset({"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "-infinity"})


def _float(value: float | int) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer beyond a float's range: counted as non-finite
        return math.inf


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _float(value)
    if isinstance(value, str):
        if _DECIMAL.fullmatch(value):
            return float(value)
        if value.strip().lower() in _NON_FINITE:
            return float(value)  # JSON cannot carry NaN; some servers send it as text
    return None


def make_history(runs: Iterable[SourceRun], source: str, *, duplicates: int = 0) -> History:
    """Sort runs by ``created_at`` (ties by id) and count states and dropped values (per
    summary key for the finished runs: ``History.not_numbers``); runs with a ``skipped``
    reason are left out and counted per reason."""
    every = list(runs)
    skipped = Counter(r.skipped for r in every if r.skipped)
    ordered = sorted(
        (r for r in every if not r.skipped), key=lambda r: (r.run.created_at, r.run.id)
    )
    states = Counter(r.run.state for r in ordered)
    stats = HistoryStats(
        total=len(ordered),
        finished=states.get("finished", 0),
        by_state=dict(sorted(states.items())),
        non_finite_values=sum(r.non_finite for r in ordered),
        non_numeric_values=sum(r.non_numeric for r in ordered),
        duplicate_ids=duplicates,
        flattened_values=sum(r.flattened for r in ordered),
        numeric_strings=sum(r.numeric_strings for r in ordered),
        skipped_runs=dict(sorted(skipped.items())),
    )
    not_numbers = Counter(
        key for r in ordered if r.run.state == "finished" for key in r.not_numbers
    )
    return History(
        runs=tuple(r.run for r in ordered),
        stats=stats,
        source=source,
        not_numbers=dict(not_numbers),
    )
