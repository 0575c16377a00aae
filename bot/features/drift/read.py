"""The threshold files at a repository's default branch, as the drift watch reads them.

What is read is decided by the default branch and the operator, never by a PR: the
repository config at the branch head, the files it names (``files:``, ``shell:``,
``python:``), every shell script, and, when ``drift.files`` is set, only the files it
matches.  Unnamed Python test files are not read (an assert is no news).  Every file is
read with the threshold-file size bound, at most ``max_files`` of them; a file that
cannot be read or parsed is *unreadable*: its item is neither opened nor closed.

A branch read is cached per repository and head SHA (in this process), so a watch round
over a repository whose default branch did not move asks GitHub for one ref only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from bot.adapters.github.api import GitHubAPI
from bot.adapters.github.errors import GitHubPermanentError
from bot.core import deadline
from bot.core.config import CONFIG_PATH, RepoConfig
from bot.core.globs import glob_match
from bot.core.models import ThresholdFile
from bot.core.thresholds.discover import find_gates, is_candidate, is_named
from bot.core.thresholds.errors import ThresholdFileError
from bot.features.repo_config import config_at
from bot.features.review.pull import PARSE_FAILURES

CACHED_BRANCHES = 1024  # repositories whose last branch read is kept


@dataclass(frozen=True)
class BranchFiles:
    """The threshold files of one commit of the default branch."""

    repo: str
    branch: str
    sha: str
    config: RepoConfig
    files: tuple[ThresholdFile, ...] = ()
    texts: Mapping[str, str] = field(default_factory=dict)
    unreadable: Mapping[str, str] = field(default_factory=dict)  # path -> why
    warnings: tuple[str, ...] = ()

    @property
    def history_paths(self) -> frozenset[str]:
        """The repository files the gates read as history (a push to one re-runs the watch)."""
        return frozenset(
            g.source.path for tf in self.files for g in tf.gates if g.source and g.source.path
        )


def watched(path: str, config: RepoConfig) -> bool:
    """Whether the drift watch reads ``path``: ``drift.files`` when set, else the files a
    review would read for a change, except Python test files the config does not name."""
    if config.drift.files:
        return any(glob_match(g, path) for g in config.drift.files)
    return is_candidate(path, config) and is_named(path, config)


def read_branch(
    gh: GitHubAPI, repo: str, branch: str, sha: str, *, max_bytes: int, max_files: int
) -> BranchFiles:
    """The config and threshold files of ``repo`` at ``sha`` (the head of ``branch``)."""
    config, warnings = config_at(gh, repo, sha, max_bytes=max_bytes)
    notes = list(warnings)
    paths = sorted(p for p in gh.tree_paths(repo, sha) if p != CONFIG_PATH and watched(p, config))
    if len(paths) > max_files:
        notes.append(f"{len(paths)} threshold files; only the first {max_files} are watched")
        paths = paths[:max_files]
    files: list[ThresholdFile] = []
    texts: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    for path in paths:
        deadline.check(f"reading {path}")
        try:
            text = gh.file_text(repo, path, sha, max_bytes=max_bytes)
        except GitHubPermanentError as exc:
            unreadable[path] = f"cannot be read: {exc}"
            continue
        if text is None:
            continue
        try:
            found = find_gates(path, text, config)
        except ThresholdFileError as exc:
            unreadable[path] = str(exc)
            continue
        except PARSE_FAILURES as exc:
            unreadable[path] = f"{path}: could not be read ({type(exc).__name__})"
            continue
        if found is not None and found.gates:
            files.append(found)
            texts[path] = text
    return BranchFiles(repo, branch, sha, config, tuple(files), texts, unreadable, tuple(notes))


class BranchCache:
    """The last ``BranchFiles`` read per repository, reused while its head SHA is the same."""

    def __init__(self, size: int = CACHED_BRANCHES) -> None:
        self._size = size
        self._items: OrderedDict[str, BranchFiles] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, repo: str, sha: str) -> BranchFiles | None:
        """The read of ``repo`` at ``sha``, if it is the one kept."""
        with self._lock:
            found = self._items.get(repo)
            if found is None or found.sha != sha:
                return None
            self._items.move_to_end(repo)
            return found

    def put(self, read: BranchFiles) -> None:
        """Keep ``read`` as the repository's current one."""
        with self._lock:
            self._items[read.repo] = read
            self._items.move_to_end(read.repo)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def history_paths(self, repo: str) -> frozenset[str] | None:
        """The history files of the repository's last read (None: never read here)."""
        with self._lock:
            found = self._items.get(repo)
            return None if found is None else found.history_paths

    def config(self, repo: str) -> RepoConfig | None:
        """The config of the repository's last read (None: never read here)."""
        with self._lock:
            found = self._items.get(repo)
            return None if found is None else found.config
