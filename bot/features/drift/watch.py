"""The drift watch of one repository (``watch_repository``); the round over every
installation that calls it is ``bot.features.drift.rounds``.

For one repository (in a round, and for a ``push`` to the default branch that touches a
threshold, config or history file): the default branch's head SHA (one request), its
config and file list, then per file: read (cached per SHA, ``bot.features.drift.read``), its
histories (W&B and MLflow through the run cache; history files read at the head, cached per
SHA), ``Evaluation.file`` and ``act``; then, when the call visited every file, the
``finish`` step of its options (the dashboard: ``bot.features.dashboard.write``).  A
``Budget`` given (the round's) cuts the work at a file, which the next call resumes from
(``start``): a cut call runs no ``finish``; after a handler's ``only`` or ``command`` call,
``finish_now`` watches the repository again for it.  A file's evaluation is kept per head
SHA, config and history versions (``bot.features.drift.cache``): with warm caches and
nothing new, a repository costs one GitHub request (the head), one store query (its item
records' stamps), no analysis and no ``act``.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import GitHubAPI, RepoInfo
from bot.adapters.history.actions_source import ActionsAPI
from bot.adapters.locks import Locks
from bot.adapters.settings import Settings
from bot.adapters.store import drift as records
from bot.core.budget import Budget, BudgetSpent, Limits
from bot.core.commands import Command
from bot.core.config import RepoConfig
from bot.core.history.sources import HistoryFactory, HistorySource
from bot.core.lru import Lru
from bot.core.models import History, SourceSpec, ThresholdFile
from bot.features.drift.cache import Evaluations, Key, Packed
from bot.features.drift.evaluate import Evaluation, FileDrift
from bot.features.drift.items import act
from bot.features.drift.place import Acted, Place
from bot.features.drift.read import BranchCache, BranchFiles, list_branch, read_file
from bot.features.review.pull import HistoryRouter, repo_history
from bot.features.review.recheck import PullBusy, review_and_track
from bot.features.review.report import ReportOptions

log = logging.getLogger(__name__)

CACHED_HISTORIES = 256  # history files kept per process (by repository, SHA and path)


@dataclass(frozen=True)
class WatchOptions:
    """The operator's bounds on a watch."""

    max_bytes: int  # per threshold file (MAX_THRESHOLD_FILE_BYTES)
    locks: Locks  # the per-PR locks of the reviews it runs (bot.adapters.locks)
    max_files: int = 50  # threshold files per repository
    lease_seconds: float = 120.0  # how long a worker holds a file's record
    min_rate_remaining: int = 200  # GitHub requests an installation keeps for webhooks
    owner: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    reports: ReportOptions | None = None  # the interactive reports of the PRs it reviews
    repository: Limits = field(
        default_factory=Limits
    )  # one repository's share of a round (bot.core.budget)
    installation: Limits = field(default_factory=Limits)
    finish: Finish | None = None  # the step after every file was visited (the dashboard)

    @classmethod
    def of(cls, settings: Settings, locks: Locks, finish: Finish | None = None) -> WatchOptions:
        """The options ``settings`` set, reviewing under ``locks``, with ``finish``."""
        return cls(
            max_bytes=settings.max_threshold_file_bytes,
            locks=locks,
            max_files=settings.drift_max_files,
            lease_seconds=settings.lease_seconds,
            min_rate_remaining=settings.drift_min_rate_remaining,
            reports=ReportOptions.of(settings),
            repository=Limits(
                seconds=settings.drift_repository_seconds, bytes=settings.drift_repository_bytes
            ),
            installation=Limits(
                seconds=settings.drift_installation_seconds,
                bytes=settings.drift_installation_bytes,
            ),
            finish=finish,
        )


@dataclass(frozen=True)
class Visited:
    """A repository whose every threshold file a watch visited: what ``Finish`` gets."""

    gh: GitHubAPI
    sessions: sessionmaker[Session]
    installation_id: int
    info: RepoInfo
    branch: BranchFiles  # the default branch as read at its head
    evaluated: tuple[FileDrift | Packed, ...]  # every file evaluated, as kept: see ``drifts``
    budget: Budget  # the repository's (a step's requests are charged to it, never cut)
    owner: str  # this worker's lease owner id
    lease_seconds: float
    fresh: bool = True  # whether anything was evaluated anew
    stamps: Mapping[str, datetime] | None = None  # the drift records' stamps, if read

    @property
    def drifts(self) -> tuple[FileDrift, ...]:
        """Every file's evaluation (a reused one is unpickled here: about 1 ms a file)."""
        return tuple(d if isinstance(d, FileDrift) else d.unpacked() for d in self.evaluated)


