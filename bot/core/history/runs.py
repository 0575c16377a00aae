"""What remote sources (W&B, MLflow) share: the run-fetcher interface and pure conversions."""

from __future__ import annotations

import math
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
    """The finite numeric metrics of one run and how many values were dropped."""

    metrics: dict[str, float]
    non_numeric: int
    non_finite: int


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


def numeric_summary(raw: Mapping[str, Any], summary_keys: Mapping[str, str]) -> Summary:
    """The finite numeric metrics of a raw summary.

    Keys starting with ``_`` (W&B internals such as ``_step``, ``_runtime``) are
    dropped unless ``summary_keys`` asks for them; ``summary_keys`` maps a metric
    name to the summary key holding its value, which is then also exposed under
    the metric name.  Booleans, strings, objects and nulls count as non-numeric;
    NaN and infinities as non-finite.
    """
    flat = flatten(raw)
    wanted = set(summary_keys.values())
    metrics: dict[str, float] = {}
    non_numeric = non_finite = 0
    for key, value in flat.items():
        if key.startswith("_") and key not in wanted:
            continue
        number = _number(value)
        if number is None:
            non_numeric += 1
        elif not math.isfinite(number):
            non_finite += 1
        else:
            metrics[key] = number
    for metric, key in summary_keys.items():
        if key in metrics:
            metrics[metric] = metrics[key]
    return Summary(metrics, non_numeric, non_finite)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an integer beyond a float's range: counted as non-finite
            return math.inf
    if isinstance(value, str) and value.lower() in {"nan", "inf", "-inf", "infinity", "-infinity"}:
        return float(value)  # JSON cannot carry NaN; some servers send it as text
    return None


def make_history(runs: Iterable[SourceRun], source: str, *, duplicates: int = 0) -> History:
    """Sort runs by ``created_at`` (ties by id) and count states and dropped values."""
    ordered = sorted(runs, key=lambda r: (r.run.created_at, r.run.id))
    states = Counter(r.run.state for r in ordered)
    stats = HistoryStats(
        total=len(ordered),
        finished=states.get("finished", 0),
        by_state=dict(sorted(states.items())),
        non_finite_values=sum(r.non_finite for r in ordered),
        non_numeric_values=sum(r.non_numeric for r in ordered),
        duplicate_ids=duplicates,
    )
    return History(runs=tuple(r.run for r in ordered), stats=stats, source=source)
