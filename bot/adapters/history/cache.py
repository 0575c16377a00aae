"""A ``HistorySource`` that keeps a remote source's runs in the SQLAlchemy store.

A sync asks the upstream only for what may have changed: runs created since the
newest cached one (``$gte``: the boundary run comes back and is deduplicated)
plus the cached runs that were still running.  Every page is read before
anything is written, and the write is one transaction, so a failed or partial
sync leaves the cache as it was.  Running runs are cached even when the spec
wants only finished ones, so that one finishing after a newer run was cached is
not missed.  Runs asked for by id that no longer come back (deleted, or no
longer matching) are dropped.  A full sync re-reads everything and drops cached
runs the source no longer has.  The cache key covers the whole spec, so changed
filters or summary keys start a fresh cache.

Per-step series (``SourceSpec.series``, not part of the key) are read by ``fetch`` for the
newest ``series_runs`` finished runs, once per run and metric: a finished run's history no
longer changes, and a run that changes (resumed, re-synced) has its series dropped and read
again.  Each run's series are written as soon as they are read, so a job stopped by its
deadline keeps what it read.  An upstream that reads a run's series with the run
(``SourceRun.series_read``: an ``actions`` artifact, which expires) has the series of
``spec.series`` kept by the sync that first reads the run, in the same transaction, for the
newest ``series_runs`` finished runs; later asks are read through ``fetch_series``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.settings import DEFAULT_MAX_ARTIFACT_BYTES
from bot.adapters.store import runs as store
from bot.core.history.runs import Progress, RunFetcher, SourceRun, make_history
from bot.core.history.series import (
    MAX_SERIES_RUNS,
    SeriesFetcher,
    attach,
    kept,
    newest_finished,
    requested,
)
from bot.core.models import History, SourceSpec


@dataclass(frozen=True)
class SyncResult:
    """What one sync of one source changed, counting only runs the spec serves.

    ``new`` runs were not served before (not cached, or a running run that
    finished for a finished-only spec); ``updated`` ones changed (state, summary);
    ``removed`` ones were deleted or left the spec's states; ``total`` is the
    number served afterwards.  ``error`` is set when the sync failed (the cache is
    then unchanged).  ``changed`` tells the re-check to re-review.
    """

    source: str
    new: int = 0
    updated: int = 0
    total: int = 0
    removed: int = 0
    error: str | None = None

    @property
    def changed(self) -> bool:
        """Whether reviews reading this source may now come out differently."""
        return self.error is None and (self.new + self.updated + self.removed) > 0


def tracking(spec: SourceSpec) -> SourceSpec:
    """``spec`` widened to running runs, so that a run still running at one sync and
    finished by the next is re-read by id (runs of other states are not served)."""
    if "running" in spec.states:
        return spec
    return spec.model_copy(update={"states": (*spec.states, "running")})


class CachedSource:
    """Serves histories from the run cache, syncing it from ``upstream`` first.

    ``resolve`` completes a spec before it is used (e.g. the server's default W&B
    entity), so the cache key and the history's name say what was actually read.
    ``series_runs``: how many of the newest finished runs get their series read;
    ``max_artifact_bytes``: what an ``actions`` fetcher put over it (``over``) may download.
    """

    def __init__(
        self,
        sessions: sessionmaker[Session],
        upstream: RunFetcher,
        resolve: Callable[[SourceSpec], SourceSpec] | None = None,
        *,
        series_runs: int = MAX_SERIES_RUNS,
        max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES,
    ) -> None:
        self.sessions = sessions
        self.upstream = upstream
        self.resolve = resolve or (lambda spec: spec)
        self.series_runs = series_runs
        self.max_artifact_bytes = max_artifact_bytes

    def over(self, upstream: RunFetcher) -> CachedSource:
        """The same store and resolution, runs read from ``upstream`` (an ``actions``
        source's fetcher, built per installation)."""
        return CachedSource(
            self.sessions,
            upstream,
            self.resolve,
            series_runs=self.series_runs,
            max_artifact_bytes=self.max_artifact_bytes,
        )

    def fetch(self, spec: SourceSpec) -> History:
        """Sync ``spec`` incrementally, then return every cached run of it, with the series
        of ``spec.series`` (read first where not cached)."""
        self.sync(spec)
        history = self.cached(spec)
        if not requested(spec):
            return history
        spec = self.resolve(spec)
        key = store.source_key(spec)
        targets = newest_finished(history.runs, self.series_runs)
        self.sync_series(spec, targets)
        with self.sessions() as session:
            series = store.load_series(session, key, targets, requested(spec))
        return attach(history, series)

    def sync_series(self, spec: SourceSpec, run_ids: Sequence[str]) -> int:
        """Read and cache the series of ``spec.series`` that ``run_ids`` lack (in that order);
        return how many runs were read.  An upstream that reads no series reads none.  Once
        runs were read, the series of runs other than ``run_ids`` are dropped (runs only
        get older: they are not read again)."""
        spec = self.resolve(spec)
        key = store.source_key(spec)
        if not requested(spec) or not isinstance(self.upstream, SeriesFetcher):
            return 0
        with self.sessions() as session:
            missing = store.missing_series(session, key, run_ids, requested(spec))
        read = 0
        for run_id, series in self.upstream.fetch_series(spec, missing) if missing else ():
            try:
                with self.sessions.begin() as session:
                    store.write_series(session, key, run_id, series)
            except IntegrityError:  # a concurrent fetch stored the same series first
                pass
            read += 1
        if read:
            with self.sessions.begin() as session:
                store.prune_series(session, key, run_ids)
        return read

    def cached(self, spec: SourceSpec) -> History:
        """The cached runs of ``spec`` without asking the upstream."""
        spec = self.resolve(spec)
        with self.sessions() as session:
            runs = store.load_runs(session, store.source_key(spec))
        served = (r for r in runs if r.skipped or r.run.state in spec.states)
        return make_history(served, spec.describe())

    def sync(
        self, spec: SourceSpec, *, full: bool = False, progress: Progress | None = None
    ) -> SyncResult:
        """Bring the cache of ``spec`` up to date; raise ``HistoryError`` on failure."""
        spec = self.resolve(spec)
        key = store.source_key(spec)
        with self.sessions() as session:
            empty = store.count_runs(session, key) == 0
            since = None if full or empty else store.newest_created(session, key)
            running = [] if full or empty else store.running_ids(session, key)
        runs = self.upstream.fetch_runs(
            tracking(spec), created_since=since, run_ids=running, progress=progress
        )
        try:
            return self._write(spec, key, runs, running, full)
        except IntegrityError:  # a concurrent sync inserted the same runs first
            return self._write(spec, key, runs, running, full)

    def _write(
        self,
        spec: SourceSpec,
        key: str,
        runs: list[SourceRun],
        asked: Sequence[str],
        full: bool,
    ) -> SyncResult:
        fetched = {item.run.id: item.run.state for item in runs}
        with self.sessions.begin() as session:
            gone = (
                store.cached_ids(session, key) - set(fetched) if full else set(asked) - set(fetched)
            )
            changed = store.upsert_runs(session, key, runs)
            removed = store.remove_runs(session, key, gone)
            self._keep_series(session, spec, key, runs)
            store.mark_synced(session, key, spec, datetime.now(UTC))
            session.flush()
            total = store.count_runs(session, key, spec.states)
        new, updated, dropped = tally(changed, removed, fetched, frozenset(spec.states))
        return SyncResult(spec.describe(), new, updated, total, dropped)

    def _keep_series(
        self, session: Session, spec: SourceSpec, key: str, runs: list[SourceRun]
    ) -> None:
        """Keep the series of ``spec.series`` that finished runs came with (the newest
        ``series_runs`` of them), then only those of the newest ``series_runs`` cached."""
        metrics = requested(spec)
        came = [
            item
            for item in runs
            if item.series_read and not item.skipped and item.run.state == "finished"
        ]
        if not metrics or not came:
            return
        came.sort(key=lambda item: (item.run.created_at, item.run.id), reverse=True)
        for item in came[: self.series_runs]:
            store.write_series(session, key, item.run.id, kept(item.run.series, metrics))
        session.flush()
        store.prune_series(session, key, store.newest_finished_ids(session, key, self.series_runs))


def tally(
    changed: Mapping[str, str | None],
    removed: Mapping[str, str],
    states: Mapping[str, str],
    served: frozenset[str],
) -> tuple[int, int, int]:
    """(new, updated, removed) as the spec sees them: only runs in ``served`` states count.

    ``changed`` maps written run ids to their previous state (None: not cached),
    ``removed`` deleted ids to their last state, ``states`` run ids to their state now.
    A running run that finishes is new to a finished-only spec; one that fails leaves it.
    """
    new = updated = dropped = 0
    for run_id, before in changed.items():
        was, now = before in served, states[run_id] in served
        new += now and not was
        updated += now and was
        dropped += was and not now
    dropped += sum(1 for state in removed.values() if state in served)
    return new, updated, dropped
