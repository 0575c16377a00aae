"""Per-step series of runs: which metrics need them, their bounds, and reading them.

Golden-curve gates (``Gate.points``) and aggregated-expression gates (``Gate.aggregation``)
compare runs on their values at each step, ``Run.series`` (metric -> step -> value).  A
history file carries them in an optional ``series`` object per JSON line
(docs/history-format.md#per-step-series); a remote source reads them for the metrics a
``SourceSpec.series`` names, for its newest finished runs only.

Everything read is hostile and bounded: at most ``MAX_SERIES_METRICS`` series per history
row and ``MAX_SERIES_STEPS`` steps per series (more is a malformed line), steps are whole
numbers of at most ``MAX_STEP_DIGITS`` digits; a remote source reads the series of its
``MAX_SERIES_RUNS`` newest finished runs, the last ``MAX_REMOTE_STEPS`` steps of each.
Values that are not finite (``"nan"``, ``null``, ``"inf"``) are dropped and counted as
non-finite, other non-numbers as non-numeric, as for summary values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from bot.core.models import Gate, History, Run, SourceSpec

MAX_SERIES_METRICS = 100  # series in one history row; metrics one spec asks a remote source for
MAX_SERIES_STEPS = 100_000  # steps of one metric in one history row
MAX_STEP_DIGITS = 18  # a step is a whole number below 10**18
MAX_SERIES_RUNS = 200  # the newest finished runs of a remote source whose series are read
MAX_REMOTE_STEPS = 10_000  # a remote run's last steps scanned per metric
MAX_METRIC_CHARS = 500  # a longer metric name is never asked of a remote source

_NON_FINITE = frozenset({"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "-infinity"})


class BadSeries(ValueError):
    """A ``series`` object that breaks the format or its bounds (the line is malformed)."""


class Steps(NamedTuple):
    """One metric's values by step, and how many values were dropped."""

    values: dict[int, float]
    non_finite: int = 0
    non_numeric: int = 0


RunSeries = dict[str, Steps]
"""metric -> its steps, for one run."""


@runtime_checkable
class SeriesFetcher(Protocol):
    """A remote source that reads runs' per-step series."""

    def fetch_series(
        self, spec: SourceSpec, wanted: Mapping[str, Sequence[str]]
    ) -> Iterator[tuple[str, RunSeries]]:
        """For each run id of ``wanted`` (in its order) the series of the metrics listed for
        it; a run the source no longer has is left out."""
        ...


# --------------------------------------------------------------------------- what to read


def series_metrics(gates: Iterable[Gate]) -> tuple[str, ...]:
    """The metrics whose series the gates compare: curves and aggregations, not placeholders.

    Sorted; at most ``MAX_SERIES_METRICS`` (the others compare on summary values).
    """
    wanted = {
        g.metric
        for g in gates
        if (g.points or g.aggregation) and not g.ignored and len(g.metric) <= MAX_METRIC_CHARS
    }
    return tuple(sorted(wanted))[:MAX_SERIES_METRICS]


def with_series(spec: SourceSpec, gates: Iterable[Gate]) -> SourceSpec:
    """``spec`` asking for exactly the series the ``gates`` compare (none: none)."""
    metrics = series_metrics(gates)
    if metrics == spec.series:
        return spec
    return spec.model_copy(update={"series": metrics})


def requested(spec: SourceSpec) -> tuple[str, ...]:
    """The series a source reads for ``spec``: its ``series`` within the bounds (a spec may
    come from a config file), the metric names as ``series_metrics`` would keep them."""
    return tuple(m for m in spec.series if len(m) <= MAX_METRIC_CHARS)[:MAX_SERIES_METRICS]


def newest_finished(runs: Iterable[Run], limit: int = MAX_SERIES_RUNS) -> list[str]:
    """Ids of the ``limit`` newest finished runs, newest first (the runs whose series are read)."""
    finished = [r for r in runs if r.state == "finished"]
    finished.sort(key=lambda r: (r.created_at, r.id), reverse=True)
    return [r.id for r in finished[:limit]]


# --------------------------------------------------------------------------- values


def _value(value: object) -> tuple[float | None, bool]:
    """``(number, finite_or_absent)``: a finite number; ``(None, False)`` for a non-finite
    one (NaN, infinities, ``null``, their text); ``(None, True)`` for a non-number."""
    if value is None:
        return None, False
    if isinstance(value, bool):
        return None, True
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond a float's range
            return None, False
        return (number, True) if math.isfinite(number) else (None, False)
    if isinstance(value, str) and value.strip().lower() in _NON_FINITE:
        return None, False
    return None, True


