"""The other files of the repository a threshold file's gates depend on, read bounded.

The shell of ``bot.core.thresholds.related``: given the file's path and text, a reader and a
directory lister (the disk for the CLI, the contents API at the file's ref for the App and
the Action's base), gather

* **forward** references (``wanted_paths``: the modules a Python file imports…), and theirs
  in turn: at most ``MAX_HOPS`` hops from the file;
* **reverse** candidates: the ``.py`` / ``.sh`` / ``.bash`` files of the file's directory and
  of each directory above it up to the repository root that ``mention`` it (the tests that
  import a constants module, the script reading a golden file).  Not for a Python test
  file (nothing imports a test) nor a shell script (the scripts it runs are forward).

Bounds: at most ``MAX_FILES`` files kept (``MAX_READS`` read), ``MAX_FILE_BYTES`` each and
``MAX_TOTAL_BYTES`` in all, ``MAX_LEVELS`` directories listed, and ``check`` (the job's
deadline) before every read.  A path is read only when its directory lists it, never with
``..`` or absolute.  A file that cannot be read, or is over a bound, is skipped and counted
(``Related.skipped``), never an error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from bot.adapters.github.api import GitHubAPI
from bot.adapters.github.errors import GitHubError
from bot.core.models import ThresholdFile
from bot.core.thresholds.python.reader import is_test_file
from bot.core.thresholds.related import READERS, mentions, wanted_paths

MAX_FILES = 32
MAX_READS = 64
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 4 << 20
MAX_HOPS = 2
MAX_LEVELS = 8


class Unreadable(Exception):
    """A related file that cannot be read (the reason is the message)."""


Reader = Callable[[str], str | None]  # a repository path -> its text (None: no such file)
Lister = Callable[[str], Iterable[str]]  # a directory ("" the root) -> the names in it


@dataclass(frozen=True)
class Related:
    """The texts read, by repository path, and what was skipped (``path: reason``)."""

    files: Mapping[str, str] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()

    def notes(self) -> tuple[str, ...]:
        """What a review says about the skipped files (nothing when none was)."""
        if not self.skipped:
            return ()
        shown = "; ".join(self.skipped[:3]) + ("; …" if len(self.skipped) > 3 else "")
        count = len(self.skipped)
        return (f"{count} related file{'s' if count > 1 else ''} not read ({shown})",)


def safe_path(path: str) -> str | None:
    """``path`` as a clean repository path, or None when it is absolute or leaves the root."""
    if not path or path.startswith("/") or "\\" in path or "\x00" in path:
        return None
    parts = [p for p in PurePosixPath(path).parts if p != "."]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


class _Gathering:
    def __init__(self, read: Reader, listdir: Lister, check: Callable[[str], None] | None) -> None:
        self.read_text, self.listdir, self.check = read, listdir, check
        self.files: dict[str, str] = {}
        self.skipped: list[str] = []
        self.seen: set[str] = set()
        self.listed: dict[str, frozenset[str]] = {}
        self.total = 0
        self.reads = 0

    def names(self, directory: str) -> frozenset[str]:
        if directory not in self.listed:
            try:
                self.listed[directory] = frozenset(self.listdir(directory))
            except Unreadable as exc:
                self.skipped.append(f"{directory or '.'}/: {exc}")
                self.listed[directory] = frozenset()
        return self.listed[directory]

    def exists(self, path: str) -> bool:
        parent = PurePosixPath(path).parent.as_posix()
        return PurePosixPath(path).name in self.names("" if parent == "." else parent)

    def read(self, path: str) -> str | None:
        """The text of ``path`` within the bounds (None: skipped, said in ``skipped``)."""
        if path in self.seen:
            return self.files.get(path)
        self.seen.add(path)
        if len(self.files) >= MAX_FILES or self.reads >= MAX_READS:
            self.skipped.append(f"{path}: over {MAX_FILES} related files")
            return None
        if self.check is not None:
            self.check(f"reading {path}")
        self.reads += 1
        try:
            text = self.read_text(path)
        except Unreadable as exc:
            self.skipped.append(f"{path}: {exc}")
            return None
        if text is None:
            return None
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_FILE_BYTES:
            self.skipped.append(f"{path}: larger than {MAX_FILE_BYTES >> 10} KiB")
            return None
        if self.total + size > MAX_TOTAL_BYTES:
            self.skipped.append(f"{path}: over {MAX_TOTAL_BYTES >> 20} MiB of related files")
            return None
        self.total += size
        self.files[path] = text
        return text

    def forward(self, path: str, text: str, hops: int) -> None:
        if hops <= 0:
            return
        for wanted in wanted_paths(path, text):
            clean = safe_path(wanted)
            if clean is None or clean in self.seen or not self.exists(clean):
                continue
            found = self.read(clean)
            if found is not None:
                self.forward(clean, found, hops - 1)

    def reverse(self, path: str) -> None:
        directory = PurePosixPath(path).parent
        for _ in range(MAX_LEVELS):
            where = "" if directory.as_posix() == "." else directory.as_posix()
            for name in sorted(self.names(where)):
                candidate = f"{where}/{name}" if where else name
                if candidate == path or PurePosixPath(name).suffix.lower() not in READERS:
                    continue
                if candidate in self.seen:
                    continue
                text = self.read(candidate)
                if text is None:
                    continue
                if not mentions(path, text):
                    self.total -= len(text.encode("utf-8", "surrogatepass"))
                    del self.files[candidate]
                    continue
                self.forward(candidate, text, MAX_HOPS - 1)  # the helpers it calls
            if directory == directory.parent:
                break
            directory = directory.parent


def related_files(
    path: str,
    text: str,
    read: Reader,
    listdir: Lister,
    *,
    check: Callable[[str], None] | None = None,
) -> Related:
    """The related files of the file at ``path`` (module docstring); ``read`` and ``listdir``
    may raise ``Unreadable``; ``check(what)`` is called before each read (the deadline)."""
    clean = safe_path(path)
    if clean is None:
        return Related()
    gathering = _Gathering(read, listdir, check)
    gathering.seen.add(clean)
    gathering.forward(clean, text, MAX_HOPS)
    if not (is_test_file(clean) or PurePosixPath(clean).suffix.lower() in READERS - {".py"}):
        gathering.reverse(clean)
    return Related(dict(gathering.files), tuple(gathering.skipped))


# --------------------------------------------------------------------------- readers


def repository_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding ``.git``; else ``start``."""
    start = start.resolve()
    return next((d for d in (start, *start.parents) if (d / ".git").exists()), start)


