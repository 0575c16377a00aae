"""The repository config (``.github/threshold-bot.yml``) at a commit, read through GitHub.

Features read it at the PR's *base*, never its head, so a PR cannot change the rule it
is judged by, nor the permissions its commands need.
"""

from __future__ import annotations

from bot.adapters.github.api import GitHubAPI
from bot.adapters.github.errors import GitHubFileTooLarge
from bot.adapters.settings import DEFAULT_THRESHOLD_FILE_BYTES
from bot.core.config import CONFIG_PATH, ConfigError, RepoConfig, parse_config


def config_at(
    gh: GitHubAPI, repo: str, ref: str, *, max_bytes: int = DEFAULT_THRESHOLD_FILE_BYTES
) -> tuple[RepoConfig, tuple[str, ...]]:
    """The repository config at ``ref`` (defaults when absent, invalid or over ``max_bytes``)
    and warnings saying why the defaults apply."""
    _, config, warnings = read_config(gh, repo, ref, max_bytes=max_bytes)
    return config, warnings


def read_config(
    gh: GitHubAPI,
    repo: str,
    ref: str,
    *,
    max_bytes: int = DEFAULT_THRESHOLD_FILE_BYTES,
    path: str = CONFIG_PATH,
) -> tuple[str | None, RepoConfig, tuple[str, ...]]:
    """``config_at`` of the config at ``path``, with its text (None: absent or too large)."""
    try:
        text = gh.file_text(repo, path, ref, max_bytes=max_bytes)
    except GitHubFileTooLarge as exc:
        limit = " (MAX_THRESHOLD_FILE_BYTES)" if exc.limit == max_bytes else ""
        return None, RepoConfig(), (f"{exc}{limit} — using the default settings",)
    if text is None:
        return None, RepoConfig(), ()
    try:
        return text, parse_config(text, path), ()
    except ConfigError as exc:
        return text, RepoConfig(), (f"{exc} — using the default settings",)