def _steps(items: Iterable[tuple[int, object]]) -> Steps:
    values: dict[int, float] = {}
    non_finite = non_numeric = 0
    for step, raw in items:
        number, numeric = _value(raw)
        if number is not None:
            values[step] = number
        elif numeric:
            non_numeric += 1
        else:
            non_finite += 1
    return Steps(values, non_finite, non_numeric)


def _shown(metric: str) -> str:
    return repr(metric if len(metric) <= 60 else metric[:57] + "...")


def _step(metric: str, text: str) -> int:
    if not (0 < len(text) <= MAX_STEP_DIGITS and text.isascii() and text.isdigit()):
        raise BadSeries(
            f"series {_shown(metric)}: step {text[:30]!r} is not a whole number "
            f"(at most {MAX_STEP_DIGITS} digits)"
        )
    return int(text)


def read_series(raw: object) -> RunSeries:
    """The ``series`` object of a history row: ``{metric: {"step": value}}``.

    ``BadSeries`` when it is not an object of objects, a step is not a whole number, or it
    holds more than ``MAX_SERIES_METRICS`` series or a series more than ``MAX_SERIES_STEPS``
    steps.
    """
    if not isinstance(raw, dict):
        raise BadSeries(f"'series' must be an object, not {type(raw).__name__}")
    if len(raw) > MAX_SERIES_METRICS:
        raise BadSeries(f"'series' holds {len(raw)} metrics, more than {MAX_SERIES_METRICS}")
    series: RunSeries = {}
    for metric, steps in raw.items():
        if not isinstance(steps, dict):
            raise BadSeries(
                f"series {_shown(metric)} must be an object of step: value, "
                f"not {type(steps).__name__}"
            )
        if len(steps) > MAX_SERIES_STEPS:
            raise BadSeries(
                f"series {_shown(metric)} has {len(steps)} steps, more than {MAX_SERIES_STEPS}"
            )
        series[metric] = _steps((_step(metric, text), value) for text, value in steps.items())
    return series


def steps_from_rows(
    rows: Iterable[Mapping[str, Any]], key: str, limit: int = MAX_REMOTE_STEPS
) -> Steps:
    """The series of ``key`` in a remote run's history rows (each with its ``_step``).

    Rows without a whole, non-negative ``_step`` or without ``key`` are skipped; at most
    ``limit`` steps are kept (the first ``limit`` rows read).
    """
    items: list[tuple[int, object]] = []
    for row in rows:
        step = row.get("_step")
        if isinstance(step, float) and step.is_integer():
            step = int(step)
        if isinstance(step, bool) or not isinstance(step, int) or step < 0 or key not in row:
            continue
        items.append((step, row[key]))
        if len(items) >= limit:
            break
    return _steps(items)


def kept(
    read: Mapping[str, Mapping[int, float]], metrics: Sequence[str], limit: int = MAX_REMOTE_STEPS
) -> RunSeries:
    """The series of ``metrics`` in what a run's file held (``Run.series`` of an ``actions``
    artifact, read whole), each its last ``limit`` steps, as a remote source's are kept; a
    metric the run lacks is ``Steps({})`` (read, and it has none)."""
    series: RunSeries = {}
    for metric in metrics:
        steps = read.get(metric, {})
        series[metric] = Steps({step: steps[step] for step in sorted(steps)[-limit:]})
    return series


# --------------------------------------------------------------------------- histories


def values(series: RunSeries) -> dict[str, dict[int, float]]:
    """``Run.series`` of what was read: the kept values of each metric."""
    return {metric: steps.values for metric, steps in series.items()}


def attach(history: History, series: Mapping[str, RunSeries]) -> History:
    """``history`` with each run's series (run id -> metric -> steps) and the values dropped
    from them counted in its statistics."""
    ids = {r.id for r in history.runs}
    series = {run_id: read for run_id, read in series.items() if run_id in ids}
    if not series:
        return history
    runs = tuple(
        r.model_copy(update={"series": {**r.series, **values(series[r.id])}})
        if r.id in series
        else r
        for r in history.runs
    )
    read = [steps for by_metric in series.values() for steps in by_metric.values()]
    stats = history.stats.model_copy(
        update={
            "non_finite_values": history.stats.non_finite_values + sum(s.non_finite for s in read),
            "non_numeric_values": history.stats.non_numeric_values
            + sum(s.non_numeric for s in read),
        }
    )
    return history.model_copy(update={"runs": runs, "stats": stats})
