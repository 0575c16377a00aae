"""Window selection: last N runs having the metric, the current regime, runs since a date."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import numpy as np

from bot.core.analysis.windows import series_of, window_start
from bot.core.models import Run, WindowInfo, WindowSpec

T0 = datetime(2026, 6, 28, 12, tzinfo=UTC)


def make_runs(values: list[float | None], step: timedelta = timedelta(hours=12)) -> list[Run]:
    """Runs oldest first, ``step`` apart; None: the run lacks metric ``m``."""
    return [
        Run(
            id=f"r{i}",
            created_at=T0 + i * step,
            summary={"other": 1.0} if v is None else {"m": v, "other": 1.0},
        )
        for i, v in enumerate(values)
    ]


def select(
    runs: list[Run], metric: str, spec: WindowSpec, *, regime_start: datetime | None = None
) -> tuple[list[Run], WindowInfo]:
    """The runs of the window ``spec`` and its description, as the review selects them."""
    series = series_of(runs, metric)
    window = series.tail(window_start(series, spec, regime_start=regime_start))
    return [runs[int(i)] for i in window.index], window.info(spec, runs)


def test_series_skips_runs_without_the_metric() -> None:
    runs = make_runs([1.0, None, 3.0, None, 5.0])
    series = series_of(runs, "m")
    assert series.values.tolist() == [1.0, 3.0, 5.0]
    assert series.index.tolist() == [0, 2, 4]
    assert series.times.tolist() == [runs[i].created_at.timestamp() for i in (0, 2, 4)]


def test_last_counts_only_runs_having_the_metric() -> None:
    runs = make_runs([1.0, 2.0, None, 3.0, None, 4.0])
    window, info = select(runs, "m", WindowSpec(kind="last", runs=3))
    assert [r.id for r in window] == ["r1", "r3", "r5"]
    assert info == WindowInfo(
        kind="last", runs=3, first=runs[1].created_at, last=runs[5].created_at
    )


def test_last_with_fewer_runs_takes_all() -> None:
    runs = make_runs([1.0, None, 2.0])
    window, info = select(runs, "m", WindowSpec(kind="last", runs=20))
    assert [r.id for r in window] == ["r0", "r2"]
    assert info.runs == 2


def test_regime_window_starts_at_the_regime_start() -> None:
    runs = make_runs([1.0, 2.0, 3.0, None, 5.0, 6.0])
    start = runs[2].created_at
    window, info = select(runs, "m", WindowSpec(kind="regime"), regime_start=start)
    assert [r.id for r in window] == ["r2", "r4", "r5"]
    assert (info.kind, info.runs, info.first) == ("regime", 3, start)
    # without a detected change the current regime is the whole history
    everything, _ = select(runs, "m", WindowSpec(kind="regime"))
    assert len(everything) == 5


def test_since_is_inclusive_from_utc_midnight() -> None:
    # r0 28 Jun 12:00, r1 29 Jun 00:00, r2 29 Jun 12:00, ...
    runs = make_runs([1.0, 2.0, 3.0, 4.0])
    window, info = select(runs, "m", WindowSpec(kind="since", since=date(2026, 6, 29)))
    assert [r.id for r in window] == ["r1", "r2", "r3"]
    assert info.first == datetime(2026, 6, 29, tzinfo=UTC)


def test_since_compares_in_utc() -> None:
    # 29 Jun 01:00 at UTC+02:00 is 28 Jun 23:00 UTC: before the window
    plus_two = timezone(timedelta(hours=2))
    runs = [
        Run(id="a", created_at=datetime(2026, 6, 29, 1, tzinfo=plus_two), summary={"m": 1.0}),
        Run(id="b", created_at=datetime(2026, 6, 29, 3, tzinfo=plus_two), summary={"m": 2.0}),
    ]
    window, _ = select(runs, "m", WindowSpec(kind="since", since=date(2026, 6, 29)))
    assert [r.id for r in window] == ["b"]


def test_missing_metric_gives_an_empty_window() -> None:
    runs = make_runs([1.0, 2.0])
    window, info = select(runs, "absent", WindowSpec())
    assert window == []
    assert info == WindowInfo(kind="last", runs=0)


def test_window_start_on_an_empty_series() -> None:
    series = series_of([], "m")
    assert len(series) == 0
    assert window_start(series, WindowSpec(kind="since", since=date(2026, 1, 1))) == 0
    assert window_start(series, WindowSpec()) == 0
    assert series.values.dtype == np.float64
