"""The run cache tables: runs of each remote history source, and when each was synced.

Runs are keyed by (source, run id), where the source key is a hash of the whole
``SourceSpec`` (filters and summary keys included), so changing a source's
configuration starts a fresh cache instead of mixing runs.  Functions here
read and write rows; the caller owns the transaction and commits.

Per-step series (``cached_series``: source, run id, metric) are kept beside the runs under
the same source key (``SourceSpec.series`` is not part of it).  A run's series are dropped
when the run changes or is removed, so they are read again once it finished anew.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from sqlalchemy import (
    DateTime,
    Index,
    Integer,
    String,
    Table,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.adapters.store.db import Base
from bot.adapters.store.portable import Clipped, Json, Key, clean
from bot.core.history.runs import SourceRun
from bot.core.history.series import RunSeries, Steps
from bot.core.models import Run, RunState, SourceSpec, as_utc

_CHUNK = 500  # ids per IN (...) clause, well under every database's bind limit
_T = TypeVar("_T")


class CachedRun(Base):
    """One run of one source, as last read from it."""

    __tablename__ = "cached_runs"
    __table_args__ = (Index("ix_cached_runs_source_created", "source", "created_at"),)

    source: Mapped[str] = mapped_column(Key(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(Key(255), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime())  # naive UTC
    state: Mapped[str] = mapped_column(String(16))
    name: Mapped[str | None] = mapped_column(Clipped(500), nullable=True)
    commit: Mapped[str | None] = mapped_column(Clipped(64), nullable=True)
    tags: Mapped[list[str]] = mapped_column(Json)
    summary: Mapped[dict[str, float]] = mapped_column(Json)
    non_numeric: Mapped[int] = mapped_column(Integer, default=0)
    non_finite: Mapped[int] = mapped_column(Integer, default=0)


class CachedSeries(Base):
    """One metric's per-step values in one cached run (``{}``: read, and it has none)."""

    __tablename__ = "cached_series"

    source: Mapped[str] = mapped_column(Key(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(Key(255), primary_key=True)
    metric: Mapped[str] = mapped_column(Key(500), primary_key=True)
    steps: Mapped[dict[str, float]] = mapped_column(Json)  # {"step": value}
    non_numeric: Mapped[int] = mapped_column(Integer, default=0)
    non_finite: Mapped[int] = mapped_column(Integer, default=0)


class CachedSourceRow(Base):
    """A cached source: its spec, readable name and last successful sync."""

    __tablename__ = "cached_sources"

    source: Mapped[str] = mapped_column(Key(64), primary_key=True)
    description: Mapped[str] = mapped_column(Clipped(500))
    spec: Mapped[dict[str, Any]] = mapped_column(Json)
    synced_at: Mapped[datetime] = mapped_column(DateTime())  # naive UTC


def source_key(spec: SourceSpec) -> str:
    """The cache key of a source: SHA-256 of its canonical JSON."""
    return hashlib.sha256(spec.key().encode()).hexdigest()


def _naive(value: datetime) -> datetime:
    return as_utc(value).replace(tzinfo=None)


SKIPPED = "skipped"  # the state column of a run kept only as a counted skip (its reason: tags)


def _values(item: SourceRun) -> dict[str, Any]:
    run = item.run
    if item.skipped:  # remembered so it is neither read again nor forgotten in the counts
        run = run.model_copy(update={"tags": (item.skipped,), "summary": {}})
    return {
        "created_at": _naive(run.created_at),
        "state": SKIPPED if item.skipped else run.state,
        "name": None if run.name is None else clean(run.name, 500),  # as the columns keep them
        "commit": None if run.commit is None else clean(run.commit, 64),
        "tags": list(run.tags),
        "summary": dict(run.summary),
        "non_numeric": item.non_numeric,
        "non_finite": item.non_finite,
    }


_FIELDS = ("created_at", "state", "name", "commit", "tags", "summary", "non_numeric", "non_finite")


def _chunks(items: Sequence[_T]) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def newest_created(session: Session, key: str) -> datetime | None:
    """``created_at`` of the newest cached run of a source (aware UTC), or None."""
    value = session.scalar(select(func.max(CachedRun.created_at)).where(CachedRun.source == key))
    return value.replace(tzinfo=UTC) if value is not None else None


def running_ids(session: Session, key: str) -> list[str]:
    """Ids of cached runs that were still running when last read."""
    query = select(CachedRun.run_id).where(CachedRun.source == key, CachedRun.state == "running")
    return sorted(session.scalars(query))


def cached_ids(session: Session, key: str) -> set[str]:
    """Every cached run id of a source."""
    return set(session.scalars(select(CachedRun.run_id).where(CachedRun.source == key)))


def count_runs(session: Session, key: str, states: Iterable[str] | None = None) -> int:
    """How many runs of a source are cached (in one of ``states``, if given)."""
    query = select(func.count()).select_from(CachedRun).where(CachedRun.source == key)
    if states is not None:
        query = query.where(CachedRun.state.in_(list(states)))
    return int(session.scalar(query) or 0)


def upsert_runs(session: Session, key: str, runs: Iterable[SourceRun]) -> dict[str, str | None]:
    """Insert new runs and update changed ones (bulk statements).

    Returns every inserted or changed run id with the state it had before (None: new).
    """
    items = {item.run.id: _values(item) for item in runs}
    ids = sorted(items)
    columns = [getattr(CachedRun, field) for field in _FIELDS]
    existing: dict[str, tuple[Any, ...]] = {}
    for chunk in _chunks(ids):
        query = select(CachedRun.run_id, *columns).where(
            CachedRun.source == key, CachedRun.run_id.in_(chunk)
        )
        existing.update((row[0], tuple(row[1:])) for row in session.execute(query))
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    changed: dict[str, str | None] = {}
    state_at = _FIELDS.index("state")
    for run_id in ids:
        values = items[run_id]
        old = existing.get(run_id)
        row = {"source": key, "run_id": run_id, **values}
        if old is None:
            inserts.append(row)
            changed[run_id] = None
        elif old != tuple(values[field] for field in _FIELDS):
            updates.append(row)
            changed[run_id] = old[state_at]
    if inserts:
        session.execute(insert(cast(Table, CachedRun.__table__)), inserts)  # Core: fast
    if updates:
        session.execute(update(CachedRun), updates)  # ORM bulk UPDATE by primary key
        _drop_series(session, key, [row["run_id"] for row in updates])
    return changed


def remove_runs(session: Session, key: str, ids: Iterable[str]) -> dict[str, str]:
    """Delete the given runs of a source; return each removed id with its state."""
    removed: dict[str, str] = {}
    for chunk in _chunks(sorted(set(ids))):
        where = (CachedRun.source == key, CachedRun.run_id.in_(chunk))
        query = select(CachedRun.run_id, CachedRun.state).where(*where)
        removed.update((run_id, state) for run_id, state in session.execute(query))
        session.execute(delete(CachedRun).where(*where))
    _drop_series(session, key, list(removed))
    return removed


def load_runs(session: Session, key: str) -> list[SourceRun]:
    """Every cached run of a source, oldest first."""
    query = (
        select(CachedRun.run_id, *(getattr(CachedRun, field) for field in _FIELDS))
        .where(CachedRun.source == key)
        .order_by(CachedRun.created_at, CachedRun.run_id)
    )
    return [
        SourceRun(
            Run.model_construct(  # validated before it was stored
                id=run_id,
                created_at=created_at.replace(tzinfo=UTC),
                name=name,
                state=cast(RunState, "crashed" if state == SKIPPED else state),
                commit=commit,
                tags=tuple(tags),
                summary=summary,
            ),
            non_numeric,
            non_finite,
            skipped=(tags[0] if tags else "unreadable") if state == SKIPPED else "",
        )
        for run_id, created_at, state, name, commit, tags, summary, non_numeric, non_finite in (
            session.execute(query)
        )
    ]


def mark_synced(session: Session, key: str, spec: SourceSpec, at: datetime) -> None:
    """Record a successful sync of a source."""
    row = session.get(CachedSourceRow, key)
    if row is None:
        row = CachedSourceRow(source=key)
        session.add(row)
    row.description = spec.describe()
    row.spec = spec.model_dump(mode="json", exclude_defaults=True, exclude={"series"})
    row.synced_at = _naive(at)


def synced_at(session: Session, key: str) -> datetime | None:
    """When a source was last synced successfully (aware UTC), or None."""
    row = session.get(CachedSourceRow, key)
    return row.synced_at.replace(tzinfo=UTC) if row is not None else None


# --------------------------------------------------------------------------- series


def _drop_series(session: Session, key: str, run_ids: Sequence[str]) -> None:
    for chunk in _chunks(sorted(run_ids)):
        where = (CachedSeries.source == key, CachedSeries.run_id.in_(chunk))
        session.execute(delete(CachedSeries).where(*where))


def missing_series(
    session: Session, key: str, run_ids: Sequence[str], metrics: Sequence[str]
) -> dict[str, list[str]]:
    """For each of ``run_ids`` (in their order) the ``metrics`` not cached; runs missing none
    are left out."""
    cached: set[tuple[str, str]] = set()
    for chunk in _chunks(list(run_ids)):
        query = select(CachedSeries.run_id, CachedSeries.metric).where(
            CachedSeries.source == key,
            CachedSeries.run_id.in_(chunk),
            CachedSeries.metric.in_(list(metrics)),
        )
        cached.update((run_id, metric) for run_id, metric in session.execute(query))
    missing = {r: [m for m in metrics if (r, m) not in cached] for r in run_ids}
    return {r: wanted for r, wanted in missing.items() if wanted}


def write_series(session: Session, key: str, run_id: str, series: RunSeries) -> None:
    """Store (or replace) the series read of one run."""
    where = (CachedSeries.source == key, CachedSeries.run_id == run_id)
    metrics = list(series)
    session.execute(delete(CachedSeries).where(*where, CachedSeries.metric.in_(metrics)))
    rows = [
        {
            "source": key,
            "run_id": run_id,
            "metric": metric,
            "steps": {str(step): value for step, value in steps.values.items()},
            "non_numeric": steps.non_numeric,
            "non_finite": steps.non_finite,
        }
        for metric, steps in series.items()
    ]
    if rows:
        session.execute(insert(cast(Table, CachedSeries.__table__)), rows)


def load_series(
    session: Session, key: str, run_ids: Sequence[str], metrics: Sequence[str]
) -> dict[str, RunSeries]:
    """The cached series of ``metrics`` of the given runs: run id -> metric -> steps."""
    series: dict[str, RunSeries] = {}
    for chunk in _chunks(list(run_ids)):
        query = select(
            CachedSeries.run_id,
            CachedSeries.metric,
            CachedSeries.steps,
            CachedSeries.non_finite,
            CachedSeries.non_numeric,
        ).where(
            CachedSeries.source == key,
            CachedSeries.run_id.in_(chunk),
            CachedSeries.metric.in_(list(metrics)),
        )
        for run_id, metric, steps, non_finite, non_numeric in session.execute(query):
            values = {int(step): value for step, value in steps.items()}
            series.setdefault(run_id, {})[metric] = Steps(values, non_finite, non_numeric)
    return series


def newest_finished_ids(session: Session, key: str, limit: int) -> list[str]:
    """Ids of a source's ``limit`` newest finished cached runs, newest first (as
    ``bot.core.history.series.newest_finished`` orders them)."""
    query = (
        select(CachedRun.run_id)
        .where(CachedRun.source == key, CachedRun.state == "finished")
        .order_by(CachedRun.created_at.desc(), CachedRun.run_id.desc())
        .limit(limit)
    )
    return list(session.scalars(query))


def prune_series(session: Session, key: str, keep: Sequence[str]) -> None:
    """Drop the cached series of a source's runs other than ``keep`` (those of older runs,
    no longer read)."""
    query = select(CachedSeries.run_id).where(CachedSeries.source == key).distinct()
    _drop_series(session, key, sorted(set(session.scalars(query)) - set(keep)))
