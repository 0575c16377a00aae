"""What the parts of ``GitHubClient`` share: the PyGithub handle and who the client acts as
(``RepoAccess``), the checks that keep outside strings out of request paths, idempotent
creation, listings kept raw, and ``PullInfo`` from PyGithub's pull request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

from github import Github
from github.GithubObject import NonCompletableGithubObject
from github.PullRequest import PullRequest
from github.Repository import Repository

from bot.adapters.github.api import PullInfo
from bot.adapters.github.conditional import ETags
from bot.adapters.github.errors import GitHubTransientError, GitHubUnsafeInput
from bot.adapters.github.identity import AppLogin, is_own_comment
from bot.core.api_paths import branch_problem, is_full_name, is_sha, repo_path_problem

T = TypeVar("T")


class RepoAccess:
    """PyGithub for one installation, and who the client acts as: only what that App
    (``app_id``) or its bot user (``login``) wrote is its own (without either, nothing is).
    ``etags``: that installation's kept answers, for conditional reads (none: plain reads)."""

    def __init__(
        self,
        gh: Github,
        *,
        app_id: int | None = None,
        login: AppLogin | None = None,
        etags: ETags | None = None,
    ) -> None:
        self._gh = gh
        self._app_id = app_id
        self._login = login
        self._etags = etags

    def _repo(self, repo: str) -> Repository:
        if not is_full_name(repo):
            raise GitHubUnsafeInput(f"refusing {shown(repo)} as a repository: not owner/name")
        return self._gh.get_repo(repo)  # lazy: no request until used

    def _login_name(self) -> str | None:
        return self._login.get() if self._login is not None else None

    def _is_own(self, item: dict[str, Any]) -> bool:
        """Whether a comment, issue or PR (GitHub's JSON) was written by this App."""
        return is_own_comment(item, self._app_id, self._login_name())


class Listed(NonCompletableGithubObject):
    """An item of a listing kept as GitHub sent it (``raw_data``): reading a field GitHub
    left out fetches nothing."""

    def _initAttributes(self) -> None:
        pass

    def _useAttributes(self, attributes: dict[str, Any]) -> None:
        pass


def checked_sha(value: str) -> str:
    """``value`` if it is a hex commit SHA; else ``GitHubUnsafeInput``."""
    if not is_sha(value):
        raise GitHubUnsafeInput(f"refusing {shown(value)} as a commit: not a hex SHA")
    return value


def checked_branch(name: str) -> str:
    """``name`` if git accepts it as a branch name; else ``GitHubUnsafeInput``."""
    problem = branch_problem(name)
    if problem is not None:
        raise GitHubUnsafeInput(f"refusing {shown(name)} as a branch: {problem}")
    return name


def quoted_path(path: str) -> str:
    """A repository file path, each segment percent-quoted; ``GitHubUnsafeInput`` when it
    has a ``..`` segment, is absolute, or holds a backslash or a control character."""
    problem = repo_path_problem(path)
    if problem is not None:
        raise GitHubUnsafeInput(f"refusing the repository path {shown(path)}: {problem}")
    return "/".join(quote(part, safe="") for part in path.split("/"))


def shown(value: str) -> str:
    """An outside string for an error message: quoted, escaped, clipped."""
    return repr(value[:80] + ("…" if len(value) > 80 else ""))


def create_once(create: Callable[[], T], reuse: Callable[[], T | None]) -> T:
    """Create a resource; after a transient failure, reuse it if it landed, else try once more."""
    try:
        return create()
    except GitHubTransientError:
        reused = reuse()
        return reused if reused is not None else create()


def pull_info(pr: PullRequest) -> PullInfo:
    """The ``PullInfo`` of PyGithub's pull request (``maintainer_can_modify`` left False;
    ``private`` from the base repository the PR's JSON carries: no extra request)."""
    return PullInfo(
        number=pr.number,
        title=pr.title or "",
        url=pr.html_url,
        state=pr.state,
        draft=bool(pr.draft),
        merged=pr.merged_at is not None,
        author=pr.user.login if pr.user is not None else "",
        base_ref=pr.base.ref,
        base_sha=pr.base.sha,
        head_ref=pr.head.ref,
        head_sha=pr.head.sha,
        head_repo=pr.head.repo.full_name if pr.head.repo is not None else None,
        private=pr.base.repo.private if pr.base.repo is not None else True,
    )
