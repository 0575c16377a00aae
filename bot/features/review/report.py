"""The interactive report of a reviewed PR: whether it gets one, storing it, its URL.

A PR gets a report when the operator set ``REPORT_BASE_URL``, the repository config at the
base has ``report`` on (the default), and the repository is public or the operator set
``REPORT_PRIVATE_REPOS``.  The report is the review as one self-contained HTML page with
its charts (``bot.core.render.html_report``), stored as the PR's current report
(``bot.adapters.store.reports``: the same token, so the same URL, review after review) and
served by ``bot.app.reports`` at ``REPORT_BASE_URL/reports/TOKEN``.  A PR that no longer
gets one (``report: off``, the repository made private) loses the one it had.

The report is an extra: one that cannot be rendered, or is over the size bound, is logged
and the review goes out without the link.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import PullInfo
from bot.adapters.settings import Settings
from bot.adapters.store import reports
from bot.adapters.store.reports import ReportTooLarge
from bot.core.config import RepoConfig
from bot.core.models import Review
from bot.core.render.html_report import html_report

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportOptions:
    """The operator's report settings; ``of`` reads them."""

    base_url: str  # REPORT_BASE_URL
    private_repos: bool  # REPORT_PRIVATE_REPOS
    ttl_days: float  # REPORT_TTL_DAYS
    key: bytes  # the links are derived from it (Settings.report_key)

    @classmethod
    def of(cls, settings: Settings) -> ReportOptions | None:
        """The options of ``settings``; None when reports are off (``REPORT_BASE_URL`` unset)
        or the App has no private key to derive links from."""
        if not settings.report_base_url:
            return None
        key = settings.report_key()
        if key is None:
            log.warning("REPORT_BASE_URL is set but the App has no private key: no reports")
            return None
        return cls(
            settings.report_base_url.rstrip("/"),
            settings.report_private_repos,
            settings.report_ttl_days,
            key,
        )


@dataclass(frozen=True)
class ReportSink:
    """Where the App keeps the reports it serves: its options, and the store."""

    options: ReportOptions
    sessions: sessionmaker[Session]

    def wanted(self, pull: PullInfo, config: RepoConfig) -> bool:
        """Whether the PR gets a report."""
        return config.report and (not pull.private or self.options.private_repos)

    def publish(
        self,
        repo: str,
        pull: PullInfo,
        config: RepoConfig,
        review: Review,
        *,
        repo_url: str | None = None,
        approved: str | None = None,
    ) -> str | None:
        """Store ``review``'s report as the PR's current one and return its URL; None (and
        the PR's previous report deleted) when it gets none.  ``repo_url`` and ``approved``
        as for the comment (``render_comment``)."""
        wanted = self.wanted(pull, config)
        token = self._store(repo, pull, review, repo_url, approved) if wanted else None
        if token is None:
            with self.sessions.begin() as session:
                reports.delete_pull(session, repo, pull.number)
            return None
        return f"{self.options.base_url}/reports/{token}"

    def _store(
        self, repo: str, pull: PullInfo, review: Review, repo_url: str | None, approved: str | None
    ) -> str | None:
        title = f"threshold-bot review of {repo}#{pull.number}"
        try:
            html = html_report(
                review, title=title, repo_url=repo_url, app_mode=True, approved=approved
            )
        except Exception:  # an extra: the review goes out without it
            log.exception("no report for %s#%d: it could not be rendered", repo, pull.number)
            return None
        try:
            return reports.save(
                self.sessions,
                key=self.options.key,
                repo=repo,
                number=pull.number,
                head_sha=pull.head_sha,
                html=html,
                ttl_days=self.options.ttl_days,
            )
        except ReportTooLarge as exc:
            log.warning("no report for %s#%d: %s", repo, pull.number, exc)
            return None
