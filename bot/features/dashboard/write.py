"""Write one repository's threshold dashboard issue, once, and only when what it shows changed.

At the end of a watch round that visited every file (``bot.features.drift.watch``), the view
is gathered (``gather``), rendered (``bot.core.dashboard.body``) and compared with the
fingerprint of the body last written (the store's ``dashboards`` record): the same, nothing is
sent to GitHub.  Otherwise the worker *claims* the record (a lease, as the drift items do), so
two workers or a round and a webhook never write it at once, and

- the issue recorded is edited in place (``PATCH``, its body only);
- with none recorded, the App's OWN open issue carrying ``DASHBOARD_MARKER`` is found again
  (``find_items``: written by this App, so an issue anyone else writes with the marker is never
  adopted) and edited; only when there is none is an issue created (title
  ``DASHBOARD_TITLE``).  A worker that died between creating the issue and saving the record
  leaves an issue the next one finds by its marker: never a second dashboard;
- a dashboard a maintainer closed is never reopened and never replaced: its body goes on being
  edited in place when what it shows changes (an edit notifies no one), so reopening it shows
  the current state; ``dashboard: off`` stops it (the issue is left as it is);
- an issue deleted since (404) is forgotten, and the next write creates a new one;
- without the ``issues`` permission (403) nothing is written: one log line, recorded with what
  it would have shown, tried again when that changes.

The whole dashboard (nothing cut) is also kept as a page the App serves when the operator
set ``REPORT_BASE_URL`` and the repository may have report pages (public, or
``REPORT_PRIVATE_REPOS``: the rule of the PR reports, ``ReportSink.wanted``): one row of the
reports store per repository (``reports.keep_page``: one token, so one address, while it
lives; written only when the page changed or half its ``REPORT_TTL_DAYS`` went by), linked
from the body (``RepoView.report_url``: the intro line and the cut notice).  A repository
that may no longer have one loses its page.  A page that cannot be rendered or is too
large is logged, and the body goes out without the link.

A round with nothing new costs no request and, when the round evaluated nothing anew
(``fresh`` False) and the records it reads are as they were (the dashboard's, and the drift
records' stamps: the round's own read of them when it made one), not even the rendering: the
fingerprint of what this process last rendered from the same inputs is reused.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import GitHubAPI, IssueRef, RepoInfo
from bot.adapters.github.errors import GitHubForbidden, GitHubNotFound
from bot.adapters.settings import Settings
from bot.adapters.store import dashboards, reports
from bot.adapters.store import drift as records
from bot.adapters.store.dashboards import Dashboard
from bot.adapters.store.deliveries import now_utc
from bot.adapters.store.reports import ReportTooLarge
from bot.core.config import RepoConfig
from bot.core.dashboard.body import (
    DASHBOARD_MARKER,
    DASHBOARD_TITLE,
    dashboard_body,
    dashboard_fingerprint,
)
from bot.core.dashboard.page import dashboard_page
from bot.core.dashboard.view import RepoView
from bot.core.lru import Lru
from bot.features.dashboard.gather import gather
from bot.features.drift.place import NO_ISSUES
from bot.features.drift.read import BranchFiles
from bot.features.drift.watch import Visited
from bot.features.review.report import ReportOptions

log = logging.getLogger(__name__)

Action = Literal["opened", "updated", "unchanged", "busy", "forbidden"]
CLOSED = "closed by a maintainer: kept up to date in place, never reopened"
REMEMBERED = 4096  # repositories whose last rendering this process keeps (``_Rendered``)


@dataclass(frozen=True)
class Written:
    """What ``write_dashboard`` did."""

    action: Action
    number: int | None = None  # the dashboard issue
    detail: str = ""


def dashboard_on(config: RepoConfig, everywhere: bool) -> bool:
    """Whether ``config``'s repository has a dashboard: its ``dashboard:`` when set (an
    explicit ``off`` wins over the App's ``DASHBOARD=all``), else ``everywhere``."""
    return everywhere if config.dashboard is None else config.dashboard


