"""The drift watch's evaluations, kept per (repository, file) in this process, so that a
round where nothing changed does no analysis and leaves the store alone.

A file's evaluation (``FileDrift``) is kept with the key it was made under: the default
branch's head SHA, a digest of the config read there, and the version of each history its
gates read (``Evaluation.versions``).  A history file is read at the head, so the SHA says
its version; any other source (W&B, MLflow, workflow artifacts: through the run cache) is
fetched every round anyway, and its version is a digest of what the fetch returned (every
run's id, state, time, values), so a run added, finished, changed or deleted makes a new
key.  An evaluation whose history is unavailable for now (an outage) is not kept.  A kept
evaluation has no runs (``FileDrift.runs``) and no metric charts (``Review.metric_charts``,
which only a PR's report page draws): one that must be acted on is evaluated again, as
writing a rebaseline PR needs its runs.  A report is kept pickled (``Packed``: some 30 KB
for five gates, against some 400 KB of live models; made and read in this process only,
never stored or received) and unpickled only when asked for (``RepoWatch.drifts``, about
1 ms each).

``act`` is skipped only for a file whose evaluation is reused *and* whose item record is as
``act`` left it: the record's stamp (its ``updated_at``, set by every ``save``, read when
``act`` released its lease, ``bot.adapters.store.drift.release``) is compared with the
stamps of the repository's records, read in one query per repository (``stamps``; a record
under a lease never matches).  The store is what every process shares: a maintainer closing
the rebaseline PR (its ``pull_request.closed`` handled by another worker), a push merging a
rebaseline, a ``/rebaseline`` or a worker that died holding the lease all change the stamp
or hold the lease, whichever process handled them; invalidating this cache from the
handlers would reach only the handlers of this process.  A ``command`` or an ``only``
call always acts.

Bounded: ``CACHED_EVALUATIONS`` files and ``CACHED_EVALUATION_BYTES`` of pickled reports,
the least recently used dropped first.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, replace
from datetime import datetime

from bot.core.lru import Lru
from bot.features.drift.evaluate import FileDrift
from bot.features.drift.place import Acted

CACHED_EVALUATIONS = 16384  # files whose evaluation is kept (4 per repository of 4,096)
CACHED_EVALUATION_BYTES = 256 * 1024 * 1024  # of pickled reports (some 8,000 of 5 gates)

Key = tuple[str, str, tuple[tuple[str, str], ...]]  # head SHA, config digest, history versions


@dataclass(frozen=True)
class Packed:
    """A file's evaluation with a report, pickled (by this process, for itself only)."""

    file: str
    data: bytes

    def unpacked(self) -> FileDrift:
        """The evaluation (without runs and metric charts)."""
        drift = pickle.loads(self.data)  # bytes this process pickled itself
        assert isinstance(drift, FileDrift)
        return drift


def packed(drift: FileDrift) -> FileDrift | Packed:
    """``drift`` as it is kept: without runs, a report without metric charts, pickled."""
    if drift.report is None:
        return replace(drift, runs={})
    review = drift.report.review.model_copy(update={"metric_charts": ()})
    slim = replace(drift, report=drift.report.model_copy(update={"review": review}), runs={})
    return Packed(drift.file, pickle.dumps(slim, protocol=pickle.HIGHEST_PROTOCOL))


@dataclass(frozen=True)
class Kept:
    """One file's evaluation, its key, and how ``act`` last left its item."""

    key: Key
    drift: FileDrift | Packed  # a FileDrift without a report, else packed
    acted: Acted | None = None  # what the last ``act`` on it did (None: not acted on)

    @property
    def size(self) -> int:
        """The bytes it counts against ``CACHED_EVALUATION_BYTES``."""
        return len(self.drift.data) if isinstance(self.drift, Packed) else 0

    @property
    def stamp(self) -> datetime | None:
        """The item record's stamp as ``act`` left it (None: unknown: act again)."""
        if self.acted is None or self.acted.action not in QUIET:
            return None
        return self.acted.stamp

    def replayed(self) -> Acted:
        """What acting again would say: nothing changed."""
        done = self.acted
        assert done is not None  # only replayed when stamped
        if done.action == "dismissed":
            return Acted(done.file, "unchanged", detail="dismissed by a maintainer")
        number = done.number if done.action in ("opened", "updated", "unchanged") else None
        detail = done.detail if done.action == "unchanged" else ""
        return Acted(done.file, "unchanged", number, detail, stamp=done.stamp)


# outcomes that acting again on the same evaluation and record repeats as "unchanged"
# (not "forbidden": the permission may have been granted since; not "busy")
QUIET = frozenset({"opened", "updated", "closed", "unchanged", "dismissed"})


class Evaluations:
    """The kept evaluations, by (repository, file), the least recently used dropped first."""

    def __init__(
        self, size: int = CACHED_EVALUATIONS, max_bytes: int = CACHED_EVALUATION_BYTES
    ) -> None:
        self._items: Lru[tuple[str, str], Kept] = Lru(
            size, max_weight=max_bytes, weight=lambda kept: kept.size
        )

    def get(self, repo: str, path: str, key: Key) -> Kept | None:
        """The evaluation of ``path`` kept under ``key``, if that is the one kept."""
        found = self._items.peek((repo, path))
        if found is None or found.key != key:
            return None
        return self._items.get((repo, path))

    def put(self, repo: str, key: Key, drift: FileDrift, acted: Acted | None) -> None:
        """Keep ``drift`` (its runs dropped) under ``key``, with what ``act`` did; an outage
        is not kept (it is retried next round)."""
        if drift.outage:
            return
        self._items.put((repo, drift.file), Kept(key, packed(drift), acted))
