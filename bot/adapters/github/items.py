"""Issues and pull requests the App opens itself (the drift watch's items), over PyGithub.

``find_items`` lists the open issues and PRs this App wrote whose body holds a hidden
marker; ``create_issue`` is idempotent like comments (a POST that failed but landed is
found again by its marker); ``open_pull`` is idempotent by head branch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from github.PaginatedList import PaginatedList

from bot.adapters.github.api import IssueRef, PullInfo
from bot.adapters.github.errors import GitHubUnprocessable, translated
from bot.adapters.github.support import (
    Listed,
    RepoAccess,
    checked_branch,
    create_once,
    pull_info,
)

log = logging.getLogger(__name__)


class ItemsMixin(RepoAccess):
    """The issue and pull-request writes of ``GitHubClient``."""

    @translated
    def find_items(self, repo: str, marker: str) -> list[IssueRef]:
        """The OPEN issues and PRs written by this App whose body holds ``marker``, oldest
        first (every page of ``GET /issues?state=open&creator=<the App's login>``; without a
        known login, every open item, kept when GitHub says this App wrote it)."""
        gh_repo = self._repo(repo)
        params: dict[str, Any] = {
            "state": "open",
            "sort": "created",
            "direction": "asc",
            "per_page": 100,
        }
        login = self._login_name()
        if login:
            params["creator"] = login
        listed = PaginatedList(Listed, gh_repo.requester, f"{gh_repo.url}/issues", params)
        found = [
            _issue_ref(item.raw_data)
            for item in listed
            if marker in (item.raw_data.get("body") or "") and self._is_own(item.raw_data)
        ]
        return sorted(found, key=lambda ref: ref.number)

    def create_issue(
        self,
        repo: str,
        title: str,
        body: str,
        marker: str,
        *,
        labels: Sequence[str] = (),
        assignees: Sequence[str] = (),
    ) -> IssueRef:
        """Open an issue (``body`` must hold ``marker``); after a transient failure, the
        issue is found again by ``marker`` before a second POST.  Assignees GitHub refuses
        (422: not collaborators) are dropped, with a log line, rather than the issue."""
        if marker not in body:
            raise ValueError("the issue body must contain its marker")

        def create() -> IssueRef:
            try:
                return self._post_issue(repo, title, body, labels, assignees)
            except GitHubUnprocessable as exc:
                if not assignees:
                    raise
                log.warning("GitHub refused the assignees %s on %s: %s", assignees, repo, exc)
                return self._post_issue(repo, title, body, labels, ())

        def reuse() -> IssueRef | None:
            return next(iter(self.find_items(repo, marker)), None)

        return create_once(create, reuse)

    @translated
    def _post_issue(
        self,
        repo: str,
        title: str,
        body: str,
        labels: Sequence[str],
        assignees: Sequence[str],
    ) -> IssueRef:
        issue = self._repo(repo).create_issue(
            title, body, labels=list(labels), assignees=list(assignees)
        )
        return _issue_ref(issue.raw_data)

    @translated
    def update_issue(
        self,
        repo: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: Literal["open", "closed"] | None = None,
    ) -> IssueRef:
        """Edit issue (or PR) ``number``: only the fields given (``PATCH /issues/{n}``)."""
        fields = {
            key: value
            for key, value in (("title", title), ("body", body), ("state", state))
            if value is not None
        }
        gh_repo = self._repo(repo)
        url = f"{gh_repo.url}/issues/{int(number)}"
        if fields:
            _, data = gh_repo.requester.requestJsonAndCheck("PATCH", url, input=fields)
        else:
            _, data = gh_repo.requester.requestJsonAndCheck("GET", url)
        return _issue_ref(data)

    def open_pull(self, repo: str, *, head: str, base: str, title: str, body: str) -> PullInfo:
        """The open PR from branch ``head`` (of ``repo``) into ``base``, left as it is; else
        a new one.  A POST that failed but landed, or lost a race ("A pull request already
        exists"), returns the PR found again."""
        checked_branch(head)
        checked_branch(base)
        found = self._open_pull_from(repo, head, base)
        if found is not None:
            return found

        def create() -> PullInfo:
            try:
                return self._post_pull(repo, head, base, title, body)
            except GitHubUnprocessable:
                again = self._open_pull_from(repo, head, base)
                if again is None:
                    raise
                return again

        return create_once(create, lambda: self._open_pull_from(repo, head, base))

    @translated
    def _open_pull_from(self, repo: str, head: str, base: str) -> PullInfo | None:
        gh_repo = self._repo(repo)
        owner = repo.split("/")[0]
        pulls = gh_repo.get_pulls(state="open", head=f"{owner}:{head}", base=base)
        return next((pull_info(pr) for pr in pulls if pr.head.ref == head), None)

    @translated
    def _post_pull(self, repo: str, head: str, base: str, title: str, body: str) -> PullInfo:
        return pull_info(self._repo(repo).create_pull(base=base, head=head, title=title, body=body))


def _issue_ref(data: dict[str, Any]) -> IssueRef:
    return IssueRef(
        number=int(data["number"]),
        url=str(data.get("html_url") or ""),
        title=str(data.get("title") or ""),
        body=str(data.get("body") or ""),
        state=str(data.get("state") or ""),
        is_pull=data.get("pull_request") is not None,
    )