@runtime_checkable
class Finish(Protocol):
    """A step after a watch visited every file of a repository (``bot.features.dashboard``
    injects the dashboard's, so the drift watch does not depend on it)."""

    def wanted(self, config: RepoConfig) -> bool:
        """Whether the step runs for the repository of ``config`` (even with ``drift.mode:
        off``: then its files are evaluated for it alone)."""
        ...

    def __call__(self, visited: Visited) -> str:
        """Run it; what it did, in a few words ("": nothing)."""
        ...


def handler_options(settings: Settings, locks: Locks, step: object, delivery: str) -> WatchOptions:
    """The options of a watch a webhook handler runs: the App's, with ``step`` as its
    ``finish`` when it is one (``HandlerContext.finish``, injected by the App), and a lease
    owner of its own (this process's, then ``delivery``), so that a round of this process and
    the handler never both hold a record's lease."""
    finish = step if isinstance(step, Finish) else None
    options = WatchOptions.of(settings, locks, finish)
    return replace(options, owner=f"{options.owner}:{delivery}")


@dataclass(frozen=True)
class RepoWatch:
    """What the watch did for one repository."""

    repo: str
    acted: tuple[Acted, ...] = ()
    problem: str = ""  # the repository could not be watched (GitHub failed)
    cut: BudgetSpent | None = None  # a budget ran out before every file was visited
    resume: str = ""  # then: the file the next round starts at
    evaluated: tuple[FileDrift | Packed, ...] = ()  # as kept: read them as ``drifts``
    fresh: bool = False  # whether a file was evaluated anew in this call
    finished: str = ""  # what the ``finish`` step did ("": nothing)

    @property
    def drifts(self) -> tuple[FileDrift, ...]:
        """Every file's evaluation visited in this call, fresh or reused (a reused one has no
        runs nor metric charts, and is unpickled here: about 1 ms a file)."""
        return tuple(d if isinstance(d, FileDrift) else d.unpacked() for d in self.evaluated)


@dataclass(frozen=True)
class Cut:
    """Work a round's budget cut; the next round resumes it."""

    scope: Literal["repository", "installation"]  # whose budget ran out
    installation_id: int
    repo: str  # the repository cut (an installation's: the first one not visited)
    resume: str  # the file of ``repo`` the next round starts at ("": its first)
    reason: str


@dataclass(frozen=True)
class WatchReport:
    """What one round did."""

    repositories: tuple[RepoWatch, ...] = ()
    stopped_early: tuple[int, ...] = ()  # installations left for the next round (rate limit)
    failed: tuple[str, ...] = ()  # installations whose repositories could not be listed
    cut: tuple[Cut, ...] = ()  # what the budgets cut (resumed next round)

    @property
    def acted(self) -> list[Acted]:
        """Every file's outcome, in order."""
        return [a for r in self.repositories for a in r.acted]


class _FileHistories:
    """History files read from repositories, kept per (repository, SHA, source)."""

    def __init__(self, size: int = CACHED_HISTORIES) -> None:
        self._items: Lru[tuple[str, str, str], History] = Lru(size)

    def source(self, gh: GitHubAPI, repo: str, sha: str) -> HistorySource:
        """A source reading ``repo``'s history files at ``sha`` through this cache."""
        return _CachedFiles(self, repo_history(gh, repo, sha), repo, sha)

    def fetch(self, files: HistorySource, key: tuple[str, str, str], spec: SourceSpec) -> History:
        """The history kept under ``key``, else read from ``files`` and kept."""
        found = self._items.get(key)
        if found is not None:
            return found
        history = files.fetch(spec)
        self._items.put(key, history)
        return history


@dataclass(frozen=True)
class _CachedFiles:
    """One repository's history files at one SHA, read through ``_FileHistories``."""

    cache: _FileHistories
    files: HistorySource
    repo: str
    sha: str

    def fetch(self, spec: SourceSpec) -> History:
        return self.cache.fetch(self.files, (self.repo, self.sha, spec.model_dump_json()), spec)


BRANCHES = BranchCache()
HISTORIES = _FileHistories()
EVALUATIONS = Evaluations()


