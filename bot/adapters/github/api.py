"""What the bot asks of GitHub: the ``GitHubAPI`` protocol and the values it returns.

``GitHubAPI`` is the one interface every caller types against: the PyGithub adapter
(``bot.adapters.github.client.GitHubClient``) and every test fake implement it, and
mypy checks both.  Methods raise only ``bot.adapters.github.errors.GitHubError``s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

CHECK_NAME = "threshold-bot"
MAX_OUTPUT_CHARS = 65_535  # check-run output summary / text limit

CheckConclusion = Literal["success", "action_required", "neutral", "failure"]
Reaction = Literal["+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"]


@dataclass(frozen=True)
class PullInfo:
    """What the bot needs to know about a pull request."""

    number: int
    title: str
    url: str  # html_url
    state: str  # "open" / "closed"
    draft: bool
    merged: bool
    author: str
    base_ref: str
    base_sha: str
    head_ref: str
    head_sha: str
    head_repo: str | None  # "owner/name" of the head repository (a fork, or this repo)
    maintainer_can_modify: bool = False  # a fork's owner lets maintainers (and the App) push
    private: bool = True  # the base repository is private (unknown: taken as private)


@dataclass(frozen=True)
class ChangedFile:
    """One file of a PR's diff."""

    path: str
    status: str  # added / removed / modified / renamed / copied / changed / unchanged
    previous_path: str | None = None
    patch: str | None = None  # the unified diff; GitHub sends none for binary or huge diffs


@dataclass(frozen=True)
class CommentRef:
    """A PR (issue) comment."""

    id: int
    url: str
    body: str
    created: bool = False  # True when this call created it


@dataclass(frozen=True)
class CheckAction:
    """A check-run button; GitHub's limits are enforced on construction."""

    label: str
    identifier: str
    description: str

    def __post_init__(self) -> None:
        limits = (("label", 20), ("identifier", 20), ("description", 40))
        for field, limit in limits:
            value = getattr(self, field)
            if not 0 < len(value) <= limit:
                raise ValueError(f"check action {field} must be 1-{limit} characters: {value!r}")


@dataclass(frozen=True)
class CheckRunRef:
    """A check run created or updated by the bot."""

    id: int
    url: str
    conclusion: str | None
    external_id: str | None
    created: bool = False


@dataclass(frozen=True)
class ReviewComment:
    """One line comment of a PR review (``body`` may hold a ```suggestion block)."""

    path: str
    line: int
    body: str
    start_line: int | None = None  # first line of a multi-line comment (``line`` is the last)


@dataclass(frozen=True)
class RepoInfo:
    """A repository as the installation sees it."""

    full_name: str
    default_branch: str
    private: bool
    archived: bool = False
    url: str = ""  # its web address (``html_url``): "" when the listing did not say


@dataclass(frozen=True)
class IssueRef:
    """An issue, or a PR seen through the issues API (``is_pull``)."""

    number: int
    url: str  # html_url
    title: str
    body: str
    state: str  # "open" / "closed"
    is_pull: bool


