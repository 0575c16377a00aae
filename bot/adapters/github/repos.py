"""Repositories, branches and trees for the drift watch, over PyGithub: which repositories
the installation sees, a branch's head, the files of a commit, creating or moving a branch,
and the rate limit left (read from the last response, never asked for).

A branch head and each page of the installation's repositories are read conditionally when
the client has its installation's ``ETags`` (``conditional``): asked again with the ETag of
GitHub's last answer (``If-None-Match``), a ``304 Not Modified`` (free of rate limit, no body)
is answered from what was kept of that answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar, cast
from urllib.parse import quote

from github import GithubException
from github.GitRef import GitRef
from requests.utils import parse_header_links

from bot.adapters.github.api import RepoInfo
from bot.adapters.github.errors import GitHubUnprocessable, translated
from bot.adapters.github.support import (
    RepoAccess,
    checked_branch,
    checked_sha,
    create_once,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
INSTALLATION_REPOSITORIES = "/installation/repositories"


class ReposMixin(RepoAccess):
    """The repository, branch and tree operations of ``GitHubClient``."""

    @translated
    def installation_repositories(self) -> list[RepoInfo]:
        """Every repository of this installation (all pages of
        ``GET /installation/repositories``, 100 a page).

        Each page is read conditionally, by its own URL, and the next page's URL is the
        ``Link: rel="next"`` of that page's 200, kept with it: a 304 means the page's body is
        unchanged, and the body holds ``total_count``, which fixes how many pages there are.
        So a repository added, removed, renamed, archived or pushed to changes a page's body,
        that page is read in full, and the list is all 304s only while nothing changed.  Every
        page is asked every time; a page linking back to one already asked ends the list.
        """
        listed: list[RepoInfo] = []
        base = self._gh.requester.base_url
        url: str | None = f"{base}{INSTALLATION_REPOSITORIES}?per_page=100"
        asked: set[str] = set()
        while url is not None and url not in asked:  # a page links back: the end
            asked.add(url)
            page = self._conditional_get(url, _repositories_page)
            listed.extend(page.repositories)
            url = page.next_url
        return listed

    @translated
    def repository(self, repo: str) -> RepoInfo:
        """The repository ``repo`` (``GET /repos/{owner}/{repo}``)."""
        gh_repo = self._repo(repo)
        _, data = gh_repo.requester.requestJsonAndCheck("GET", gh_repo.url)
        return _repo_info(data)

    @translated
    def branch_head(self, repo: str, branch: str) -> str | None:
        """The commit SHA branch ``branch`` points at; None when there is no such branch."""
        gh_repo = self._repo(repo)
        url = f"{gh_repo.url}/git/ref/heads/{quote(checked_branch(branch))}"
        try:
            return self._conditional_get(url, lambda _, data: str(data["object"]["sha"]))
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise

    def _conditional_get(self, url: str, parse: Callable[[dict[str, Any], Any], T]) -> T:
        """``parse(headers, json)`` of GitHub's answer to ``GET url``, asked with the ETag
        kept for ``url`` (this installation's ``ETags``): on ``304 Not Modified`` (the one
        answer to these GETs without a body) the kept value.  One caller per URL, so what
        is kept under it is always what ``parse`` made."""
        kept = self._etags.get(url) if self._etags is not None else None
        asked = {"If-None-Match": kept.etag} if kept is not None else None
        headers, data = self._gh.requester.requestJsonAndCheck("GET", url, headers=asked)
        if kept is not None and data is None:
            return cast(T, kept.value)
        value = parse(headers, data)
        etag = headers.get("etag")
        if self._etags is not None and isinstance(etag, str) and etag:
            self._etags.put(url, etag, value)
        return value

    @translated
    def tree_paths(self, repo: str, sha: str) -> list[str]:
        """The paths of the files (blobs) in the tree of commit ``sha``, recursively, as
        GitHub lists them; a tree over GitHub's cap (100,000 entries) is listed truncated,
        with a log line."""
        tree = self._repo(repo).get_git_tree(checked_sha(sha), recursive=True)
        if tree.raw_data.get("truncated"):
            log.warning("GitHub truncated the tree of %s at %s", repo, sha)
        return [entry.path for entry in tree.tree if entry.type == "blob"]

    def create_branch(self, repo: str, branch: str, sha: str, *, force: bool = False) -> None:
        """Create branch ``branch`` at commit ``sha``.  A branch already there is left; one
        elsewhere is moved to ``sha`` (a force push) with ``force``, else
        ``GitHubUnprocessable``.  A POST that failed but landed counts as done."""
        checked_branch(branch)
        checked_sha(sha)
        head = self.branch_head(repo, branch)
        if head is None:
            try:
                create_once(
                    lambda: self._create_ref(repo, branch, sha),
                    lambda: True if self.branch_head(repo, branch) == sha else None,
                )
                return
            except GitHubUnprocessable:  # created meanwhile, or GitHub does not know sha
                head = self.branch_head(repo, branch)
                if head is None:
                    raise
        if head == sha:
            return
        if not force:
            raise GitHubUnprocessable(f"branch {branch} exists at {head}, not at {sha}", 422)
        self._move_ref(repo, branch, sha)

    @translated
    def _create_ref(self, repo: str, branch: str, sha: str) -> bool:
        self._repo(repo).create_git_ref(f"refs/heads/{branch}", sha)
        return True

    @translated
    def _move_ref(self, repo: str, branch: str, sha: str) -> None:
        gh_repo = self._repo(repo)
        url = f"{gh_repo.url}/git/refs/heads/{quote(branch)}"
        GitRef(gh_repo.requester, url=url).edit(sha, force=True)

    def rate_remaining(self) -> int | None:
        """Requests left in the rate-limit window, as the last response said
        (``X-RateLimit-Remaining``); None before the first response.  Sends nothing."""
        remaining, _ = self._gh.requester.rate_limiting
        return None if remaining < 0 else remaining


class _Page(NamedTuple):
    """One page of the installation's repositories, and the URL of the next page."""

    repositories: tuple[RepoInfo, ...]
    next_url: str | None


def _repositories_page(headers: dict[str, Any], data: Any) -> _Page:
    links = parse_header_links(str(headers.get("link") or ""))
    following = [link.get("url") for link in links if link.get("rel") == "next"]
    return _Page(
        tuple(_repo_info(item) for item in data["repositories"]),
        following[0] if following else None,
    )


def _repo_info(data: dict[str, Any]) -> RepoInfo:
    return RepoInfo(
        full_name=str(data["full_name"]),
        default_branch=str(data.get("default_branch") or "main"),
        private=bool(data.get("private")),
        archived=bool(data.get("archived")),
    )
