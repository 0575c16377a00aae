"""Which outside strings may become part of a GitHub API path (pure; no I/O).

Run records, repository configs, branch names and comments are written by whoever opened
the PR.  Before such a string is put into a request path it must be one of these shapes:

- a commit: 7 to 40 hex digits (``is_sha``), never a branch name or a relative path;
- a repository file path: no ``..`` segment, not absolute, no backslash, no control
  character (``repo_path_problem``);
- a repository: ``owner/name`` of the characters GitHub allows (``is_full_name``);
- one path segment (a login): not empty, ``.`` or ``..``, no ``/``, ``\\`` or control
  character (``segment_problem``);
- a branch name: what ``git check-ref-format --branch`` accepts (``branch_problem``).

The segments are still percent-quoted where they are interpolated.
"""

from __future__ import annotations

import re

_SHA = re.compile(r"[0-9a-f]{7,40}", re.IGNORECASE)
_FULL_NAME = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_REF_FORBIDDEN = re.compile(r"[ ~^:?*\[\\]")


def is_sha(value: str | None) -> bool:
    """Whether ``value`` is a hex commit SHA (7 to 40 hex digits, either case)."""
    return value is not None and _SHA.fullmatch(value) is not None


def is_full_name(repo: str) -> bool:
    """Whether ``repo`` is ``owner/name`` with neither part made of dots only."""
    return _FULL_NAME.fullmatch(repo) is not None and all(
        part.strip(".") for part in repo.split("/")
    )


def repo_path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a file of a repository in an API path; None when it can."""
    if not path:
        return "it is empty"
    if _CONTROL.search(path):
        return "it has a control character"
    if "\\" in path:
        return "it has a backslash"
    if path.startswith("/"):
        return "it is absolute"
    if ".." in path.split("/"):
        return "it has a '..' segment"
    return None


def segment_problem(value: str) -> str | None:
    """Why ``value`` cannot be one segment of an API path; None when it can."""
    if value in ("", ".", ".."):
        return f"it is {value!r}"
    if "/" in value or "\\" in value:
        return "it has a slash"
    if _CONTROL.search(value):
        return "it has a control character"
    return None


def branch_problem(name: str) -> str | None:
    """Why ``name`` cannot be a branch (git's ``check-ref-format`` rules, plus no leading
    ``-``); None when it can."""
    if not name or name == "@":
        return f"it is {name!r}"
    if _CONTROL.search(name):
        return "it has a control character"
    if _REF_FORBIDDEN.search(name):
        return "it has a space or one of ~^:?*[\\"
    if name.startswith(("-", "/")) or name.endswith(("/", ".", ".lock")):
        return "it starts with '-' or '/', or ends with '/', '.' or '.lock'"
    if ".." in name or "//" in name or "@{" in name:
        return "it has '..', '//' or '@{'"
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return "a component starts with '.' or ends with '.lock'"
    return None
