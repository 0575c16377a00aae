"""The only module that talks to GitHub: a typed adapter over PyGithub.

``GitHubApp`` authenticates as the App (``Auth.AppAuth``) and hands out one
``GitHubClient`` per installation (installation tokens are cached and renewed by
PyGithub).  Every ``GitHubClient`` method returns plain dataclasses and raises
only ``GitHubError`` subclasses:

- ``GitHubTransientError`` — 5xx, rate limits, network failures: retry later;
- ``GitHubNotFound`` / ``GitHubForbidden`` / ``GitHubUnprocessable`` /
  ``GitHubPermanentError`` — retrying will not help.

Creating a comment or a check run is idempotent: POSTs are not retried inside
PyGithub (a POST that failed with a 5xx may still have landed), and after a
transient failure the resource is looked up again before a second attempt.
"""

from __future__ import annotations

import base64
import functools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, ParamSpec, TypeVar
from urllib.parse import quote, urlsplit

import requests
from github import Auth, Github, GithubException, GithubRetry, RateLimitExceededException
from github.CheckRun import CheckRun
from github.IssueComment import IssueComment
from github.PullRequest import PullRequest
from github.PullRequest import ReviewComment as GithubReviewComment
from github.Repository import Repository
from urllib3.exceptions import HTTPError as Urllib3Error

from bot.adapters.settings import Settings
from bot.core.permissions import effective_level
from bot.core.retry import PermanentError, TransientError

CHECK_NAME = "threshold-bot"
MAX_OUTPUT_CHARS = 65_535  # check-run output summary / text limit
DEFAULT_API_URL = "https://api.github.com"

P = ParamSpec("P")
T = TypeVar("T")

GitHubFactory = Callable[[int], "GitHubClient"]
CheckConclusion = Literal["success", "action_required", "neutral", "failure"]
Reaction = Literal["+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"]


# --------------------------------------------------------------------------- errors


class GitHubError(Exception):
    """Any failure talking to GitHub; ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class GitHubTransientError(GitHubError, TransientError):
    """5xx, rate limit or network failure: the operation may succeed if retried later."""


class GitHubPermanentError(GitHubError, PermanentError):
    """GitHub refused the request for a reason retrying will not fix."""


class GitHubNotFound(GitHubPermanentError):
    """404: the repository, PR, commit or file does not exist (or is not visible to us)."""


class GitHubForbidden(GitHubPermanentError):
    """401/403 (not a rate limit): the App lacks a permission or its credentials are bad."""


class GitHubUnprocessable(GitHubPermanentError):
    """422: GitHub rejected the request's content (e.g. a stale file SHA)."""


def translate(exc: Exception) -> GitHubError:
    """Map a PyGithub / requests / urllib3 exception to a typed ``GitHubError``."""
    if isinstance(exc, GitHubError):
        return exc
    if isinstance(exc, RateLimitExceededException):
        return GitHubTransientError(f"GitHub rate limit: {_message(exc)}", exc.status)
    if isinstance(exc, GithubException):
        status, message = exc.status, f"GitHub {exc.status}: {_message(exc)}"
        if status >= 500 or status == 429:
            return GitHubTransientError(message, status)
        if status == 404:
            return GitHubNotFound(message, status)
        if status in (401, 403):
            return GitHubForbidden(message, status)
        if status == 422:
            return GitHubUnprocessable(message, status)
        return GitHubPermanentError(message, status)
    if isinstance(exc, requests.RequestException | Urllib3Error | OSError):
        return GitHubTransientError(f"GitHub unreachable: {exc}")
    raise exc


def _message(exc: GithubException) -> str:
    data = exc.data
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    return str(data or exc.message or "")


def _translated(method: Callable[P, T]) -> Callable[P, T]:
    """Decorate a client method so that it raises only ``GitHubError``s."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(*args, **kwargs)
        except (GithubException, requests.RequestException, Urllib3Error, OSError) as exc:
            raise translate(exc) from exc

    return wrapper


# --------------------------------------------------------------------------- values


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


@dataclass(frozen=True)
class ChangedFile:
    """One file of a PR's diff."""

    path: str
    status: str  # added / removed / modified / renamed / copied / changed / unchanged
    previous_path: str | None = None


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


# --------------------------------------------------------------------------- client


