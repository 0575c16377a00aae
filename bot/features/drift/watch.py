"""The drift watch: every installed repository, one at a time, on the re-check's schedule.

A round visits the installations the App knows in turn, each with its own token, and
their repositories (archived ones skipped); a round stops an installation early when its
remaining rate limit falls under ``DRIFT_MIN_RATE_REMAINING``.  For one repository
(``watch_repository``, also run for a ``push`` to the default branch that touches a
threshold, config or history file): the default branch's head SHA (one request), its
threshold files (cached per SHA, ``bot.features.drift.read``), their histories (W&B and
MLflow through the run cache; history files read at the head, cached per SHA), then
``evaluate`` and ``act`` per file.  With warm caches and nothing new, a repository costs
one GitHub request.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import GitHubAPI, GitHubFactory, RepoInfo
from bot.adapters.github.errors import GitHubError
from bot.adapters.locks import Locks
from bot.adapters.settings import Settings
from bot.adapters.store import drift as records
from bot.core.access import guarded
from bot.core.commands import Command
from bot.core.history.sources import HistoryFactory, HistorySource
from bot.core.models import History, SourceSpec
from bot.features.drift.evaluate import evaluate
from bot.features.drift.items import act
from bot.features.drift.place import Acted, Place
from bot.features.drift.read import BranchCache, BranchFiles, read_branch
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

    @classmethod
    def of(cls, settings: Settings, locks: Locks) -> WatchOptions:
        """The options ``settings`` set, reviewing under ``locks``."""
        return cls(
            max_bytes=settings.max_threshold_file_bytes,
            locks=locks,
            max_files=settings.drift_max_files,
            lease_seconds=settings.lease_seconds,
            min_rate_remaining=settings.drift_min_rate_remaining,
            reports=ReportOptions.of(settings),
        )


@dataclass(frozen=True)
class RepoWatch:
    """What the watch did for one repository."""

    repo: str
    acted: tuple[Acted, ...] = ()
    problem: str = ""  # the repository could not be watched (GitHub failed)


@dataclass(frozen=True)
class WatchReport:
    """What one round did."""

    repositories: tuple[RepoWatch, ...] = ()
    stopped_early: tuple[int, ...] = ()  # installations left for the next round (rate limit)
    failed: tuple[str, ...] = ()  # installations whose repositories could not be listed

    @property
    def acted(self) -> list[Acted]:
        """Every file's outcome, in order."""
        return [a for r in self.repositories for a in r.acted]


class _FileHistories:
    """History files read from repositories, kept per (repository, SHA, source)."""

    def __init__(self, size: int = CACHED_HISTORIES) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, str, str], History] = OrderedDict()
        self._lock = threading.Lock()

    def source(self, gh: GitHubAPI, repo: str, sha: str) -> HistorySource:
        """A source reading ``repo``'s history files at ``sha`` through this cache."""
        return _CachedFiles(self, repo_history(gh, repo, sha), repo, sha)

    def fetch(self, files: HistorySource, key: tuple[str, str, str], spec: SourceSpec) -> History:
        """The history kept under ``key``, else read from ``files`` and kept."""
        with self._lock:
            found = self._items.get(key)
        if found is not None:
            return found
        history = files.fetch(spec)
        with self._lock:
            self._items[key] = history
            while len(self._items) > self._size:
                self._items.popitem(last=False)
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
) -> RepoWatch:
    """Watch one repository (only the file ``only`` when given; ``command``: a maintainer's
    ``/rebaseline`` on its issue).  ``remote`` must already be limited to what the
    installation may read."""
    repo = info.full_name
    sha = gh.branch_head(repo, info.default_branch)
    if sha is None:
        return RepoWatch(repo, problem=f"no branch {info.default_branch}")
    branch = BRANCHES.get(repo, sha)
    if branch is None:
        branch = read_branch(
            gh,
            repo,
            info.default_branch,
            sha,
            max_bytes=options.max_bytes,
            max_files=options.max_files,
        )
        BRANCHES.put(branch)
    settings = branch.config.drift
    if settings.mode == "off" and command is None:
        return RepoWatch(repo)
    skipped = [
        Acted(path, "skipped", detail=reason)
        for path, reason in branch.unreadable.items()
        if only is None or path == only
    ]
    for skip in skipped:
        log.warning("drift watch: %s: %s not evaluated: %s", repo, skip.file, skip.detail)
    files = [tf for tf in branch.files if only is None or tf.path == only]
    if not files:
        return RepoWatch(repo, tuple(skipped))
    history = HistoryRouter(HISTORIES.source(gh, repo, sha), remote)
    place = Place(
        gh=gh,
        sessions=sessions,
        installation_id=installation_id,
        repo=repo,
        branch=info.default_branch,
        sha=sha,
        files={tf.path: tf for tf in branch.files},
        texts=branch.texts,
        owner=options.owner,
        lease_seconds=options.lease_seconds,
        review_pull=lambda number: _review(
            gh, sessions, installation_id, repo, number, remote, options
        ),
    )
    acted = list(skipped)
    narrowed = branch if only is None else _only(branch, only)
    for drift in evaluate(narrowed, history):
        if drift.report is None:
            log.warning("drift watch: %s: %s not evaluated: %s", repo, drift.file, drift.problem)
        acted.append(act(place, drift, settings, command))
    return RepoWatch(repo, tuple(acted))


