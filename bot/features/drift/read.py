"""The threshold files at a repository's default branch, as the drift watch reads them.

What is read is decided by the default branch and the operator, never by a PR: the
repository config at the branch head, the files it names (``files:``, ``shell:``,
``python:``), every shell script, and, when ``drift.files`` is set, only the files it
matches.  Unnamed Python test files are not read (an assert is no news).  Every file is
read with the threshold-file size bound, at most ``max_files`` of them; a file that
cannot be read or parsed is *unreadable*: its item is neither opened nor closed.  A file's
related files (``bot.features.related_files``) are read at the same head, bounded the same
way; one that cannot be read is skipped and counted in the file's notes.

A branch is listed first (``list_branch``: the config and the file list), then read file by
file (``read_file``), so a round whose budget runs out stops between files and the next one
goes on from there.  What was read is cached per repository and head SHA (in this process),
so a round over a repository whose default branch did not move asks GitHub for one ref only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from bot.adapters.github.api import GitHubAPI
from bot.adapters.github.errors import GitHubPermanentError
from bot.core import deadline
from bot.core.config import CONFIG_PATH, RepoConfig
from bot.core.globs import glob_match
from bot.core.lru import Lru
from bot.core.models import ThresholdFile
from bot.core.thresholds.discover import find_gates, is_candidate, is_named
from bot.core.thresholds.errors import ThresholdFileError
from bot.features.related_files import GitHubReads, github_related, with_notes
from bot.features.repo_config import config_at
from bot.features.review.pull import PARSE_FAILURES

CACHED_BRANCHES = 4096  # repositories whose last branch read is kept
CACHED_BRANCH_BYTES = 256 * 1024 * 1024  # of the texts read, over every repository kept


@dataclass(frozen=True)
class BranchFiles:
    """The threshold files of one commit of the default branch, as far as they are read:
    ``paths`` are the files the watch reads there, ``read`` those read so far (with or
    without gates); ``files``, ``texts`` and ``unreadable`` what they held."""

    repo: str
    branch: str
    sha: str
    config: RepoConfig
    paths: tuple[str, ...] = ()
    files: tuple[ThresholdFile, ...] = ()
    texts: Mapping[str, str] = field(default_factory=dict)
    unreadable: Mapping[str, str] = field(default_factory=dict)  # path -> why
    warnings: tuple[str, ...] = ()
    read: frozenset[str] = frozenset()

    @property
    def history_paths(self) -> frozenset[str]:
        """The repository files the gates read as history (a push to one re-runs the watch)."""
        return frozenset(
            g.source.path for tf in self.files for g in tf.gates if g.source and g.source.path
        )

    @cached_property
    def config_digest(self) -> str:
        """A digest of ``config`` (what the files were read and are evaluated under)."""
        data = self.config.model_dump_json().encode()
        return hashlib.blake2b(data, digest_size=16).hexdigest()

    @property
    def complete(self) -> bool:
        """Whether every file the watch reads here has been read."""
        return self.read >= frozenset(self.paths)

    def file(self, path: str) -> ThresholdFile | None:
        """The threshold file read at ``path`` (None: not read yet, unreadable, or no gates)."""
        return next((tf for tf in self.files if tf.path == path), None)


def watched(path: str, config: RepoConfig) -> bool:
    """Whether the drift watch reads ``path``: ``drift.files`` when set, else the files a
    review would read for a change, except Python test files the config does not name."""
    if config.drift.files:
        return any(glob_match(g, path) for g in config.drift.files)
    return is_candidate(path, config) and is_named(path, config)


def list_branch(
    gh: GitHubAPI, repo: str, branch: str, sha: str, *, max_bytes: int, max_files: int
) -> BranchFiles:
    """The config of ``repo`` at ``sha`` (the head of ``branch``) and the files the watch
    reads there (at most ``max_files``, by path); none of them read yet."""
    config, warnings = config_at(gh, repo, sha, max_bytes=max_bytes)
    notes = list(warnings)
    paths = sorted(p for p in gh.tree_paths(repo, sha) if p != CONFIG_PATH and watched(p, config))
    if len(paths) > max_files:
        notes.append(f"{len(paths)} threshold files; only the first {max_files} are watched")
        paths = paths[:max_files]
    return BranchFiles(repo, branch, sha, config, tuple(paths), warnings=tuple(notes))


def read_file(
    gh: GitHubAPI, branch: BranchFiles, path: str, *, max_bytes: int
) -> tuple[BranchFiles, int]:
    """``branch`` with ``path`` read (with the threshold-file size bound), and the bytes read."""
    deadline.check(f"reading {path}")
    read = branch.read | {path}
    try:
        text = gh.file_text(branch.repo, path, branch.sha, max_bytes=max_bytes)
    except GitHubPermanentError as exc:
        return _unreadable(branch, read, path, f"cannot be read: {exc}"), 0
    if text is None:
        return replace(branch, read=read), 0
    size = len(text.encode())
    reads = GitHubReads(gh, branch.repo, max_bytes)
    related = github_related(reads, branch.sha, path, text, check=deadline.check)
    size += sum(len(t.encode()) for t in related.files.values())
    try:
        found = with_notes(find_gates(path, text, branch.config, related=related.files), related)
    except ThresholdFileError as exc:
        return _unreadable(branch, read, path, str(exc)), size
    except PARSE_FAILURES as exc:
        why = f"{path}: could not be read ({type(exc).__name__})"
        return _unreadable(branch, read, path, why), size
    if found is None or not found.gates:
        return replace(branch, read=read), size
    files = (*branch.files, found)
    texts = {**branch.texts, path: text}
    return replace(branch, files=files, texts=texts, read=read), size


def _unreadable(branch: BranchFiles, read: frozenset[str], path: str, why: str) -> BranchFiles:
    return replace(branch, unreadable={**branch.unreadable, path: why}, read=read)


class BranchCache:
    """The last ``BranchFiles`` read per repository (complete or not), reused while its head
    SHA is the same; at most ``size`` repositories and ``max_bytes`` of texts, the least
    recently used dropped first."""

    def __init__(self, size: int = CACHED_BRANCHES, max_bytes: int = CACHED_BRANCH_BYTES) -> None:
        self._items: Lru[str, BranchFiles] = Lru(
            size, max_weight=max_bytes, weight=lambda read: sum(map(len, read.texts.values()))
        )

    def get(self, repo: str, sha: str) -> BranchFiles | None:
        """The read of ``repo`` at ``sha``, if it is the one kept."""
        found = self._items.peek(repo)
        if found is None or found.sha != sha:
            return None
        return self._items.get(repo)

    def put(self, read: BranchFiles) -> None:
        """Keep ``read`` as the repository's current one."""
        self._items.put(read.repo, read)

    def history_paths(self, repo: str) -> frozenset[str] | None:
        """The history files of the repository's last read (None: not completely read here)."""
        found = self._items.peek(repo)
        return None if found is None or not found.complete else found.history_paths

    def config(self, repo: str) -> RepoConfig | None:
        """The config of the repository's last read (None: never read here)."""
        found = self._items.peek(repo)
        return None if found is None else found.config
