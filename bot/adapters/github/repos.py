"""Repositories, branches and trees for the drift watch, over PyGithub: which repositories
the installation sees, a branch's head, the files of a commit, creating or moving a branch,
and the rate limit left (read from the last response, never asked for)."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from github import GithubException
from github.GitRef import GitRef
from github.PaginatedList import PaginatedList

from bot.adapters.github.api import RepoInfo
from bot.adapters.github.errors import GitHubUnprocessable, translated
from bot.adapters.github.support import (
    Listed,
    RepoAccess,
    checked_branch,
    checked_sha,
    create_once,
)

log = logging.getLogger(__name__)


class ReposMixin(RepoAccess):
    """The repository, branch and tree operations of ``GitHubClient``."""

    @translated
    def installation_repositories(self) -> list[RepoInfo]:
        """Every repository of this installation (all pages of
        ``GET /installation/repositories``, 100 a page)."""
        listed = PaginatedList(
            Listed,
            self._gh.requester,
            "/installation/repositories",
            {"per_page": 100},
            list_item="repositories",
        )
        return [_repo_info(item.raw_data) for item in listed]

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
            _, data = gh_repo.requester.requestJsonAndCheck("GET", url)
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        return str(data["object"]["sha"])

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


def _repo_info(data: dict[str, Any]) -> RepoInfo:
    return RepoInfo(
        full_name=str(data["full_name"]),
        default_branch=str(data.get("default_branch") or "main"),
        private=bool(data.get("private")),
        archived=bool(data.get("archived")),
        url=str(data.get("html_url") or ""),
    )