def disk_related(path: str, text: str, base: Path | None = None) -> Related:
    """The related files of ``path`` (relative to ``base``, default the current directory)
    read from disk, never outside the repository root (``repository_root``): a path
    resolving outside it, through ``..`` or a symlink, is not read."""
    here = (base or Path.cwd()).resolve()
    root = repository_root(here)

    def inside(relative: str) -> Path | None:
        found = (here / relative).resolve()
        return found if found.is_relative_to(root) else None

    def read(relative: str) -> str | None:
        file = inside(relative)
        if file is None:
            raise Unreadable("outside the repository")
        try:
            if not file.is_file():
                return None
            if file.stat().st_size > MAX_FILE_BYTES:
                raise Unreadable(f"larger than {MAX_FILE_BYTES >> 10} KiB")
            return file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise Unreadable("not UTF-8 text") from None
        except OSError as exc:
            raise Unreadable(f"cannot be read ({exc.strerror})") from None

    def listdir(relative: str) -> list[str]:
        folder = inside(relative or ".")
        try:
            return os.listdir(folder) if folder is not None and folder.is_dir() else []
        except OSError:
            return []

    return related_files(path, text, read, listdir)


class GitHubReads:
    """What one job reads through the contents API, shared by the related files of every
    threshold file it reads: each ref's tree listed once, each file read once (texts kept up
    to ``MAX_CACHED_BYTES`` in all; beyond that they are read again)."""

    MAX_CACHED_BYTES = 16 << 20

    def __init__(self, gh: GitHubAPI, repo: str, max_bytes: int = MAX_FILE_BYTES) -> None:
        self.gh, self.repo, self.max_bytes = gh, repo, min(max_bytes, MAX_FILE_BYTES)
        self.trees: dict[str, dict[str, set[str]] | Unreadable] = {}
        self.texts: dict[tuple[str, str], str | Unreadable | None] = {}
        self.cached = 0

    def listdir(self, ref: str, directory: str) -> set[str]:
        """The names in ``directory`` of the tree at ``ref``; ``Unreadable`` when the tree
        cannot be listed."""
        if ref not in self.trees:
            try:
                tree: dict[str, set[str]] = {}
                for entry in self.gh.tree_paths(self.repo, ref):
                    parent, _, name = entry.rpartition("/")
                    tree.setdefault(parent, set()).add(name)
                self.trees[ref] = tree
            except GitHubError as exc:
                self.trees[ref] = Unreadable(f"the tree at {ref[:12]} cannot be listed: {exc}")
        found = self.trees[ref]
        if isinstance(found, Unreadable):
            raise found
        return found.get(directory, set())

    def read(self, ref: str, path: str) -> str | None:
        """The text of ``path`` at ``ref`` (None: no such file); ``Unreadable`` on failure."""
        key = (ref, path)
        if key not in self.texts:
            try:
                found: str | Unreadable | None = self.gh.file_text(
                    self.repo, path, ref, max_bytes=self.max_bytes
                )
            except GitHubError as exc:
                found = Unreadable(str(exc))
            size = len(found) if isinstance(found, str) else 0
            if self.cached + size > self.MAX_CACHED_BYTES:
                return _raised(found)
            self.cached += size
            self.texts[key] = found
        return _raised(self.texts[key])


def _raised(found: str | Unreadable | None) -> str | None:
    if isinstance(found, Unreadable):
        raise found
    return found


def github_related(
    reads: GitHubReads,
    ref: str,
    path: str,
    text: str,
    *,
    check: Callable[[str], None] | None = None,
) -> Related:
    """The related files of ``path`` at ``ref`` (the ref its text was read at), through the
    job's ``reads`` (the tree listed only when a path is wanted); a GitHub failure skips the
    file (counted)."""
    return related_files(
        path,
        text,
        lambda relative: reads.read(ref, relative),
        lambda directory: reads.listdir(ref, directory),
        check=check,
    )


def with_notes(found: ThresholdFile | None, related: Related) -> ThresholdFile | None:
    """``found`` with what was skipped among its related files in its notes."""
    notes = related.notes()
    if found is None or not notes:
        return found
    return found.model_copy(update={"notes": (*found.notes, *notes)})