class GitHubAPI(Protocol):
    """Typed operations on the repositories of one installation (``repo`` is ``owner/name``)."""

    def pull(self, repo: str, number: int) -> PullInfo:
        """The pull request ``number``."""
        ...

    def pull_files(self, repo: str, number: int, limit: int | None = None) -> list[ChangedFile]:
        """Every file in the PR's diff (all pages), or only its first ``limit`` files (one
        request for ``limit`` <= 100)."""
        ...

    def file_text(
        self, repo: str, path: str, ref: str, *, max_bytes: int | None = None
    ) -> str | None:
        """The text of ``path`` at ``ref``; None when the file (or the ref) does not exist.

        Raises ``GitHubFileTooLarge`` for a file over the client's size limit, or over
        ``max_bytes`` when lower, unread; ``GitHubUnsafeInput`` for a ``path`` with ``..``
        segments, absolute, or with a backslash or a control character."""
        ...

    def merge_base(self, repo: str, base: str, head: str) -> str:
        """The SHA of the merge base of ``base`` and ``head`` (what a PR diff starts from)."""
        ...

    def compare_commits(self, repo: str, base: str, head: str, limit: int = 250) -> list[str]:
        """SHAs of the commits reachable from ``head`` but not ``base``, oldest first.

        Commits (here and wherever a method takes one) must be hex SHAs; anything else
        raises ``GitHubUnsafeInput`` unsent."""
        ...

    def pulls_for_commit(self, repo: str, sha: str) -> list[PullInfo]:
        """The PRs that contain commit ``sha`` (merged ones have ``merged=True``)."""
        ...

    def permission(self, repo: str, user: str) -> str:
        """``user``'s effective permission level on ``repo`` (``admin`` … ``none``)."""
        ...

    def find_comment(self, repo: str, number: int, marker: str) -> CommentRef | None:
        """The oldest comment on PR ``number`` written by this App and holding ``marker``:
        another account's comment, another bot's included, is never the App's."""
        ...

    def upsert_comment(self, repo: str, number: int, body: str, marker: str) -> CommentRef:
        """Edit the App's marked comment of PR ``number`` to ``body``, or create it
        (idempotently)."""
        ...

    def add_reaction(self, repo: str, comment_id: int, content: Reaction) -> None:
        """React to an issue comment (e.g. ``eyes`` on a slash command)."""
        ...

    def find_check_run(
        self, repo: str, head_sha: str, name: str = CHECK_NAME
    ) -> CheckRunRef | None:
        """The newest check run of this App named ``name`` on ``head_sha``."""
        ...

    def upsert_check_run(
        self,
        repo: str,
        head_sha: str,
        *,
        conclusion: CheckConclusion,
        title: str,
        summary: str,
        text: str = "",
        actions: tuple[CheckAction, ...] = (),
        external_id: str | None = None,
        details_url: str | None = None,
        name: str = CHECK_NAME,
    ) -> CheckRunRef:
        """Complete this App's check run ``name`` on ``head_sha``, creating it if needed."""
        ...

    def check_run(self, repo: str, check_run_id: int) -> CheckRunRef:
        """The check run ``check_run_id``."""
        ...

    def commit_file(self, repo: str, branch: str, path: str, text: str, message: str) -> str:
        """Commit ``text`` as the new content of ``path`` on ``branch``; return the commit SHA."""
        ...

    def create_review(
        self,
        repo: str,
        number: int,
        *,
        commit_sha: str,
        body: str,
        comments: tuple[ReviewComment, ...] = (),
    ) -> int:
        """Post a ``COMMENT`` review on PR ``number`` with line comments; return its id."""
        ...

    # ---------------------------------------------------------------- drift watch

    def installation_repositories(self) -> list[RepoInfo]:
        """Every repository of this installation (all pages)."""
        ...

    def repository(self, repo: str) -> RepoInfo:
        """The repository ``repo``."""
        ...

    def branch_head(self, repo: str, branch: str) -> str | None:
        """The commit SHA branch ``branch`` points at; None when there is no such branch.
        A name git refuses as a branch raises ``GitHubUnsafeInput`` unsent."""
        ...

    def tree_paths(self, repo: str, sha: str) -> list[str]:
        """The paths of the files in the tree of commit ``sha``, recursively (GitHub's own
        cap of 100,000 entries applies)."""
        ...

    def find_items(self, repo: str, marker: str) -> list[IssueRef]:
        """The OPEN issues and PRs written by this App whose body holds ``marker``, oldest
        first; another account's items are never the App's."""
        ...

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
        """Open an issue whose ``body`` holds ``marker`` (idempotently: a POST that failed
        but landed is found by ``marker``).  Labels GitHub does not know are created;
        assignees it refuses are dropped.  ``GitHubForbidden`` without the ``issues``
        permission."""
        ...

    def update_issue(
        self,
        repo: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: Literal["open", "closed"] | None = None,
    ) -> IssueRef:
        """Edit issue ``number`` (a PR's too): only the fields given."""
        ...

    def create_branch(self, repo: str, branch: str, sha: str, *, force: bool = False) -> None:
        """Create branch ``branch`` at commit ``sha``; a branch already at ``sha`` is left.
        A branch elsewhere is moved to ``sha`` (a force push) only with ``force``, else
        ``GitHubUnprocessable``."""
        ...

    def open_pull(self, repo: str, *, head: str, base: str, title: str, body: str) -> PullInfo:
        """The open PR from branch ``head`` of ``repo`` into ``base``, as it is (its body
        left); else a new one (idempotently)."""
        ...

    def rate_remaining(self) -> int | None:
        """Requests left in the rate-limit window, from the last response; None before the
        first one.  Sends no request."""
        ...


GitHubFactory = Callable[[int], GitHubAPI]
"""Installation id -> the ``GitHubAPI`` of that installation."""