def watch_repository(
    gh: GitHubAPI,
    sessions: sessionmaker[Session],
    installation_id: int,
    info: RepoInfo,
    remote: HistoryFactory | None,
    options: WatchOptions,
    *,
    only: str | None = None,
    command: Command | None = None,
    budget: Budget | None = None,
    start: str = "",
) -> RepoWatch:
    """Watch one repository (only the file ``only`` when given; ``command``: a maintainer's
    ``/rebaseline`` on its issue).  ``remote`` must already be limited to what the
    installation may read.

    With a ``budget`` (a round's share for this repository), the files are visited from
    ``start`` on (in path order, then from the first), each read and evaluated only while the
    budget has room; the first file left when it runs out is the ``RepoWatch.resume`` of a
    cut.  A file the repository's own budget cuts twice in a row, as the first one visited,
    is skipped (so a round always gets past it)."""
    repo = info.full_name
    budget = budget or Budget(f"repository {repo}", Limits())
    with budget.counted():
        sha = gh.branch_head(repo, info.default_branch)
    if sha is None:
        return RepoWatch(repo, problem=f"no branch {info.default_branch}")
    branch = BRANCHES.get(repo, sha)
    if branch is None:
        try:
            with budget.enforced():
                branch = list_branch(
                    gh,
                    repo,
                    info.default_branch,
                    sha,
                    max_bytes=options.max_bytes,
                    max_files=options.max_files,
                )
        except BudgetSpent as exc:
            return RepoWatch(repo, cut=exc, resume=start)
        BRANCHES.put(branch)
    settings = branch.config.drift
    finish = options.finish if only is None and command is None else None
    if finish is not None and not finish.wanted(branch.config):
        finish = None
    if settings.mode == "off" and command is None and finish is None:
        return RepoWatch(repo)
    paths = [p for p in branch.paths if only is None or p == only]
    evaluation = _Evaluating(gh, repo, branch, remote)
    stamps: dict[str, datetime] | None = None  # the item records', read once when needed
    acted: list[Acted] = []
    drifts: list[FileDrift | Packed] = []

    def done(cut: BudgetSpent | None = None, resume: str = "") -> RepoWatch:
        drifted = tuple(drifts)
        return RepoWatch(
            repo, tuple(acted), cut=cut, resume=resume, evaluated=drifted, fresh=evaluation.fresh
        )

    for index, path in enumerate(rotated(paths, start)):
        over = budget.spent()  # files and bytes limit reads; what is read here costs time
        if over is not None and (over.limit == "seconds" or path not in branch.read):
            return done(cut=over, resume=path)
        key: Key | None = None
        try:
            with budget.enforced():
                if path not in branch.read:
                    branch, size = read_file(gh, branch, path, max_bytes=options.max_bytes)
                    BRANCHES.put(branch)
                    budget.charge(files=1, bytes=size)
                found = branch.file(path)
                drift = None
                if found is not None:
                    key = evaluation.key(found)
                    kept = None if key is None else EVALUATIONS.get(repo, path, key)
                    if kept is not None and only is None and command is None:
                        if kept.stamp is not None and isinstance(kept.drift, Packed):
                            if stamps is None:
                                stamps = records.stamps(sessions, repo)
                            if stamps.get(path) == kept.stamp:  # its item is as act left it
                                drifts.append(kept.drift)
                                acted.append(kept.replayed())
                                continue
                        if isinstance(kept.drift, FileDrift):  # no report: act skips it
                            drift = kept.drift
                    if drift is None:
                        drift = evaluation.file(found)
        except BudgetSpent as exc:
            if index == 0 and path == start and exc.scope == budget.scope:
                why = f"not evaluated within the repository's budget ({exc.reason}): skipped"
                log.warning("drift watch: %s: %s %s", repo, path, why)
                acted.append(Acted(path, "skipped", detail=why))
                continue
            return done(cut=exc, resume=path)
        if path in branch.unreadable:
            why = branch.unreadable[path]
            log.warning("drift watch: %s: %s not evaluated: %s", repo, path, why)
            acted.append(Acted(path, "skipped", detail=why))
            continue
        if drift is None:
            continue  # no gates in it
        drifts.append(drift)
        if drift.report is None:
            log.warning("drift watch: %s: %s not evaluated: %s", repo, path, drift.problem)
        with budget.counted():  # an item is never cut half-written
            outcome = act(
                _place(gh, sessions, installation_id, info, branch, options, remote),
                drift,
                settings,
                command,
            )
        acted.append(outcome)
        if key is not None:
            EVALUATIONS.put(repo, key, drift, outcome)
    if finish is None:
        return done()
    visited = Visited(
        gh,
        sessions,
        installation_id,
        info,
        branch,
        tuple(drifts),
        budget,
        owner=options.owner,
        lease_seconds=options.lease_seconds,
        fresh=evaluation.fresh,
        stamps=stamps,
    )
    return replace(done(), finished=finish(visited))


