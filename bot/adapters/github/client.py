"""The PyGithub adapter: ``GitHubClient`` implements ``GitHubAPI`` for one installation.

Every method returns the plain values of ``bot.adapters.github.api`` and raises only
``GitHubError`` subclasses.  Creating a comment or a check run is idempotent: POSTs are
not retried inside PyGithub (a POST that failed with a 5xx may still have landed), and
after a transient failure the resource is looked up again before a second attempt.

Outside strings reach request paths only in the shapes of ``bot.core.api_paths``, each
segment percent-quoted: anything else (a run's commit ``../../orgs/x``, a config's path
``../x``) raises ``GitHubUnsafeInput`` before a request is made.

The drift watch's operations (issues, PRs the App opens, branches, trees, the installation's
repositories) are in ``items`` and ``repos``; what all parts share is in ``support``.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from github import Github, GithubException
from github.CheckRun import CheckRun
from github.File import File
from github.IssueComment import IssueComment
from github.PaginatedList import PaginatedList
from github.PullRequest import ReviewComment as GithubReviewComment

from bot.adapters.github.actions import ActionsMixin
from bot.adapters.github.api import (
    CHECK_NAME,
    MAX_OUTPUT_CHARS,
    ChangedFile,
    CheckAction,
    CheckConclusion,
    CheckRunRef,
    CommentRef,
    PullInfo,
    Reaction,
    ReviewComment,
)
from bot.adapters.github.conditional import ETags
from bot.adapters.github.errors import (
    GitHubFileTooLarge,
    GitHubPermanentError,
    GitHubUnsafeInput,
    translated,
)
from bot.adapters.github.identity import AppLogin
from bot.adapters.github.items import ItemsMixin
from bot.adapters.github.repos import ReposMixin
from bot.adapters.github.support import (
    Listed,
    checked_sha,
    create_once,
    pull_info,
    quoted_path,
    shown,
)
from bot.adapters.settings import DEFAULT_MAX_FILE_BYTES
from bot.core.api_paths import segment_problem
from bot.core.permissions import effective_level

OBJECT_MEDIA_TYPE = "application/vnd.github.object+json"  # a file's size, and content to 1 MB


class GitHubClient(ActionsMixin, ItemsMixin, ReposMixin):
    """``GitHubAPI`` over PyGithub, for one installation (``repo`` is ``owner/name``)."""

    def __init__(
        self,
        gh: Github,
        *,
        app_id: int | None = None,
        login: AppLogin | None = None,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        etags: ETags | None = None,
    ) -> None:
        """``app_id`` / ``login``: who this client acts as; only comments written by that
        App or its bot user are its own (without either, none is).  ``max_file_bytes``:
        ``file_text`` refuses larger files (``GitHubFileTooLarge``).  ``etags``: the
        installation's kept answers, for conditional reads (``repos``); never another
        installation's."""
        super().__init__(gh, app_id=app_id, login=login, etags=etags)
        self._max_file_bytes = max_file_bytes

    # ---------------------------------------------------------------- reading

    @translated
    def pull(self, repo: str, number: int) -> PullInfo:
        """The pull request ``number``."""
        pr = self._repo(repo).get_pull(number)
        return replace(pull_info(pr), maintainer_can_modify=bool(pr.maintainer_can_modify))

    @translated
    def pull_files(self, repo: str, number: int, limit: int | None = None) -> list[ChangedFile]:
        """Every file in the PR's diff (all pages), or only its first ``limit`` files (one
        request for ``limit`` <= 100)."""
        gh_repo = self._repo(repo)
        params = {} if limit is None else {"per_page": max(1, min(limit, 100))}
        files = PaginatedList(
            File, gh_repo.requester, f"{gh_repo.url}/pulls/{number}/files", params
        )
        return [
            ChangedFile(
                path=f.filename, status=f.status, previous_path=f.previous_filename, patch=f.patch
            )
            for f in itertools.islice(files, limit)
        ]

    @translated
    def file_text(
        self, repo: str, path: str, ref: str, *, max_bytes: int | None = None
    ) -> str | None:
        """The text of ``path`` at ``ref``; None when the file (or the ref) does not exist.

        GitHub's contents API sends files over 1 MB only in its ``raw`` and ``object`` media
        types (JSON gets 403 ``too_large``).  One request in the ``object`` media type gives
        the size, and the content up to 1 MB; a larger file then comes from the blob API (up
        to GitHub's 100 MB).  A file over ``max_file_bytes``, or over this call's
        ``max_bytes`` when lower, raises ``GitHubFileTooLarge`` before its content is
        downloaded.  An unsafe ``path`` raises ``GitHubUnsafeInput`` (``ref`` goes in the
        query string).
        """
        gh_repo = self._repo(repo)
        try:
            _, meta = gh_repo.requester.requestJsonAndCheck(
                "GET",
                f"{gh_repo.url}/contents/{quoted_path(path)}",
                parameters={"ref": ref},
                headers={"Accept": OBJECT_MEDIA_TYPE},
                follow_302_redirect=True,
            )
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        if not isinstance(meta, dict) or meta.get("type") != "file":
            return None  # a directory, a submodule, a symlink out of the repository
        size = int(meta.get("size") or 0)
        if size > self._max_file_bytes:
            raise GitHubFileTooLarge(path, size, self._max_file_bytes)
        if max_bytes is not None and size > max_bytes:
            raise GitHubFileTooLarge(path, size, max_bytes, setting=None)
        if meta.get("encoding") == "base64":
            raw = base64.b64decode(meta.get("content") or "")
        else:  # over 1 MB: no content in the object media type
            blob = gh_repo.get_git_blob(checked_sha(str(meta["sha"])))
            raw = (
                base64.b64decode(blob.content)
                if blob.encoding == "base64"
                else blob.content.encode()
            )
        return raw.decode("utf-8", errors="replace")

    @translated
    def merge_base(self, repo: str, base: str, head: str) -> str:
        """The SHA of the merge base of ``base`` and ``head`` (what a PR diff starts from)."""
        return self._repo(repo).compare(checked_sha(base), checked_sha(head)).merge_base_commit.sha

    @translated
    def compare_commits(self, repo: str, base: str, head: str, limit: int = 250) -> list[str]:
        """SHAs of the commits reachable from ``head`` but not ``base``, oldest first."""
        commits = self._repo(repo).compare(checked_sha(base), checked_sha(head)).commits
        return [c.sha for c, _ in zip(commits, range(limit), strict=False)]

    @translated
    def pulls_for_commit(self, repo: str, sha: str) -> list[PullInfo]:
        """The PRs that contain commit ``sha`` (merged ones have ``merged=True``)."""
        return [pull_info(pr) for pr in self._repo(repo).get_commit(checked_sha(sha)).get_pulls()]

    @translated
    def permission(self, repo: str, user: str) -> str:
        """``user``'s level on ``repo`` (``admin``/``maintain``/``write``/``triage``/``read``/
        ``none``): the built-in ``role_name`` when GitHub reports one, else ``permission``."""
        problem = segment_problem(user)
        if problem is not None:
            raise GitHubUnsafeInput(f"refusing {shown(user)} as a login: {problem}")
        gh_repo = self._repo(repo)
        _, data = gh_repo.requester.requestJsonAndCheck(
            "GET", f"{gh_repo.url}/collaborators/{quote(user, safe='')}/permission"
        )
        return effective_level(data.get("permission"), data.get("role_name"))

    # ---------------------------------------------------------------- comments

    @translated
    def find_comment(self, repo: str, number: int, marker: str) -> CommentRef | None:
        """The oldest comment on PR ``number`` written by this App (its App id on the
        comment, or its bot login) and holding ``marker``."""
        for comment in self._comments(repo, number):
            body = comment.get("body") or ""
            if marker in body and self._is_own(comment):
                return CommentRef(id=int(comment["id"]), url=str(comment["html_url"]), body=body)
        return None

    def upsert_comment(self, repo: str, number: int, body: str, marker: str) -> CommentRef:
        """Edit the marked comment of PR ``number`` to ``body``, or create it (idempotently)."""
        if marker not in body:
            raise ValueError("the comment body must contain its marker")
        return self._edit_marked_comment(repo, number, body, marker) or create_once(
            lambda: self._create_comment(repo, number, body),
            lambda: self._edit_marked_comment(repo, number, body, marker),
        )

    def _edit_marked_comment(
        self, repo: str, number: int, body: str, marker: str
    ) -> CommentRef | None:
        existing = self.find_comment(repo, number, marker)
        if existing is None:
            return None
        if existing.body != body:
            self._edit_comment(repo, existing.id, body)
        return CommentRef(id=existing.id, url=existing.url, body=body)

    @translated
    def add_reaction(self, repo: str, comment_id: int, content: Reaction) -> None:
        """React to an issue comment (e.g. ``eyes`` on a slash command)."""
        self._comment(repo, comment_id).create_reaction(content)

    def _comments(self, repo: str, number: int) -> Iterator[dict[str, Any]]:
        """The comments of issue ``number`` as GitHub lists them (all pages, oldest first)."""
        gh_repo = self._repo(repo)
        url = f"{gh_repo.url}/issues/{int(number)}/comments"
        for comment in PaginatedList(Listed, gh_repo.requester, url, None):
            yield comment.raw_data

    def _comment(self, repo: str, comment_id: int) -> IssueComment:
        url = f"{self._repo(repo).url}/issues/comments/{comment_id}"
        return IssueComment(self._repo(repo).requester, url=url)

    @translated
    def _create_comment(self, repo: str, number: int, body: str) -> CommentRef:
        comment = self._repo(repo).get_issue(number).create_comment(body)
        return CommentRef(id=comment.id, url=comment.html_url, body=body, created=True)

    @translated
    def _edit_comment(self, repo: str, comment_id: int, body: str) -> None:
        self._comment(repo, comment_id).edit(body)

    # ---------------------------------------------------------------- check runs

    @translated
    def find_check_run(
        self, repo: str, head_sha: str, name: str = CHECK_NAME
    ) -> CheckRunRef | None:
        """The newest check run of this App named ``name`` on ``head_sha``."""
        run = self._find_check_run(repo, head_sha, name)
        return _check_ref(run) if run is not None else None

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
        if len(actions) > 3:
            raise ValueError("a check run has at most 3 actions")
        fields: dict[str, Any] = {
            "status": "completed",
            "conclusion": conclusion,
            "completed_at": datetime.now(UTC),
            "output": {
                "title": _clip(title, 255),
                "summary": _clip(summary, MAX_OUTPUT_CHARS),
                **({"text": _clip(text, MAX_OUTPUT_CHARS)} if text else {}),
            },
            "actions": [
                {"label": a.label, "identifier": a.identifier, "description": a.description}
                for a in actions
            ],
        }
        if external_id is not None:
            fields["external_id"] = external_id
        if details_url is not None:
            fields["details_url"] = details_url
        return self._edit_named_check_run(repo, head_sha, name, fields) or create_once(
            lambda: self._create_check_run(repo, head_sha, name, fields),
            lambda: self._edit_named_check_run(repo, head_sha, name, fields),
        )

    @translated
    def check_run(self, repo: str, check_run_id: int) -> CheckRunRef:
        """The check run ``check_run_id``."""
        return _check_ref(self._repo(repo).get_check_run(check_run_id))

    def _edit_named_check_run(
        self, repo: str, head_sha: str, name: str, fields: dict[str, Any]
    ) -> CheckRunRef | None:
        found = self.find_check_run(repo, head_sha, name)
        return self._edit_check_run(repo, found.id, fields) if found is not None else None

    def _find_check_run(self, repo: str, head_sha: str, name: str) -> CheckRun | None:
        runs = self._repo(repo).get_commit(checked_sha(head_sha)).get_check_runs(check_name=name)
        ours = [r for r in runs if r.name == name and self._is_ours(r)]
        return max(ours, key=lambda r: r.id) if ours else None

    def _is_ours(self, run: CheckRun) -> bool:
        return self._app_id is None or run.app is None or run.app.id == self._app_id

    @translated
    def _create_check_run(
        self, repo: str, head_sha: str, name: str, fields: dict[str, Any]
    ) -> CheckRunRef:
        run = self._repo(repo).create_check_run(name=name, head_sha=head_sha, **fields)
        return _check_ref(run, created=True)

    @translated
    def _edit_check_run(self, repo: str, check_run_id: int, fields: dict[str, Any]) -> CheckRunRef:
        run = self._repo(repo).get_check_run(check_run_id)
        run.edit(**fields)
        return _check_ref(run)

    # ---------------------------------------------------------------- writing

    @translated
    def commit_file(self, repo: str, branch: str, path: str, text: str, message: str) -> str:
        """Commit ``text`` as the new content of ``path`` on ``branch``; return the commit SHA.

        Raises ``GitHubPermanentError`` (409) when the file's blob SHA no longer matches
        (the branch moved under us); ``GitHubNotFound`` when the file or branch is gone.
        """
        quoted_path(path)  # PyGithub quotes it; only a safe path may reach it
        gh_repo = self._repo(repo)
        current = gh_repo.get_contents(path, ref=branch)
        if isinstance(current, list):
            raise GitHubPermanentError(f"{path} is a directory")
        result = gh_repo.update_file(path, message, text, current.sha, branch=branch)
        commit = result["commit"]
        return str(commit.sha)

    @translated
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
        gh_repo = self._repo(repo)
        review = gh_repo.get_pull(number).create_review(
            commit=gh_repo.get_commit(checked_sha(commit_sha)),
            body=body,
            event="COMMENT",
            comments=[_review_comment(c) for c in comments],
        )
        return int(review.id)


def _review_comment(comment: ReviewComment) -> GithubReviewComment:
    fields: GithubReviewComment = {
        "path": comment.path,
        "line": comment.line,
        "side": "RIGHT",
        "body": comment.body,
    }
    if comment.start_line is not None and comment.start_line < comment.line:
        fields["start_line"] = comment.start_line
        fields["start_side"] = "RIGHT"
    return fields


def _check_ref(run: CheckRun, *, created: bool = False) -> CheckRunRef:
    return CheckRunRef(
        id=run.id,
        url=run.html_url or run.url,
        conclusion=run.conclusion,
        external_id=run.external_id,
        created=created,
    )


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    note = "\n\n… (truncated)"
    return text[: limit - len(note)] + note