class GitHubClient:
    """Typed operations on repositories of one installation (``repo`` is ``owner/name``)."""

    def __init__(self, gh: Github, *, app_id: int | None = None) -> None:
        self._gh = gh
        self._app_id = app_id

    def _repo(self, repo: str) -> Repository:
        return self._gh.get_repo(repo)  # lazy: no request until used

    # ---------------------------------------------------------------- reading

    @_translated
    def pull(self, repo: str, number: int) -> PullInfo:
        """The pull request ``number``."""
        pr = self._repo(repo).get_pull(number)
        return replace(_pull_info(pr), maintainer_can_modify=bool(pr.maintainer_can_modify))

    @_translated
    def pull_files(self, repo: str, number: int) -> list[ChangedFile]:
        """Every file in the PR's diff (all pages)."""
        files = self._repo(repo).get_pull(number).get_files()
        return [
            ChangedFile(path=f.filename, status=f.status, previous_path=f.previous_filename)
            for f in files
        ]

    @_translated
    def file_text(self, repo: str, path: str, ref: str) -> str | None:
        """The text of ``path`` at ``ref``; None when the file (or the ref) does not exist."""
        gh_repo = self._repo(repo)
        try:
            content = gh_repo.get_contents(path, ref=ref)
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        if isinstance(content, list) or content.type != "file":
            return None
        if content.encoding == "base64" and content.content is not None:
            raw = content.decoded_content
        else:  # files over 1 MB come without content: read the blob instead
            blob = gh_repo.get_git_blob(content.sha)
            raw = (
                base64.b64decode(blob.content)
                if blob.encoding == "base64"
                else blob.content.encode()
            )
        return raw.decode("utf-8", errors="replace")

    @_translated
    def merge_base(self, repo: str, base: str, head: str) -> str:
        """The SHA of the merge base of ``base`` and ``head`` (what a PR diff starts from)."""
        return self._repo(repo).compare(base, head).merge_base_commit.sha

    @_translated
    def compare_commits(self, repo: str, base: str, head: str, limit: int = 250) -> list[str]:
        """SHAs of the commits reachable from ``head`` but not ``base``, oldest first."""
        commits = self._repo(repo).compare(base, head).commits
        return [c.sha for c, _ in zip(commits, range(limit), strict=False)]

    @_translated
    def pulls_for_commit(self, repo: str, sha: str) -> list[PullInfo]:
        """The PRs that contain commit ``sha`` (merged ones have ``merged=True``)."""
        return [_pull_info(pr) for pr in self._repo(repo).get_commit(sha).get_pulls()]

    @_translated
    def permission(self, repo: str, user: str) -> str:
        """``user``'s level on ``repo`` (``admin``/``maintain``/``write``/``triage``/``read``/
        ``none``): the built-in ``role_name`` when GitHub reports one, else ``permission``."""
        gh_repo = self._repo(repo)
        _, data = gh_repo.requester.requestJsonAndCheck(
            "GET", f"{gh_repo.url}/collaborators/{quote(user, safe='')}/permission"
        )
        return effective_level(data.get("permission"), data.get("role_name"))

    # ---------------------------------------------------------------- comments

    @_translated
    def find_comment(self, repo: str, number: int, marker: str) -> CommentRef | None:
        """The oldest comment on PR ``number`` posted by a bot and holding ``marker``."""
        for comment in self._comments(repo, number):
            if marker in (comment.body or "") and _is_bot(comment):
                return CommentRef(id=comment.id, url=comment.html_url, body=comment.body)
        return None

    def upsert_comment(self, repo: str, number: int, body: str, marker: str) -> CommentRef:
        """Edit the marked comment of PR ``number`` to ``body``, or create it (idempotently)."""
        if marker not in body:
            raise ValueError("the comment body must contain its marker")
        return self._edit_marked_comment(repo, number, body, marker) or _create_once(
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

    @_translated
    def add_reaction(self, repo: str, comment_id: int, content: Reaction) -> None:
        """React to an issue comment (e.g. ``eyes`` on a slash command)."""
        self._comment(repo, comment_id).create_reaction(content)

    def _comments(self, repo: str, number: int) -> Iterator[IssueComment]:
        yield from self._repo(repo).get_issue(number).get_comments()

    def _comment(self, repo: str, comment_id: int) -> IssueComment:
        url = f"{self._repo(repo).url}/issues/comments/{comment_id}"
        return IssueComment(self._repo(repo).requester, url=url)

    @_translated
    def _create_comment(self, repo: str, number: int, body: str) -> CommentRef:
        comment = self._repo(repo).get_issue(number).create_comment(body)
        return CommentRef(id=comment.id, url=comment.html_url, body=body, created=True)

    @_translated
    def _edit_comment(self, repo: str, comment_id: int, body: str) -> None:
        self._comment(repo, comment_id).edit(body)

    # ---------------------------------------------------------------- check runs

    @_translated
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
        return self._edit_named_check_run(repo, head_sha, name, fields) or _create_once(
            lambda: self._create_check_run(repo, head_sha, name, fields),
            lambda: self._edit_named_check_run(repo, head_sha, name, fields),
        )

    @_translated
    def check_run(self, repo: str, check_run_id: int) -> CheckRunRef:
        """The check run ``check_run_id``."""
        return _check_ref(self._repo(repo).get_check_run(check_run_id))

    def _edit_named_check_run(
        self, repo: str, head_sha: str, name: str, fields: dict[str, Any]
    ) -> CheckRunRef | None:
        found = self.find_check_run(repo, head_sha, name)
        return self._edit_check_run(repo, found.id, fields) if found is not None else None

    def _find_check_run(self, repo: str, head_sha: str, name: str) -> CheckRun | None:
        runs = self._repo(repo).get_commit(head_sha).get_check_runs(check_name=name)
        ours = [r for r in runs if r.name == name and self._is_ours(r)]
        return max(ours, key=lambda r: r.id) if ours else None

    def _is_ours(self, run: CheckRun) -> bool:
        return self._app_id is None or run.app is None or run.app.id == self._app_id

    @_translated
    def _create_check_run(
        self, repo: str, head_sha: str, name: str, fields: dict[str, Any]
    ) -> CheckRunRef:
        run = self._repo(repo).create_check_run(name=name, head_sha=head_sha, **fields)
        return _check_ref(run, created=True)

    @_translated
    def _edit_check_run(self, repo: str, check_run_id: int, fields: dict[str, Any]) -> CheckRunRef:
        run = self._repo(repo).get_check_run(check_run_id)
        run.edit(**fields)
        return _check_ref(run)

    # ---------------------------------------------------------------- writing

    @_translated
    def commit_file(self, repo: str, branch: str, path: str, text: str, message: str) -> str:
        """Commit ``text`` as the new content of ``path`` on ``branch``; return the commit SHA.

        Raises ``GitHubPermanentError`` (409) when the file's blob SHA no longer matches
        (the branch moved under us); ``GitHubNotFound`` when the file or branch is gone.
        """
        gh_repo = self._repo(repo)
        current = gh_repo.get_contents(path, ref=branch)
        if isinstance(current, list):
            raise GitHubPermanentError(f"{path} is a directory")
        result = gh_repo.update_file(path, message, text, current.sha, branch=branch)
        commit = result["commit"]
        return str(commit.sha)

    @_translated
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
            commit=gh_repo.get_commit(commit_sha),
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


def _create_once(create: Callable[[], T], reuse: Callable[[], T | None]) -> T:
    """Create a resource; after a transient failure, reuse it if it landed, else try once more."""
    try:
        return create()
    except GitHubTransientError:
        reused = reuse()
        return reused if reused is not None else create()


def _pull_info(pr: PullRequest) -> PullInfo:
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
    )