def _only(branch: BranchFiles, path: str) -> BranchFiles:
    return replace(branch, files=tuple(tf for tf in branch.files if tf.path == path))


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


def watch_round(
    sessions: sessionmaker[Session],
    github: GitHubFactory,
    remote_for: Callable[[int, str], HistoryFactory | None],
    options: WatchOptions,
    installations: Sequence[int] | None = None,
    repos: frozenset[str] = frozenset(),
) -> WatchReport:
    """One round over ``installations`` (default: every one the store knows), and over
    ``repos`` only when given.

    ``remote_for(installation_id, owner)``: the history sources that installation may read.
    """
    ids = records.installation_ids(sessions) if installations is None else installations
    watched: list[RepoWatch] = []
    stopped: list[int] = []
    failed: list[str] = []
    for installation_id in ids:
        try:
            gh = github(installation_id)
            listed = gh.installation_repositories()
        except GitHubError as exc:
            log.warning("drift watch: installation %s: %s", installation_id, exc)
            failed.append(f"{installation_id}: {exc}")
            continue
        for info in listed:
            if info.archived or (repos and info.full_name not in repos):
                continue
            remaining = gh.rate_remaining()
            if remaining is not None and remaining < options.min_rate_remaining:
                log.warning(
                    "drift watch: installation %s has %d requests left; the rest waits",
                    installation_id,
                    remaining,
                )
                stopped.append(installation_id)
                break
            owner = info.full_name.split("/", 1)[0]
            try:
                watched.append(
                    watch_repository(
                        gh,
                        sessions,
                        installation_id,
                        info,
                        remote_for(installation_id, owner),
                        options,
                    )
                )
            except GitHubError as exc:
                log.warning("drift watch: %s: %s", info.full_name, exc)
                watched.append(RepoWatch(info.full_name, problem=str(exc)))
    return WatchReport(tuple(watched), tuple(stopped), tuple(failed))


def remote_sources(
    settings: Settings, history: HistoryFactory
) -> Callable[[int, str], HistoryFactory | None]:
    """Per installation and owner: ``history`` limited by the operator's source policy."""
    policy = settings.source_policy()

    def remote_for(installation_id: int, owner: str) -> HistoryFactory | None:
        return guarded(history, policy, installation_id=installation_id, owner=owner)

    return remote_for


def drift_job(
    settings: Settings,
    sessions: sessionmaker[Session],
    github: GitHubFactory,
    history: HistoryFactory,
    locks: Locks,
) -> Callable[[], WatchReport]:
    """The periodic job: one ``watch_round`` with the App's settings."""
    options = WatchOptions.of(settings, locks)
    remote_for = remote_sources(settings, history)

    def job() -> WatchReport:
        report = watch_round(sessions, github, remote_for, options)
        if report.repositories:
            counts: dict[str, int] = {}
            for acted in report.acted:
                counts[acted.action] = counts.get(acted.action, 0) + 1
            log.info(
                "drift watch: %d repositories, %s%s",
                len(report.repositories),
                ", ".join(f"{n} {a}" for a, n in sorted(counts.items())) or "no files",
                f", stopped early in {len(report.stopped_early)}" if report.stopped_early else "",
            )
        return report

    return job
