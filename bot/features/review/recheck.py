"""Re-review open threshold PRs when their remote history gets new runs.

Every review of a PR whose gates read a remote source (W&B …) records the PR and
its sources in ``bot.adapters.store.tracked``; closing the PR, or a review that no longer
reads remote history, forgets it.  ``recheck`` syncs each tracked source once,
then re-reviews the PRs of the sources that changed (their comment and check run
are edited in place).  File sources need no polling: a change to the history
file is a push, and the next PR event reviews against it.  An ``actions`` source is the
artifacts of the PR's own repository (as the review reads it, ``HistoryRouter``): synced
with the client of the PR's installation, so a new nightly's artifact re-reviews the PR
at the next round even when no ``workflow_run`` delivery came.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import GitHubAPI, GitHubFactory
from bot.adapters.github.errors import GitHubError
from bot.adapters.history.actions_source import ActionsAPI
from bot.adapters.history.cache import CachedSource, SyncResult
from bot.adapters.history.sync import cached_source, sync_sources
from bot.adapters.locks import Locks
from bot.adapters.settings import DEFAULT_THRESHOLD_FILE_BYTES, Settings
from bot.adapters.store import approvals, drift, tracked
from bot.adapters.store.tracked import Tracked
from bot.core.access import SourcePolicy, guarded
from bot.core.history.sources import HistoryError
from bot.core.history.workflow_runs import bound_to
from bot.core.models import SourceSpec
from bot.core.retry import TransientError
from bot.features.review.pull import RemoteHistory, ReviewOutcome, review_pull
from bot.features.review.report import ReportOptions, ReportSink

log = logging.getLogger(__name__)

PULL_WAIT_SECONDS = 60.0  # how long a review waits for another review of the same PR


class PullBusy(TransientError):
    """Another review of the PR (in any process) held it for longer than the wait."""


SyncSources = Callable[[Sequence[SourceSpec], Mapping[str, ActionsAPI]], Mapping[str, SyncResult]]
"""Sync these sources (an ``actions`` one with the client its key maps to); results keyed
by ``SourceSpec.key()``."""


@dataclass(frozen=True)
class RecheckReport:
    """What one re-check did."""

    sources: int = 0
    changed: tuple[str, ...] = ()  # descriptions of the sources with new runs
    reviewed: tuple[str, ...] = ()  # "owner/repo#number"
    failed: tuple[str, ...] = field(default=())  # "owner/repo#number: reason"


def review_and_track(
    gh: GitHubAPI,
    sessions: sessionmaker[Session],
    installation_id: int,
    repo: str,
    number: int,
    remote_history: RemoteHistory | None,
    *,
    locks: Locks,
    max_bytes: int = DEFAULT_THRESHOLD_FILE_BYTES,
    reports: ReportOptions | None = None,
    wait: float = PULL_WAIT_SECONDS,
) -> ReviewOutcome:
    """Review a PR, then track it if its review reads remote history (else untrack it).

    ``remote_history`` must already be limited to what the installation may read;
    ``reports``: where its interactive report goes (``bot.features.review.report``).
    Reviews of the same PR run one at a time across every process (the lock
    ``pull:OWNER/REPO#N`` of ``locks``), so two deliveries close together (``opened`` and a
    quick push) cannot both create the comment; ``PullBusy`` (transient: the delivery is
    retried) when another review held the PR for ``wait`` seconds.
    """
    item = drift.by_number(sessions, repo, number)
    name = f"{repo}#{number}"
    lease = locks.acquire(f"pull:{name}", wait=wait)
    if lease is None:
        raise PullBusy(f"{name} is being reviewed elsewhere (waited {wait:g} s)")
    with lease:
        log.info("reviewing pull request", extra={"pull": name})
        try:
            outcome = review_pull(
                gh,
                repo,
                number,
                remote_history=remote_history,
                approvals=approvals.lookup(sessions),
                max_bytes=max_bytes,
                drift_branch=item.branch if item is not None and item.pull == number else None,
                reports=ReportSink(reports, sessions) if reports is not None else None,
            )
            _track(sessions, installation_id, repo, number, outcome)
        finally:  # the end of the exclusive section, also when the review failed
            log.info("reviewed pull request", extra={"pull": name})
    return outcome


def _track(
    sessions: sessionmaker[Session],
    installation_id: int,
    repo: str,
    number: int,
    outcome: ReviewOutcome,
) -> None:
    """Track the reviewed PR if its review read remote history, else forget it."""
    remote = tuple(spec for spec in outcome.sources if spec.kind != "file")
    with sessions.begin() as session:
        if outcome.status == "reviewed" and remote:
            tracked.track(
                session,
                installation_id=installation_id,
                repo=repo,
                number=number,
                head_sha=outcome.pull.head_sha,
                sources=remote,
                # "neutral" marks a history that could not be read, whatever the conclusion
                # (a changed gate it leaves unverified is action_required): retried on sync
                conclusion=""
                if outcome.review is None
                else "neutral"
                if outcome.unavailable
                else outcome.review.conclusion,
            )
        else:
            tracked.untrack(session, repo, number)


def unique_sources(pulls: Sequence[Tracked]) -> list[SourceSpec]:
    """Every source the tracked PRs read, once each, in first-seen order."""
    seen: dict[str, SourceSpec] = {}
    for pull in pulls:
        for spec in pull.sources:
            seen.setdefault(spec.key(), spec)
    return list(seen.values())


def stale(pulls: Sequence[Tracked], results: Mapping[str, SyncResult]) -> list[Tracked]:
    """The PRs to review again: a source of theirs got new runs, or their last review could
    not read the history (``neutral``) or is owed (``tracked.DUE``: cut from a
    ``workflow_run``'s re-reviews) and every source of theirs synced fine now."""
    changed = {key for key, result in results.items() if result.changed}
    readable = {key for key, result in results.items() if result.error is None}

    def due(pull: Tracked) -> bool:
        keys = [spec.key() for spec in pull.sources]
        if pull.conclusion in ("neutral", tracked.DUE):
            return all(key in readable for key in keys)
        return any(key in changed for key in keys)

    return [p for p in pulls if due(p)]


def recheck(
    sessions: sessionmaker[Session],
    github: GitHubFactory,
    remote_history: RemoteHistory,
    sync: SyncSources,
    locks: Locks,
    policy: SourcePolicy | None = None,
    max_bytes: int = DEFAULT_THRESHOLD_FILE_BYTES,
    reports: ReportOptions | None = None,
) -> RecheckReport:
    """Sync the tracked PRs' sources and re-review the PRs whose sources changed.

    ``locks``: the per-PR locks of the reviews.  With a ``policy``, a tracked source the
    PR's installation may no longer read is not synced, and each re-review reads only what
    its installation may.
    """
    with sessions() as session:
        pulls = [_resolved(pull) for pull in tracked.tracked(session)]
    if policy is not None:
        pulls = [_allowed(pull, policy) for pull in pulls]
    specs = unique_sources(pulls)
    if not specs:
        return RecheckReport()
    results = sync(specs, _actions_clients(pulls, github))
    reviewed: list[str] = []
    failed: list[str] = []
    for pull in stale(pulls, results):
        name = f"{pull.repo}#{pull.number}"
        try:
            gh = github(pull.installation_id)
            history = remote_history
            if policy is not None:
                owner = pull.repo.split("/", 1)[0]
                history = guarded(
                    remote_history, policy, installation_id=pull.installation_id, owner=owner
                )
            review_and_track(
                gh,
                sessions,
                pull.installation_id,
                pull.repo,
                pull.number,
                history,
                locks=locks,
                max_bytes=max_bytes,
                reports=reports,
            )
        except (GitHubError, HistoryError, PullBusy) as exc:
            log.warning("re-check of %s failed: %s", name, exc)
            failed.append(f"{name}: {exc}")
            continue
        reviewed.append(name)
    changed = tuple(r.source for r in results.values() if r.changed)
    return RecheckReport(
        sources=len(specs), changed=changed, reviewed=tuple(reviewed), failed=tuple(failed)
    )


def _resolved(pull: Tracked) -> Tracked:
    """``pull`` with its ``actions`` sources read from its own repository, as its review
    reads them (``repo`` set, so two repositories' nightlies of one name are two sources);
    one naming another repository, which the review refuses, is left out."""
    bound = (bound_to(s, pull.repo) if s.kind == "actions" else s for s in pull.sources)
    return replace(pull, sources=tuple(s for s in bound if s is not None))


def _actions_clients(pulls: Sequence[Tracked], github: GitHubFactory) -> dict[str, ActionsAPI]:
    """The GitHub client of each ``actions`` source's installation, by ``SourceSpec.key()``
    (one client per installation; an installation whose client cannot be had is left out,
    and its sources are not synced)."""
    clients: dict[int, object] = {}
    found: dict[str, ActionsAPI] = {}
    for pull in pulls:
        for spec in pull.sources:
            if spec.kind != "actions" or spec.key() in found:
                continue
            if pull.installation_id not in clients:
                try:
                    clients[pull.installation_id] = github(pull.installation_id)
                except GitHubError as exc:
                    log.warning(
                        "re-check: no client of installation %d: %s", pull.installation_id, exc
                    )
                    clients[pull.installation_id] = None
            client = clients[pull.installation_id]
            if isinstance(client, ActionsAPI):
                found[spec.key()] = client
    return found


def _allowed(pull: Tracked, policy: SourcePolicy) -> Tracked:
    """``pull`` with only the sources its installation may read."""
    owner = pull.repo.split("/", 1)[0]
    kept = tuple(
        spec
        for spec in pull.sources
        if policy.refusal(spec, installation_id=pull.installation_id, owner=owner) is None
    )
    return replace(pull, sources=kept)


def recheck_job(
    settings: Settings,
    sessions: sessionmaker[Session],
    github: GitHubFactory,
    remote_history: RemoteHistory,
    locks: Locks,
) -> Callable[[], RecheckReport]:
    """The periodic job: ``recheck`` with the run cache of ``settings`` (built on first run)."""
    caches: list[CachedSource] = []
    reports = ReportOptions.of(settings)

    def sync(
        specs: Sequence[SourceSpec], clients: Mapping[str, ActionsAPI]
    ) -> Mapping[str, SyncResult]:
        if not caches:
            caches.append(cached_source(settings, sessions))
        return sync_sources(caches[0], specs, clients=clients)

    def job() -> RecheckReport:
        report = recheck(
            sessions,
            github,
            remote_history,
            sync,
            locks,
            settings.source_policy(),
            settings.max_threshold_file_bytes,
            reports,
        )
        if report.sources:
            log.info(
                "re-check: %d sources, %d changed, %d PRs reviewed, %d failed",
                report.sources,
                len(report.changed),
                len(report.reviewed),
                len(report.failed),
            )
        return report

    return job
