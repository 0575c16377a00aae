"""What ``threshold-bot action`` reads at a PR's base (``bot.cli.action``), and what the PR
changes of it.

On a ``pull_request`` event the config and every history file the review reads are read at
the PR's base SHA through the contents API (the base's blobs: a shallow checkout lacks the
base commit, and the ``pull_request_target`` recipe has no PR checkout), as the App reads
them; the PR's checkout is only compared with them.  A config or history file the checkout
holds otherwise (edited, added, deleted, a link out of the checkout) is named in the review
(``changed_file``), which then requires action.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.adapters.github.api import GitHubAPI
from bot.adapters.github.errors import GitHubError
from bot.adapters.settings import DEFAULT_THRESHOLD_FILE_BYTES
from bot.cli.errors import UsageProblem
from bot.cli.histories import inside
from bot.core.config import CONFIG_PATH, RepoConfig
from bot.core.history.sources import HistoryError
from bot.core.thresholds.pinning import changed_file
from bot.features.action import FileVersions
from bot.features.repo_config import read_config

THRESHOLD_BYTES = DEFAULT_THRESHOLD_FILE_BYTES  # each threshold file and the config, as the App


@dataclass(frozen=True)
class PullRef:
    """The pull request of a ``pull_request`` event payload."""

    number: int
    base_sha: str


def same_as_base(workspace: Path, path: str, base: str | None) -> bool:
    """Whether the PR's checkout holds ``path`` as the base has it (``base`` None: absent);
    the checkout's copy is read only when its size is the base's, so at most as much."""
    try:
        target = inside(workspace, path, "file")
    except UsageProblem:  # a link out of the checkout: not what the base holds
        return False
    try:
        if not target.is_file():
            return base is None and not target.exists()
        if base is None:
            return False
        data = base.encode("utf-8")
        return target.stat().st_size == len(data) and target.read_bytes() == data
    except OSError:
        return False


def base_config(
    gh: GitHubAPI, repo: str, pull: PullRef, workspace: Path, config: str | None
) -> tuple[str | None, RepoConfig, tuple[str, ...], list[str]]:
    """The config at the PR's base, as the App reads it (defaults when absent, invalid or too
    large, saying why; the ``config`` input must be there): its path (None: none), the
    config, its warnings, and what the review says when the PR changes it."""
    path = config or CONFIG_PATH
    try:
        text, parsed, warnings = read_config(
            gh, repo, pull.base_sha, max_bytes=THRESHOLD_BYTES, path=path
        )
    except GitHubError as exc:
        raise UsageProblem(f"config {path}: cannot read it at the PR's base: {exc}") from None
    if config and text is None and not warnings:
        raise UsageProblem(f"config {config}: no such file at the PR's base")
    moved = (
        [] if same_as_base(workspace, path, text) else [changed_file(path, "the repository config")]
    )
    return (path if text is not None else config), parsed, warnings, moved


def changed_histories(
    workspace: Path, base: Callable[[str], str], files: dict[str, tuple[str, ...]]
) -> list[str]:
    """What the review says of each history file it reads that the PR changes."""
    said = []
    for path, gates in files.items():
        try:
            text: str | None = base(path)
        except FileNotFoundError:
            text = None
        except HistoryError:
            continue  # unreadable at the base: the review says so, and requires action
        if not same_as_base(workspace, path, text):
            said.append(changed_file(path, f"the run history of {', '.join(gates)}"))
    return said


def changed_files(
    gh: GitHubAPI, repo: str, pull: PullRef, heads: dict[str, str]
) -> list[FileVersions]:
    """The files the PR changes, each with its text at the PR's base (None: added)."""
    versions = []
    for path, head in heads.items():
        try:
            base = gh.file_text(repo, path, pull.base_sha, max_bytes=THRESHOLD_BYTES)
        except GitHubError as exc:
            raise UsageProblem(f"{path}: cannot read it at the PR's base: {exc}") from None
        if base != head:
            versions.append(FileVersions(path, head, base))
    return versions
