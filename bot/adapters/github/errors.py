"""Typed GitHub failures, and the translation of PyGithub / requests exceptions into them.

- ``GitHubTransientError``: 5xx, rate limits, network failures: retry later;
- ``GitHubNotFound`` / ``GitHubForbidden`` / ``GitHubUnprocessable`` /
  ``GitHubFileTooLarge`` / ``GitHubUnsafeInput`` / ``GitHubPermanentError``: retrying will
  not help.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import requests
from github import GithubException, RateLimitExceededException
from urllib3.exceptions import HTTPError as Urllib3Error

from bot.core.retry import PermanentError, TransientError

P = ParamSpec("P")
T = TypeVar("T")


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


class GitHubFileTooLarge(GitHubPermanentError):
    """A file larger than the bot reads, refused unread; ``setting`` names the limit's
    setting in the message (``MAX_FILE_BYTES``; None for a caller's own limit)."""

    def __init__(
        self, path: str, size: int, limit: int, setting: str | None = "MAX_FILE_BYTES"
    ) -> None:
        named = f" ({setting})" if setting else ""
        super().__init__(f"{path} is {_bytes(size)}, over the limit of {_bytes(limit)}{named}")
        self.path, self.size, self.limit = path, size, limit


class GitHubUnsafeInput(GitHubPermanentError):
    """An outside string refused before it could become part of an API path: a commit that
    is not a hex SHA, a repository path with ``..`` segments, a malformed ``owner/name``."""


def _bytes(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n:,} bytes"


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


def translated(method: Callable[P, T]) -> Callable[P, T]:
    """Decorate a client method so that it raises only ``GitHubError``s."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(*args, **kwargs)
        except (GithubException, requests.RequestException, Urllib3Error, OSError) as exc:
            raise translate(exc) from exc

    return wrapper