def finish_now(
    gh: GitHubAPI,
    sessions: sessionmaker[Session],
    installation_id: int,
    info: RepoInfo,
    remote: HistoryFactory | None,
    options: WatchOptions,
) -> str:
    """After a handler acted on part of a repository (an ``only`` or ``command`` watch, a
    dashboard box): the repository watched again as a round does, so that its ``finish`` step
    (the dashboard) shows what was done at once; what the step did ("": nothing, or no step).

    What was just acted on is replayed from its kept evaluation (its record is as ``act`` left
    it), so with warm caches this costs the head read (a conditional one: a 304 is free of rate
    limit), the history versions and one store query, and the step writes only when what it
    shows changed.  A failure is logged, never raised: the next round writes it."""
    if options.finish is None:
        return ""
    try:
        done = watch_repository(gh, sessions, installation_id, info, remote, options)
    except Exception:
        log.exception("drift watch: %s: the finish step after a handler failed", info.full_name)
        return ""
    if done.finished:
        log.info("drift watch: %s: %s", info.full_name, done.finished)
    return done.finished


class _Evaluating:
    """One call's evaluation of a branch, made on first use (a warm round needs none for
    files whose histories are all read at the head)."""

    def __init__(
        self, gh: GitHubAPI, repo: str, branch: BranchFiles, remote: HistoryFactory | None
    ) -> None:
        self._gh, self._repo, self._branch, self._remote = gh, repo, branch, remote
        self._evaluation: Evaluation | None = None
        self.fresh = False  # a file was evaluated

    @property
    def evaluation(self) -> Evaluation:
        if self._evaluation is None:
            gh, repo = self._gh, self._repo
            history = HistoryRouter(
                HISTORIES.source(gh, repo, self._branch.sha),
                self._remote,
                repo=repo,
                actions=gh if isinstance(gh, ActionsAPI) else None,
            )
            self._evaluation = Evaluation(self._branch.config, history)
        return self._evaluation

    def key(self, tf: ThresholdFile) -> Key | None:
        """The key ``tf``'s evaluation is kept under (None: not kept, an outage)."""
        remote = any(
            g.source is not None and g.source.kind != "file" and not g.ignored for g in tf.gates
        )
        versions = self.evaluation.versions(tf) if remote else ()
        if versions is None:
            return None
        return (self._branch.sha, self._branch.config_digest, versions)

    def file(self, tf: ThresholdFile) -> FileDrift:
        self.fresh = True
        return self.evaluation.file(tf)


def rotated(paths: Sequence[str], start: str) -> list[str]:
    """``paths`` (sorted) from the first at or after ``start``, then the ones before it."""
    ordered = sorted(paths)
    at = next((i for i, p in enumerate(ordered) if p >= start), 0) if start else 0
    return ordered[at:] + ordered[:at]


def _place(
    gh: GitHubAPI,
    sessions: sessionmaker[Session],
    installation_id: int,
    info: RepoInfo,
    branch: BranchFiles,
    options: WatchOptions,
    remote: HistoryFactory | None,
) -> Place:
    repo = info.full_name
    return Place(
        gh=gh,
        sessions=sessions,
        installation_id=installation_id,
        repo=repo,
        branch=info.default_branch,
        sha=branch.sha,
        files={tf.path: tf for tf in branch.files},
        texts=branch.texts,
        owner=options.owner,
        lease_seconds=options.lease_seconds,
        review_pull=lambda number: _review(
            gh, sessions, installation_id, repo, number, remote, options
        ),
    )


def _review(
    gh: GitHubAPI,
    sessions: sessionmaker[Session],
    installation_id: int,
    repo: str,
    number: int,
    remote: HistoryFactory | None,
    options: WatchOptions,
) -> None:
    try:
        review_and_track(
            gh,
            sessions,
            installation_id,
            repo,
            number,
            remote,
            locks=options.locks,
            max_bytes=options.max_bytes,
            reports=options.reports,
        )
    except PullBusy as exc:  # another process is reviewing it (its ``opened`` delivery…)
        log.info("drift watch: %s#%d not reviewed here: %s", repo, number, exc)
