"""The repository config (``.github/threshold-bot.yml``) at a commit, read through GitHub.

Features read it at the PR's *base*, never its head, so a PR cannot change the rule it
is judged by, nor the permissions its commands need.
"""

from __future__ import annotations

from bot.adapters.github.api import GitHubAPI
from bot.core.config import CONFIG_PATH, ConfigError, RepoConfig, parse_config


def config_at(gh: GitHubAPI, repo: str, ref: str) -> tuple[RepoConfig, tuple[str, ...]]:
    """The repository config at ``ref`` (defaults when absent or invalid) and warnings."""
    text = gh.file_text(repo, CONFIG_PATH, ref)
    if text is None:
        return RepoConfig(), ()
    try:
        return parse_config(text), ()
    except ConfigError as exc:
        return RepoConfig(), (f"{exc} — using the default settings",)