@dataclass(frozen=True)
class DashboardStep:
    """The drift watch's ``finish`` step that writes the dashboard (``everywhere``: the App's
    ``DASHBOARD=all``)."""

    everywhere: bool = False
    pages: ReportOptions | None = None  # the report pages' settings: None, no page

    @classmethod
    def of(cls, settings: Settings) -> DashboardStep:
        """The step as the App's settings ask."""
        return cls(everywhere=settings.dashboard == "all", pages=ReportOptions.of(settings))

    def wanted(self, config: RepoConfig) -> bool:
        return dashboard_on(config, self.everywhere)

    def __call__(self, visited: Visited) -> str:
        written = write_dashboard(visited, self.pages)
        if written.action in ("unchanged", "busy"):
            return ""
        number = f" #{written.number}" if written.number else ""
        log.info("drift watch: %s: dashboard %s%s", visited.info.full_name, written.action, number)
        return f"dashboard {written.action}{number}"


@dataclass(frozen=True)
class _Last:
    """What this process last rendered for a repository: its body's fingerprint, and when
    its page (if any) is due for renewal (naive UTC)."""

    fingerprint: str
    renew: datetime | None = None


class _Rendered:
    """Per repository: the inputs of the last body this process rendered, and what it
    rendered (bounded: the ``REMEMBERED`` most recent repositories)."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self._items: Lru[str, tuple[str, _Last]] = Lru(size)

    def get(self, repo: str, inputs: str) -> _Last | None:
        found = self._items.get(repo)
        return found[1] if found is not None and found[0] == inputs else None

    def put(self, repo: str, inputs: str, last: _Last) -> None:
        self._items.put(repo, (inputs, last))


RENDERED = _Rendered()


def write_dashboard(visited: Visited, pages: ReportOptions | None = None) -> Written:
    """Bring the dashboard issue of ``visited.info`` up to date with the watch that visited
    every file of it, and its page when ``pages`` (see the module doc).  The requests are
    charged to its budget and never cut."""
    gh, sessions, info, branch = visited.gh, visited.sessions, visited.info, visited.branch
    repo, owner = info.full_name, visited.owner
    paged = pages if pages is not None and (not info.private or pages.private_repos) else None
    where = "" if paged is None else paged.base_url
    with visited.budget.counted():
        record = dashboards.get(sessions, repo)
        notes = record.notes if record is not None else ()
        if not visited.fresh and record is not None:
            stamps = visited.stamps
            if stamps is None:
                stamps = records.stamps(sessions, repo)
            remembered = RENDERED.get(repo, _inputs(info, branch, stamps, notes, where))
            if (
                remembered is not None
                and _shows(record, remembered.fingerprint)
                and (remembered.renew is None or now_utc() < remembered.renew)
            ):
                return Written("unchanged", record.issue)
        items = records.of_repo(sessions, repo)
        inputs = _inputs(info, branch, records.stamps(sessions, repo), notes, where)
        view = gather(info, branch, visited.drifts, items, notes=notes)
        if pages is not None:
            view, renew = _page(sessions, view, paged)
        else:
            renew = None
        body = dashboard_body(view)
        fingerprint = dashboard_fingerprint(body)
        RENDERED.put(repo, inputs, _Last(fingerprint, renew))
        if _shows(record, fingerprint):
            return Written("unchanged", record.issue if record else None)
        claimed = dashboards.claim(
            sessions,
            repo=repo,
            installation_id=visited.installation_id,
            owner=owner,
            seconds=visited.lease_seconds,
        )
        if claimed is None:
            return Written("busy", detail="another worker is writing it")
        try:
            return _write(gh, sessions, claimed, body, fingerprint, owner)
        finally:
            dashboards.release(sessions, repo, owner)


def _page(
    sessions: sessionmaker[Session], view: RepoView, pages: ReportOptions | None
) -> tuple[RepoView, datetime | None]:
    """Keep ``view``'s page (``pages``), or drop the one it had (None: not allowed for the
    repository); the view linking it, and when the page is due for renewal."""
    if pages is None:
        if reports.drop_page(sessions, view.repo):
            log.info("%s: its dashboard page is deleted: the repository is private", view.repo)
        return view, None
    try:
        html = dashboard_page(view)
        kept = reports.keep_page(
            sessions,
            key=pages.key,
            repo=view.repo,
            head_sha=view.sha,
            html=html,
            ttl_days=pages.ttl_days,
        )
    except ReportTooLarge as exc:
        log.warning("%s: no dashboard page: %s", view.repo, exc)
        return view, None
    except Exception:  # an extra: the body goes out without the link
        log.exception("%s: no dashboard page: it could not be kept", view.repo)
        return view, None
    url = f"{pages.base_url}/reports/{kept.token}"
    renew = kept.expires_at - timedelta(days=pages.ttl_days / 2)
    return view.model_copy(update={"report_url": url}), renew


def _write(
    gh: GitHubAPI,
    sessions: sessionmaker[Session],
    record: Dashboard,
    body: str,
    fingerprint: str,
    owner: str,
) -> Written:
    """Edit, find again or create the dashboard issue of ``record.repo`` (under its lease)."""
    repo = record.repo
    if _shows(record, fingerprint):
        return Written("unchanged", record.issue)  # another worker wrote it meanwhile
    try:
        ref, action = _issue(gh, record, body)
    except GitHubForbidden as exc:
        if record.note != NO_ISSUES:
            log.warning("%s: %s: no threshold dashboard (%s)", repo, NO_ISSUES, exc)
        dashboards.save(sessions, replace(record, fingerprint=fingerprint, note=NO_ISSUES), owner)
        return Written("forbidden", detail=NO_ISSUES)
    note = CLOSED if ref.state == "closed" else ""
    if note and record.note != note:
        log.info("%s: the threshold dashboard #%d is %s", repo, ref.number, CLOSED)
    written = replace(record, issue=ref.number, body=body, fingerprint=fingerprint, note=note)
    dashboards.save(sessions, written, owner)
    return Written(action, ref.number)


def _shows(record: Dashboard | None, fingerprint: str) -> bool:
    """Whether ``record`` says its dashboard shows ``fingerprint`` already (or that it could
    not be written for lack of permission when that was last rendered)."""
    if record is None or record.fingerprint != fingerprint:
        return False
    return record.issue is not None or record.note == NO_ISSUES


def _issue(gh: GitHubAPI, record: Dashboard, body: str) -> tuple[IssueRef, Action]:
    repo = record.repo
    if record.issue is not None:
        try:
            return gh.update_issue(repo, record.issue, body=body), "updated"
        except GitHubNotFound:
            log.warning("%s: the threshold dashboard #%d is gone: a new one", repo, record.issue)
    found = [ref for ref in gh.find_items(repo, DASHBOARD_MARKER) if not ref.is_pull]
    if found:
        return gh.update_issue(repo, found[0].number, body=body), "updated"
    return gh.create_issue(repo, DASHBOARD_TITLE, body, DASHBOARD_MARKER), "opened"


def _inputs(
    info: RepoInfo,
    branch: BranchFiles,
    stamps: Mapping[str, datetime],
    notes: tuple[str, ...],
    pages: str,
) -> str:
    """What the view is gathered from besides the evaluations (the same at the same head
    while nothing is evaluated anew), summarised: the drift records enter by their stamps
    (every save of one moves its stamp; one being written is left out, so it differs);
    ``pages``: where its page is served ("": none)."""
    written = sorted((file, at.isoformat()) for file, at in stamps.items())
    data = json.dumps(
        [info.full_name, info.default_branch, info.url, branch.sha, written, list(notes), pages]
    )
    return hashlib.sha256(data.encode()).hexdigest()
