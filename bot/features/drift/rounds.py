"""The drift watch's round: every installation the App knows, in turns, on budgets.

Installations take turns, one repository each (``watch_repository`` in
``bot.features.drift.watch``), so a slow one delays each other's repository by at most one
repository's budget; each repository and each installation has a budget per round
(``bot.core.budget``: ``DRIFT_REPOSITORY_SECONDS`` / ``_BYTES``, ``DRIFT_INSTALLATION_SECONDS``
/ ``_BYTES``).  What a budget cuts is logged, counted, and resumed next round where it
stopped: the positions are the store's drift cursors (``bot.adapters.store.cursors``).  A
round stops an installation early when its remaining rate limit falls under
``DRIFT_MIN_RATE_REMAINING``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import GitHubAPI, GitHubFactory, RepoInfo
from bot.adapters.github.errors import GitHubError
from bot.adapters.locks import Locks
from bot.adapters.settings import Settings
from bot.adapters.store import cursors
from bot.adapters.store import drift as records
from bot.core.access import guarded
from bot.core.budget import Budget, BudgetSpent
from bot.core.history.sources import HistoryFactory
from bot.features.drift.watch import (
    Cut,
    Finish,
    RepoWatch,
    WatchOptions,
    WatchReport,
    rotated,
    watch_repository,
)

log = logging.getLogger(__name__)


ROUND_CURSOR = "round"  # the installation the next round starts with


@dataclass
class _Turn:
    """One installation's part of a round: its client, the repositories left, its budget."""

    installation_id: int
    gh: GitHubAPI
    left: deque[RepoInfo]
    budget: Budget
    resumed: bool  # the round started where the last one cut it

    @property
    def key(self) -> str:
        return f"installation:{self.installation_id}"


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

    Installations take turns, one repository each, so a slow one delays each other's
    repository by at most one repository's budget (``options.repository``); an installation
    stops for this round once its own budget (``options.installation``) is spent.  Each
    installation starts at the repository, and each repository at the file, where the last
    round's budget cut it; the installation that goes first moves on by one every round.
    Cursors are stored (``drift_cursors``) only while something is cut.
    """
    ids = records.installation_ids(sessions) if installations is None else installations
    stored = cursors.stored(sessions)
    order = _rotated_ids(sorted(ids), stored.get(ROUND_CURSOR, ""))
    if len(order) > 1 and not repos:  # a round over some repositories moves no cursor on
        cursors.put(sessions, ROUND_CURSOR, str(order[1]))
    watched: list[RepoWatch] = []
    stopped: list[int] = []
    failed: list[str] = []
    cuts: list[Cut] = []
    turns: list[_Turn] = []
    for installation_id in order:
        try:
            gh = github(installation_id)
            listed = gh.installation_repositories()
        except GitHubError as exc:
            log.warning("drift watch: installation %s: %s", installation_id, exc)
            failed.append(f"{installation_id}: {exc}")
            continue
        todo = {
            info.full_name: info
            for info in listed
            if not info.archived and (not repos or info.full_name in repos)
        }
        key = f"installation:{installation_id}"
        names = rotated(list(todo), stored.get(key, ""))
        budget = Budget(f"installation {installation_id}", options.installation)
        turns.append(
            _Turn(
                installation_id,
                gh,
                deque(todo[n] for n in names),
                budget,
                resumed=key in stored and not repos,
            )
        )
    while turns:
        for turn in list(turns):
            if not turn.left:
                if turn.resumed:
                    cursors.put(sessions, turn.key, None)
                turns.remove(turn)
                continue
            info = turn.left[0]
            remaining = turn.gh.rate_remaining()
            if remaining is not None and remaining < options.min_rate_remaining:
                log.warning(
                    "drift watch: installation %s has %d requests left; the rest waits",
                    turn.installation_id,
                    remaining,
                )
                stopped.append(turn.installation_id)
                cursors.put(sessions, turn.key, info.full_name)
                turns.remove(turn)
                continue
            over = turn.budget.spent()  # its reads are limited inside the repository
            if over is not None and over.limit == "seconds":
                resume = stored.get(cursors.repository_key(info.full_name), "")
                cuts.append(_installation_cut(sessions, turn, info.full_name, resume, over))
                turns.remove(turn)
                continue
            turn.left.popleft()
            done = _visit(sessions, turn, info, remote_for, options, stored)
            watched.append(done)
            if done.cut is None:
                continue
            if done.cut.scope == turn.budget.scope:
                cuts.append(
                    _installation_cut(sessions, turn, info.full_name, done.resume, done.cut)
                )
                turns.remove(turn)
            else:
                cut = Cut(
                    "repository", turn.installation_id, info.full_name, done.resume, done.cut.reason
                )
                log.warning(
                    "drift watch: installation %s: %s cut at %s: %s spent%s;"
                    " it resumes there next round",
                    turn.installation_id,
                    info.full_name,
                    done.resume,
                    done.cut.reason,
                    f" while {done.cut.what}" if done.cut.what else "",
                )
                cuts.append(cut)
    return WatchReport(tuple(watched), tuple(stopped), tuple(failed), tuple(cuts))


def _visit(
    sessions: sessionmaker[Session],
    turn: _Turn,
    info: RepoInfo,
    remote_for: Callable[[int, str], HistoryFactory | None],
    options: WatchOptions,
    stored: dict[str, str],
) -> RepoWatch:
    """Watch one repository on ``turn``'s budget, from its stored cursor; store the new one."""
    repo = info.full_name
    key = cursors.repository_key(repo)
    owner = repo.split("/", 1)[0]
    budget = turn.budget.child(f"repository {repo}", options.repository)
    try:
        done = watch_repository(
            turn.gh,
            sessions,
            turn.installation_id,
            info,
            remote_for(turn.installation_id, owner),
            options,
            budget=budget,
            start=stored.get(key, ""),
        )
    except GitHubError as exc:
        log.warning("drift watch: %s: %s", repo, exc)
        return RepoWatch(repo, problem=str(exc))
    resume = done.resume if done.cut is not None else None
    if resume != stored.get(key):
        cursors.put(sessions, key, resume)
    return done