def _is_bot(comment: IssueComment) -> bool:
    user = comment.user
    return user is None or user.type == "Bot" or user.login.endswith("[bot]")


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


# --------------------------------------------------------------------------- the App


class GitHubApp:
    """The App's credentials; hands out a cached ``GitHubClient`` per installation."""

    def __init__(
        self,
        app_id: int | str,
        private_key: str,
        *,
        base_url: str = DEFAULT_API_URL,
        timeout: int = 15,
        retries: int = 3,
        backoff: float = 0.5,
        throttle: bool = True,
    ) -> None:
        """``throttle`` spaces writes 1 s apart, as GitHub asks of integrations; reads are
        never delayed.  ``throttle=False`` (local fakes) sends everything at once."""
        self.app_id = int(app_id)
        self._auth = Auth.AppAuth(self.app_id, private_key)
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._retries = retries
        self._backoff = backoff
        self._throttle = throttle
        self._local = threading.local()

    def _retry(self) -> GithubRetry:
        # POST is left out: a POST that failed may have landed (see ``_create_once``).
        return GithubRetry(
            total=self._retries,
            backoff_factor=self._backoff,
            allowed_methods={"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"},
            max_rate_limit_wait=60,
        )

    def installation(self, installation_id: int) -> GitHubClient:
        """A client acting as installation ``installation_id`` (cached per thread)."""
        cache: dict[int, GitHubClient] = self._local.__dict__.setdefault("clients", {})
        client = cache.get(installation_id)
        if client is None:
            gh = Github(
                auth=self._auth.get_installation_auth(installation_id),
                base_url=self._base_url,
                timeout=self._timeout,
                retry=self._retry(),
                lazy=True,
                seconds_between_requests=None,
                seconds_between_writes=1.0 if self._throttle else None,
            )
            client = cache[installation_id] = GitHubClient(gh, app_id=self.app_id)
        return client


def client_factory(settings: Settings, *, throttle: bool | None = None) -> GitHubFactory:
    """Installation id -> ``GitHubClient`` for the App in ``settings``.

    ``throttle`` defaults to on, except against an API on the loopback interface (a local
    fake GitHub in tests and the demo).
    """
    if settings.app_id is None:
        raise ValueError("APP_ID is required to talk to GitHub")
    key = settings.private_key_pem()
    if not key:
        raise ValueError("PRIVATE_KEY or PRIVATE_KEY_PATH is required to talk to GitHub")
    if throttle is None:
        host = urlsplit(settings.github_api_url).hostname or ""
        throttle = host not in ("127.0.0.1", "localhost", "::1")
    app = GitHubApp(settings.app_id, key, base_url=settings.github_api_url, throttle=throttle)
    return app.installation


def token_client(token: str, *, base_url: str = DEFAULT_API_URL, timeout: int = 15) -> GitHubClient:
    """A read-mostly client authenticated with a personal or Actions token (CLI ``--repo``)."""
    gh = Github(
        auth=Auth.Token(token),
        base_url=base_url.rstrip("/"),
        timeout=timeout,
        retry=GithubRetry(total=3, backoff_factor=0.5, allowed_methods={"GET"}),
        lazy=True,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    return GitHubClient(gh)
