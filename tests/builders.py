"""Runs, histories and gates built from plain values, for tests of the pure analysis: one
place instead of a near-copy per test file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from bot.core.models import Gate, History, HistoryStats, Op, Run

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def runs_of(
    summaries: Sequence[Mapping[str, float]],
    *,
    start: datetime = T0,
    every: timedelta = timedelta(days=1),
) -> list[Run]:
    """A finished run per summary, ``every`` apart from ``start``, ids ``r0``, ``r1``, …"""
    return [
        Run(id=f"r{i}", created_at=start + i * every, summary=dict(summary))
        for i, summary in enumerate(summaries)
    ]


def series_runs(values: Sequence[float], metric: str = "acc", **when: object) -> list[Run]:
    """:func:`runs_of` for one metric's values."""
    return runs_of([{metric: float(v)} for v in values], **when)  # type: ignore[arg-type]


def history_of(runs: Sequence[Run], source: str = "file:runs.jsonl") -> History:
    """``runs`` (all finished) as a history read from ``source``."""
    n = len(runs)
    stats = HistoryStats(total=n, finished=n, by_state={"finished": n})
    return History(runs=tuple(runs), stats=stats, source=source)


def limit_gate(
    metric: str,
    op: Op,
    literal: str,
    *,
    name: str | None = None,
    file: str = "ci/nightly.sh",
    line: int = 3,
) -> Gate:
    """The limit gate ``metric op literal`` (named ``METRIC`` unless ``name``)."""
    return Gate(
        name=name or metric.upper(),
        file=file,
        line=line,
        metric=metric,
        op=op,
        value=float(literal),
        literal=literal,
        start=0,
        end=len(literal),
    )
