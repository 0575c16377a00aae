"""A recording, in-memory ``GitHubAPI`` (bedevere style): the one fake of the protocol.

It keeps a linear commit history of file snapshots, PRs and their branches, one marked
comment per PR, replies by marker, check runs per head SHA, reviews, permissions, and
records every call as ``(method, args)`` so tests can assert what a feature did.  Switches
make GitHub refuse a push (403), a commit (409), line comments (422), reviews (403) or
issues (403: ``issues_forbidden``), or keep showing a PR's old head; ``max_file_bytes``
and ``unreadable`` make file reads fail.  As the real client does, it refuses commits that
are not hex SHAs, unsafe file paths and branch names (``GitHubUnsafeInput``), and counts
only the comments it wrote as its own.  Issues and the PRs it opens
(``open_pull(repo, head=…)``) are ``items``, numbered with the PRs; ``add_item`` adds
another account's; ``open_pull(number, files)`` arranges a PR instead.  mypy checks it
against ``GitHubAPI`` (``_IMPLEMENTS`` below); the real client is tested against the HTTP
fake in ``tests.fakes.github_api``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, overload

from bot.adapters.github.api import (
    CHECK_NAME,
    ChangedFile,
    CheckAction,
    CheckConclusion,
    CheckRunRef,
    CommentRef,
    GitHubAPI,
    IssueRef,
    PullInfo,
    Reaction,
    RepoInfo,
    ReviewComment,
)
from bot.adapters.github.errors import (
    GitHubError,
    GitHubFileTooLarge,
    GitHubForbidden,
    GitHubNotFound,
    GitHubPermanentError,
    GitHubUnprocessable,
    GitHubUnsafeInput,
)
from bot.core.api_paths import branch_problem, is_sha, repo_path_problem
from tests.fakes.github_state import diff_snapshots

REPLY_MARKER = "<!-- threshold-bot:reply"


@dataclass
class CheckRecord:
    """A check run as the fake stores it."""

    id: int
    head_sha: str
    conclusion: str
    title: str
    summary: str
    text: str
    actions: tuple[CheckAction, ...]
    external_id: str | None


@dataclass
class Item:
    """An issue or a PR as the issues API shows it; ``own``: written by this App."""

    number: int
    title: str
    body: str
    state: str = "open"
    is_pull: bool = False
    own: bool = True
    labels: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()

    def ref(self, repo: str) -> IssueRef:
        kind = "pull" if self.is_pull else "issues"
        url = f"https://github.com/{repo}/{kind}/{self.number}"
        return IssueRef(self.number, url, self.title, self.body, self.state, self.is_pull)


@dataclass
class RecordingGitHub:
    """One repository ``owner/repo``: commits on ``main``, PRs, comments and check runs."""

    repo: str = "owner/repo"
    commits: list[str] = field(default_factory=list)  # linear history of main, oldest first
    snapshots: dict[str, dict[str, str]] = field(default_factory=dict)  # sha -> path -> text
    pulls: dict[int, PullInfo] = field(default_factory=dict)
    pull_file_list: dict[int, list[ChangedFile]] = field(default_factory=dict)
    commit_pulls: dict[str, list[PullInfo]] = field(default_factory=dict)
    comments: dict[int, CommentRef] = field(default_factory=dict)  # PR number -> comment
    checks: dict[int, CheckRecord] = field(default_factory=dict)
    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    levels: dict[str, str] = field(default_factory=dict)  # login -> permission (default read)
    branches: dict[str, str] = field(default_factory=dict)  # PR branch -> its head SHA
    replies: dict[str, str] = field(default_factory=dict)  # reply marker -> body
    reviews: list[tuple[str, tuple[ReviewComment, ...]]] = field(default_factory=list)
    push_forbidden: bool = False  # GitHub answers 403 to a commit
    stale: bool = False  # GitHub still shows the PR's old head after the branch moved
    reject_lines: bool = False  # GitHub answers 422 to a review with line comments
    conflict: bool = False  # GitHub answers 409 to a commit (the file's SHA moved)
    review_forbidden: bool = False  # the App may not post reviews
    max_file_bytes: int | None = None  # file_text refuses larger files, as the client does
    unreadable: dict[str, GitHubError] = field(default_factory=dict)  # path -> file_text raises
    items: dict[int, Item] = field(default_factory=dict)  # issues and App-opened PRs by number
    repos: list[RepoInfo] = field(default_factory=list)  # the installation's (default: repo)
    issues_forbidden: bool = False  # the App lacks the issues permission: 403 on writes
    rate: int | None = None  # what rate_remaining answers
    _ids: int = 100

    # ------------------------------------------------------------ arranging

    def commit(self, files: dict[str, str], parent: str | None = None) -> str:
        """Add a commit (a full snapshot = ``parent``'s files updated with ``files``)."""
        base = dict(self.snapshots[parent]) if parent else {}
        if parent is None and self.commits:
            base = dict(self.snapshots[self.commits[-1]])
        base.update(files)
        sha = hashlib.sha1(f"{len(self.snapshots)}{sorted(base.items())}".encode()).hexdigest()
        self.snapshots[sha] = base
        if parent is None:
            self.commits.append(sha)
        return sha

    @overload
    def open_pull(
        self, number: int, files: dict[str, str], /, *, title: str = "Tune gates"
    ) -> PullInfo: ...

    @overload
    def open_pull(self, repo: str, *, head: str, base: str, title: str, body: str) -> PullInfo: ...

    def open_pull(
        self,
        repo: str | int,
        files: dict[str, str] | None = None,
        *,
        head: str = "",
        base: str = "main",
        title: str = "Tune gates",
        body: str = "",
    ) -> PullInfo:
        """``open_pull(number, files)`` arranges PR ``number`` from a branch off main's tip
        changing ``files``; ``open_pull(repo, head=…, base=…, title=…, body=…)`` is
        ``GitHubAPI.open_pull``."""
        if isinstance(repo, int):
            return self._arrange_pull(repo, files or {}, title=title)
        return self._open_pull(repo, head=head, base=base, title=title, body=body)

    def _arrange_pull(self, number: int, files: dict[str, str], *, title: str) -> PullInfo:
        base = self.commits[-1]
        head = self.commit(files, parent=base)
        changed = [
            ChangedFile(path=p, status="modified" if p in self.snapshots[base] else "added")
            for p in sorted(files)
        ]
        pull = PullInfo(
            number=number,
            title=title,
            url=f"https://github.com/{self.repo}/pull/{number}",
            state="open",
            draft=False,
            merged=False,
            author="octocat",
            base_ref="main",
            base_sha=base,
            head_ref=f"branch-{number}",
            head_sha=head,
            head_repo=self.repo,
        )
        self.pulls[number] = pull
        self.pull_file_list[number] = changed
        self.branches[pull.head_ref] = head
        return pull

    def merged_pull(self, number: int, title: str, sha: str) -> PullInfo:
        """Record that commit ``sha`` came with merged PR ``number``; the PR's files are what
        ``sha`` changed on main (with their patches)."""
        pull = PullInfo(
            number=number,
            title=title,
            url=f"https://github.com/{self.repo}/pull/{number}",
            state="closed",
            draft=False,
            merged=True,
            author="octocat",
            base_ref="main",
            base_sha=sha,
            head_ref=f"feature-{number}",
            head_sha=sha,
            head_repo=self.repo,
        )
        self.commit_pulls.setdefault(sha, []).append(pull)
        at = self.commits.index(sha) if sha in self.commits else 0
        old = self.snapshots[self.commits[at - 1]] if at else {}
        self.pull_file_list[number] = [
            ChangedFile(path=c.path, status=c.status, patch=c.patch)
            for c in diff_snapshots(old, self.snapshots.get(sha, {}))
        ]
        return pull

    def add_item(self, title: str, body: str, *, own: bool = False, state: str = "open") -> Item:
        """An issue (by another account unless ``own``), numbered after PRs and items."""
        item = Item(self._next_number(), title, body, state, own=own)
        self.items[item.number] = item
        return item

    def _next_number(self) -> int:
        return max([0, *self.pulls, *self.items]) + 1

    def writes(self) -> list[str]:
        """The names of the write calls made, in order."""
        return [name for name, _ in self.calls if name.startswith("upsert")]

    def called(self, name: str) -> list[tuple[Any, ...]]:
        """The arguments of every call of ``name``, in order."""
        return [args for called, args in self.calls if called == name]

    # ------------------------------------------------------------ GitHubAPI

    def pull(self, repo: str, number: int) -> PullInfo:
        self.calls.append(("pull", (repo, number)))
        if number not in self.pulls:
            raise GitHubNotFound(f"no PR {number}", 404)
        pull = self.pulls[number]
        if self.stale:
            return pull
        return replace(pull, head_sha=self.branches.get(pull.head_ref, pull.head_sha))

    def pull_files(self, repo: str, number: int, limit: int | None = None) -> list[ChangedFile]:
        self.calls.append(("pull_files", (repo, number)))
        return list(self.pull_file_list[number])[:limit]

    def file_text(
        self, repo: str, path: str, ref: str, *, max_bytes: int | None = None
    ) -> str | None:
        self.calls.append(("file_text", (repo, path, ref)))
        if repo_path_problem(path) is not None:
            raise GitHubUnsafeInput(f"refusing the repository path {path!r}")
        if path in self.unreadable:
            raise self.unreadable[path]
        sha = self.commits[-1] if ref == "main" else self.branches.get(ref, ref)
        text = self.snapshots.get(sha, {}).get(path)
        size = len(text.encode()) if text is not None else 0
        if self.max_file_bytes is not None and size > self.max_file_bytes:
            raise GitHubFileTooLarge(path, size, self.max_file_bytes)
        if max_bytes is not None and size > max_bytes:
            raise GitHubFileTooLarge(path, size, max_bytes, setting=None)
        return text

    def merge_base(self, repo: str, base: str, head: str) -> str:
        self.calls.append(("merge_base", (repo, base, head)))
        return base

    def compare_commits(self, repo: str, base: str, head: str, limit: int = 250) -> list[str]:
        self.calls.append(("compare_commits", (repo, base, head)))
        _check_shas(base, head)
        if base not in self.commits or head not in self.commits:
            raise GitHubNotFound("no common ancestor", 404)
        start, end = self.commits.index(base), self.commits.index(head)
        return self.commits[start + 1 : end + 1][:limit]

    def pulls_for_commit(self, repo: str, sha: str) -> list[PullInfo]:
        self.calls.append(("pulls_for_commit", (repo, sha)))
        _check_shas(sha)
        found = list(self.commit_pulls.get(sha, []))
        found += [p for p in self.pulls.values() if p.head_sha == sha]
        return found

    def permission(self, repo: str, user: str) -> str:
        self.calls.append(("permission", (repo, user)))
        return self.levels.get(user, "read")

    def find_comment(self, repo: str, number: int, marker: str) -> CommentRef | None:
        self.calls.append(("find_comment", (repo, number, marker)))
        found = self.comments.get(number)
        return found if found is not None and marker in found.body else None

    def add_reaction(self, repo: str, comment_id: int, content: Reaction) -> None:
        self.calls.append(("add_reaction", (repo, comment_id, content)))

    def upsert_comment(self, repo: str, number: int, body: str, marker: str) -> CommentRef:
        assert marker in body
        if marker.startswith(REPLY_MARKER):
            self.calls.append(("reply", (repo, number, body)))
            created = marker not in self.replies
            self.replies[marker] = body
            self._ids += 1
            return CommentRef(id=self._ids, url="", body=body, created=created)
        self.calls.append(("upsert_comment", (repo, number, body, marker)))
        existing = self.comments.get(number)
        if existing is None:
            self._ids += 1
            url = f"https://github.com/{self.repo}/pull/{number}#issuecomment-{self._ids}"
            ref = CommentRef(id=self._ids, url=url, body=body, created=True)
        else:
            ref = replace(existing, body=body, created=False)
        self.comments[number] = ref
        return ref

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
        self.calls.append(("upsert_check_run", (repo, head_sha, conclusion)))
        found = next((c for c in self.checks.values() if c.head_sha == head_sha), None)
        if found is None:
            self._ids += 1
            found = CheckRecord(self._ids, head_sha, "", "", "", "", (), None)
            self.checks[found.id] = found
        found.conclusion, found.title, found.summary, found.text = conclusion, title, summary, text
        found.actions, found.external_id = actions, external_id
        return self._check_ref(found)

    def find_check_run(
        self, repo: str, head_sha: str, name: str = CHECK_NAME
    ) -> CheckRunRef | None:
        self.calls.append(("find_check_run", (repo, head_sha, name)))
        found = next((c for c in self.checks.values() if c.head_sha == head_sha), None)
        return self._check_ref(found) if found is not None else None

    def check_run(self, repo: str, check_run_id: int) -> CheckRunRef:
        self.calls.append(("check_run", (repo, check_run_id)))
        if check_run_id not in self.checks:
            raise GitHubNotFound(f"no check run {check_run_id}", 404)
        return self._check_ref(self.checks[check_run_id])

    def commit_file(self, repo: str, branch: str, path: str, text: str, message: str) -> str:
        self.calls.append(("commit_file", (repo, branch, path, text, message)))
        if self.push_forbidden:
            raise GitHubForbidden("Resource not accessible by integration", 403)
        if self.conflict:
            raise GitHubPermanentError(f"GitHub 409: {path} does not match abc123", 409)
        sha = self.commit({path: text}, parent=self.branches[branch])
        self.branches[branch] = sha
        return sha

    def create_review(
        self,
        repo: str,
        number: int,
        *,
        commit_sha: str,
        body: str,
        comments: tuple[ReviewComment, ...] = (),
    ) -> int:
        self.calls.append(("create_review", (repo, number, commit_sha)))
        if self.review_forbidden:
            raise GitHubForbidden("GitHub 403: Resource not accessible by integration", 403)
        if comments and self.reject_lines:
            raise GitHubUnprocessable("Line could not be resolved", 422)
        self.reviews.append((body, comments))
        return len(self.reviews)

    def installation_repositories(self) -> list[RepoInfo]:
        self.calls.append(("installation_repositories", ()))
        return list(self.repos) or [RepoInfo(self.repo, "main", private=False)]

    def repository(self, repo: str) -> RepoInfo:
        self.calls.append(("repository", (repo,)))
        found = [r for r in self.installation_repositories() if r.full_name == repo]
        if not found:
            raise GitHubNotFound(f"no repository {repo}", 404)
        return found[0]

    def branch_head(self, repo: str, branch: str) -> str | None:
        self.calls.append(("branch_head", (repo, branch)))
        _check_branches(branch)
        if branch == "main":
            return self.commits[-1] if self.commits else None
        return self.branches.get(branch)

    def tree_paths(self, repo: str, sha: str) -> list[str]:
        self.calls.append(("tree_paths", (repo, sha)))
        _check_shas(sha)
        if sha not in self.snapshots:
            raise GitHubNotFound(f"no tree {sha}", 404)
        return sorted(self.snapshots[sha])

    def find_items(self, repo: str, marker: str) -> list[IssueRef]:
        self.calls.append(("find_items", (repo, marker)))
        return [
            item.ref(repo)
            for _, item in sorted(self.items.items())
            if item.own and item.state == "open" and marker in item.body
        ]

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
        self.calls.append(("create_issue", (repo, title, body, marker)))
        assert marker in body
        if self.issues_forbidden:
            raise GitHubForbidden("GitHub 403: Resource not accessible by integration", 403)
        item = Item(self._next_number(), title, body, labels=tuple(labels))
        item.assignees = tuple(assignees)
        self.items[item.number] = item
        return item.ref(repo)

    def update_issue(
        self,
        repo: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: Literal["open", "closed"] | None = None,
    ) -> IssueRef:
        self.calls.append(("update_issue", (repo, number, title, body, state)))
        item = self.items.get(number)
        if item is None:
            raise GitHubNotFound(f"no issue {number}", 404)
        if self.issues_forbidden and not item.is_pull:
            raise GitHubForbidden("GitHub 403: Resource not accessible by integration", 403)
        item.title = item.title if title is None else title
        item.body = item.body if body is None else body
        item.state = item.state if state is None else state
        if number in self.pulls:
            pull = self.pulls[number]
            self.pulls[number] = replace(pull, title=item.title, state=item.state)
        return item.ref(repo)

    def create_branch(self, repo: str, branch: str, sha: str, *, force: bool = False) -> None:
        self.calls.append(("create_branch", (repo, branch, sha, force)))
        _check_branches(branch)
        _check_shas(sha)
        if sha not in self.snapshots:
            raise GitHubUnprocessable("Object does not exist", 422)
        current = self.branches.get(branch)
        if current not in (None, sha) and not force:
            raise GitHubUnprocessable("Reference already exists", 422)
        self.branches[branch] = sha

    def _open_pull(self, repo: str, *, head: str, base: str, title: str, body: str) -> PullInfo:
        self.calls.append(("open_pull", (repo, head, base, title)))
        _check_branches(head, base)
        for pull in self.pulls.values():
            if pull.state == "open" and (pull.head_ref, pull.base_ref) == (head, base):
                return pull
        if head not in self.branches:
            raise GitHubUnprocessable("Validation Failed: head", 422)
        number = self._next_number()
        base_sha = self.commits[-1] if base == "main" else self.branches[base]
        pull = PullInfo(
            number=number,
            title=title,
            url=f"https://github.com/{self.repo}/pull/{number}",
            state="open",
            draft=False,
            merged=False,
            author="threshold-bot[bot]",
            base_ref=base,
            base_sha=base_sha,
            head_ref=head,
            head_sha=self.branches[head],
            head_repo=self.repo,
        )
        self.pulls[number] = pull
        self.items[number] = Item(number, title, body, is_pull=True)
        return pull

    def rate_remaining(self) -> int | None:
        return self.rate

    def _check_ref(self, check: CheckRecord) -> CheckRunRef:
        return CheckRunRef(
            id=check.id,
            url=f"https://github.com/{self.repo}/runs/{check.id}",
            conclusion=check.conclusion,
            external_id=check.external_id,
        )

    def check_for(self, head_sha: str) -> CheckRecord:
        """The check run on ``head_sha`` (fails the test when there is none)."""
        return next(c for c in self.checks.values() if c.head_sha == head_sha)


def _check_shas(*commits: str) -> None:
    for commit in commits:
        if not is_sha(commit):
            raise GitHubUnsafeInput(f"refusing {commit!r} as a commit: not a hex SHA")


def _check_branches(*names: str) -> None:
    for name in names:
        if branch_problem(name) is not None:
            raise GitHubUnsafeInput(f"refusing {name!r} as a branch")


_IMPLEMENTS: type[GitHubAPI] = RecordingGitHub  # mypy: the fake implements the whole protocol
