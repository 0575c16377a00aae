"""The ``actions`` history source: a workflow's runs, their metrics read from an artifact.

``ActionsSource`` is a ``RunFetcher`` (the run cache, ``CachedSource``, wraps it, so what
was read is kept in the store: artifacts expire after their retention, and the cache is then
the only copy).  One sync costs:

* the default branch, when ``spec.branch`` is not given (``GET /repos/{o}/{r}``): 1 request;
* the workflow's runs on that branch created since the newest cached one: 1 request a page
  of 100 (a warm read with nothing new: that one request);
* only when some new completed run counts: the artifacts of ``spec.artifact`` across runs,
  newest first, paged until every wanted run's artifact was seen (or the listing reaches
  artifacts older than the oldest wanted run), then one download per run.

Only the default branch's own runs count (``bot.core.history.workflow_runs.counts``).  A run
still in progress is kept as running (re-read by id until it completes); a completed run
whose artifact is absent, expired (listed so, or 410), over ``max_bytes``, or unreadable
(``read_artifact``) is a counted, named skip, remembered like any run.  Runs created in the
same second as the newest cached run are taken as already read (GitHub's ``created``
filter has a second's precision; a nightly workflow never starts two runs in one second).
Archives are held in memory, at most ``max_bytes`` each, one at a time; nothing touches disk.

Per-step series (TensorBoard scalars, JSONL / CSV rows with a step column) come with each run
read (``SourceRun.series_read``): the run cache keeps those the spec asks for at that first
read, since the artifact expires.  ``fetch_series`` (``SeriesFetcher``) reads series asked
for later: one listing of the artifacts by name, then one download per run asked (the cache
asks at most ``MAX_SERIES_RUNS``), each run's last ``MAX_REMOTE_STEPS`` steps kept; a run
whose artifact is gone (expired, absent, unreadable) has none (``{}``: not asked again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from bot.adapters.github.actions import Artifact, ArtifactExpired, ArtifactTooLarge, WorkflowRun
from bot.adapters.github.api import RepoInfo
from bot.adapters.github.errors import (
    GitHubError,
    GitHubForbidden,
    GitHubNotFound,
    GitHubPermanentError,
)
from bot.core.history import artifacts
from bot.core.history.artifacts import Skipped, read_artifact
from bot.core.history.runs import Progress, SourceRun, make_history
from bot.core.history.series import RunSeries, kept
from bot.core.history.sources import BadHistory, HistoryNotFound, HistoryUnavailable
from bot.core.history.workflow_runs import counts, run_state
from bot.core.models import History, Run, SourceSpec

Reader = Callable[[bytes, SourceSpec, artifacts.WorkflowRun], "Run | Skipped"]


@runtime_checkable
class ActionsAPI(Protocol):
    """What the source needs of a GitHub client (``GitHubClient`` has it)."""

    def repository(self, repo: str) -> RepoInfo: ...

    def workflow_runs(
        self,
        repo: str,
        workflow: str,
        *,
        branch: str | None = None,
        created_since: datetime | None = None,
    ) -> list[WorkflowRun]: ...

    def workflow_run(self, repo: str, run_id: int) -> WorkflowRun | None: ...

    def artifacts_named(
        self, repo: str, name: str, *, older_than: datetime | None = None
    ) -> list[Artifact]: ...

    def download_artifact(self, repo: str, artifact_id: int, max_bytes: int) -> bytes: ...


class ActionsSource:
    """``RunFetcher`` (and, uncached, ``HistorySource``) over one GitHub client;
    ``spec.repo`` must be set (the caller resolves it to the repository reviewed);
    ``max_bytes``: ``MAX_ARTIFACT_BYTES``; ``spec.created_after`` narrows the listing."""

    def __init__(self, api: ActionsAPI, max_bytes: int, reader: Reader = read_artifact) -> None:
        self.api = api
        self.max_bytes = max_bytes
        self.reader = reader

    def fetch(self, spec: SourceSpec) -> History:
        """Every run of ``spec`` read afresh, no cache (the command line's reads)."""
        runs = self.fetch_runs(spec)
        served = (r for r in runs if r.skipped or r.run.state in spec.states)
        return make_history(served, spec.describe())

    def fetch_runs(
        self,
        spec: SourceSpec,
        *,
        created_since: datetime | None = None,
        run_ids: Sequence[str] = (),
        progress: Progress | None = None,
    ) -> list[SourceRun]:
        """The runs of ``spec`` (see the module docstring); ``HistoryError`` on failure."""
        repo, workflow, artifact = _required(spec)
        with _history_errors(spec):
            return self._fetch(spec, repo, workflow, artifact, created_since, run_ids, progress)

    def fetch_series(
        self, spec: SourceSpec, wanted: Mapping[str, Sequence[str]]
    ) -> Iterator[tuple[str, RunSeries]]:
        """The series ``wanted`` (run id -> metrics) of each run, read again from its artifact
        (see the module docstring); ``HistoryError`` on failure."""
        repo, _, artifact = _required(spec)
        with _history_errors(spec):
            asked = {int(i) for i in wanted if i.isdigit()}
            items: dict[int, Artifact] = {}
            for item in self.api.artifacts_named(repo, artifact) if asked else ():
                if item.run_id in asked and item.run_id not in items:
                    items[item.run_id] = item
            for run_id, metrics in wanted.items():
                listed = items.get(int(run_id)) if run_id.isdigit() else None
                yield run_id, kept(self._series(spec, repo, run_id, listed), metrics)

    def _series(
        self, spec: SourceSpec, repo: str, run_id: str, item: Artifact | None
    ) -> dict[str, dict[int, float]]:
        if item is None or item.expired or item.size > self.max_bytes:
            return {}
        try:
            archive = self.api.download_artifact(repo, item.id, self.max_bytes)
        except (ArtifactExpired, ArtifactTooLarge):
            return {}
        when = item.created_at or datetime.fromtimestamp(0, UTC)
        result = self.reader(archive, spec, artifacts.WorkflowRun(run_id, when, None, "finished"))
        return {} if isinstance(result, Skipped) else result.series

    def _fetch(
        self,
        spec: SourceSpec,
        repo: str,
        workflow: str,
        artifact: str,
        since: datetime | None,
        run_ids: Sequence[str],
        progress: Progress | None,
    ) -> list[SourceRun]:
        branch = spec.branch or self.api.repository(repo).default_branch
        floor = (
            max(d for d in (since, spec.created_after) if d)
            if since or spec.created_after
            else None
        )
        listed = self.api.workflow_runs(repo, workflow, branch=branch, created_since=floor)
        asked = {int(i) for i in run_ids if i.isdigit()}
        runs = {r.id: r for r in listed if since is None or r.created_at > since or r.id in asked}
        for run_id in asked - set(runs):  # still running when last read, now older than since
            again = self.api.workflow_run(repo, run_id)
            if again is not None:
                runs[again.id] = again
        mine = [
            r
            for r in runs.values()
            if counts(
                branch=r.head_branch,
                event=r.event,
                head_repo=r.head_repo,
                want_branch=branch,
                events=tuple(spec.events),
                repo=repo,
            )
        ]
        done = [r for r in mine if run_state(r.status, r.conclusion) != "running"]
        archives: dict[int, Artifact] = {}
        if done:
            oldest = min(r.created_at for r in done)
            wanted = {r.id for r in done}
            for item in self.api.artifacts_named(repo, artifact, older_than=oldest):
                if item.run_id in wanted and item.run_id not in archives:
                    archives[item.run_id] = item
        out: list[SourceRun] = []
        for read, run in enumerate(sorted(mine, key=lambda r: r.created_at), 1):
            out.append(self._read(spec, repo, run, archives.get(run.id)))
            if progress is not None:
                progress(read, len(mine))
        return out

    def _read(
        self, spec: SourceSpec, repo: str, run: WorkflowRun, item: Artifact | None
    ) -> SourceRun:
        state = run_state(run.status, run.conclusion)
        what = artifacts.WorkflowRun(str(run.id), run.created_at, run.head_sha, state, run.name)
        base = Run(
            id=what.id, created_at=what.created_at, state=state, commit=what.commit, name=what.name
        )
        if state == "running":
            return SourceRun(base)
        if item is None:
            return SourceRun(base, skipped="no artifact")
        if item.expired:
            return SourceRun(base, skipped="expired")
        if item.size > self.max_bytes:
            return SourceRun(base, skipped="too large")
        try:
            archive = self.api.download_artifact(repo, item.id, self.max_bytes)
        except ArtifactExpired:
            return SourceRun(base, skipped="expired")
        except ArtifactTooLarge:
            return SourceRun(base, skipped="too large")
        result = self.reader(archive, spec, what)
        if isinstance(result, Skipped):
            return SourceRun(base, skipped=result.reason)
        return SourceRun(result, series_read=True)


@contextmanager
def _history_errors(spec: SourceSpec) -> Iterator[None]:
    """GitHub's errors as the history's (``HistoryError``), naming the source."""
    try:
        yield
    except GitHubNotFound as exc:
        raise HistoryNotFound(f"{spec.describe()}: {exc}") from None
    except GitHubForbidden as exc:
        raise HistoryUnavailable(
            f"{spec.describe()}: GitHub refused ({exc}); the token needs actions: read"
        ) from None
    except GitHubPermanentError as exc:
        raise BadHistory(f"{spec.describe()}: {exc}") from None
    except GitHubError as exc:
        raise HistoryUnavailable(f"{spec.describe()}: {exc}") from None


def _required(spec: SourceSpec) -> tuple[str, str, str]:
    if spec.kind != "actions" or not (spec.repo and spec.workflow and spec.artifact):
        raise BadHistory(f"{spec.describe()}: an actions source needs repo, workflow and artifact")
    return spec.repo, spec.workflow, spec.artifact
