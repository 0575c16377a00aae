"""A recording, in-memory stand-in for ``bot.adapters.github.client.GitHubClient`` (bedevere style).

It keeps a linear commit history of file snapshots, PRs, one marked comment per PR
and check runs per head SHA, and records every call as ``(method, args)`` so tests can
assert what the review did.  For unit tests of ``bot.features.review.pull``; the real client is
tested against the HTTP fake in ``tests.fakes.github_api``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from bot.adapters.github.client import (
    ChangedFile,
    CheckAction,
    CheckConclusion,
    CheckRunRef,
    CommentRef,
    GitHubNotFound,
    PullInfo,
)


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

    def open_pull(
        self, number: int, files: dict[str, str], *, title: str = "Tune gates"
    ) -> PullInfo:
        """Open PR ``number`` from a branch off main's tip changing ``files``."""
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
        return pull

    def merged_pull(self, number: int, title: str, sha: str) -> PullInfo:
        """Record that commit ``sha`` came with merged PR ``number``."""
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
        return pull

    def writes(self) -> list[str]:
        """The names of the write calls made, in order."""
        return [name for name, _ in self.calls if name.startswith("upsert")]

    # ------------------------------------------------------------ ReviewAPI

    def pull(self, repo: str, number: int) -> PullInfo:
        self.calls.append(("pull", (repo, number)))
        if number not in self.pulls:
            raise GitHubNotFound(f"no PR {number}", 404)
        return self.pulls[number]

    def pull_files(self, repo: str, number: int) -> list[ChangedFile]:
        self.calls.append(("pull_files", (repo, number)))
        return list(self.pull_file_list[number])

    def file_text(self, repo: str, path: str, ref: str) -> str | None:
        self.calls.append(("file_text", (repo, path, ref)))
        sha = self.commits[-1] if ref == "main" else ref
        return self.snapshots.get(sha, {}).get(path)

    def merge_base(self, repo: str, base: str, head: str) -> str:
        self.calls.append(("merge_base", (repo, base, head)))
        return base

    def compare_commits(self, repo: str, base: str, head: str, limit: int = 250) -> list[str]:
        self.calls.append(("compare_commits", (repo, base, head)))
        if base not in self.commits or head not in self.commits:
            raise GitHubNotFound("no common ancestor", 404)
        start, end = self.commits.index(base), self.commits.index(head)
        return self.commits[start + 1 : end + 1][:limit]

    def pulls_for_commit(self, repo: str, sha: str) -> list[PullInfo]:
        self.calls.append(("pulls_for_commit", (repo, sha)))
        found = list(self.commit_pulls.get(sha, []))
        found += [p for p in self.pulls.values() if p.head_sha == sha]
        return found

    def upsert_comment(self, repo: str, number: int, body: str, marker: str) -> CommentRef:
        self.calls.append(("upsert_comment", (repo, number, body, marker)))
        assert marker in body
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
    ) -> CheckRunRef:
        self.calls.append(("upsert_check_run", (repo, head_sha, conclusion)))
        found = next((c for c in self.checks.values() if c.head_sha == head_sha), None)
        if found is None:
            self._ids += 1
            found = CheckRecord(self._ids, head_sha, "", "", "", "", (), None)
            self.checks[found.id] = found
        found.conclusion, found.title, found.summary, found.text = conclusion, title, summary, text
        found.actions, found.external_id = actions, external_id
        return CheckRunRef(
            id=found.id,
            url=f"https://github.com/{self.repo}/runs/{found.id}",
            conclusion=conclusion,
            external_id=external_id,
        )

    def check_for(self, head_sha: str) -> CheckRecord:
        """The check run on ``head_sha`` (fails the test when there is none)."""
        return next(c for c in self.checks.values() if c.head_sha == head_sha)