def _installation_cut(
    sessions: sessionmaker[Session], turn: _Turn, repo: str, resume: str, spent: BudgetSpent
) -> Cut:
    """Stop ``turn`` for this round at ``repo``: the next round starts there."""
    cursors.put(sessions, turn.key, repo)
    log.warning(
        "drift watch: installation %s cut at %s%s (%s spent); it resumes there next round,"
        " %d repositories after it wait",
        turn.installation_id,
        repo,
        f" ({resume})" if resume else "",
        spent.reason,
        len(turn.left),
    )
    return Cut("installation", turn.installation_id, repo, resume, spent.reason)


def _rotated_ids(ids: list[int], start: str) -> list[int]:
    """``ids`` (sorted) from the first at or after ``start`` (a stored id), then the rest."""
    first = int(start) if start.isdigit() else 0
    at = next((i for i, n in enumerate(ids) if n >= first), 0)
    return ids[at:] + ids[:at]


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
    finish: Finish | None = None,
) -> Callable[[], WatchReport]:
    """The periodic job: one ``watch_round`` with the App's settings (and ``finish``, the
    step after each repository whose every file was visited: the dashboard)."""
    options = WatchOptions.of(settings, locks, finish)
    remote_for = remote_sources(settings, history)

    def job() -> WatchReport:
        report = watch_round(sessions, github, remote_for, options)
        if report.repositories:
            counts: dict[str, int] = {}
            for acted in report.acted:
                counts[acted.action] = counts.get(acted.action, 0) + 1
            log.info(
                "drift watch: %d repositories, %s%s%s",
                len(report.repositories),
                ", ".join(f"{n} {a}" for a, n in sorted(counts.items())) or "no files",
                f", stopped early in {len(report.stopped_early)}" if report.stopped_early else "",
                f", {len(report.cut)} cut by their budgets" if report.cut else "",
            )
        return report

    return job
