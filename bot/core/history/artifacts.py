"""One workflow run's artifact -> one history run (issue 29): the archive, read in memory.

``read_artifact(archive, spec, run)`` takes the artifact as GitHub serves it (a zip archive,
as bytes), the ``actions`` source spec and the workflow run (id, start time, head commit,
state), and returns a ``Run`` or a ``Skipped`` with a short named reason.  A failed workflow
run is still read: it is a ``failed`` run with its metrics.  Nothing is extracted: members are
read into memory, never written to disk, and nothing here does I/O.

The archive is hostile, so every bound is checked while reading, never trusted from the zip
headers:

* ``MAX_ARCHIVE_BYTES`` (64 MiB) of archive, ``MAX_MEMBERS`` (10,000) members;
* a member path that is absolute, has a drive (``C:``), a ``..`` segment, a backslash or a NUL
  (zipfile itself cuts a name at its first NUL) refuses the whole archive (``unsafe member
  path ../x``); symlink members and directories are ignored.  Names in reasons are shown with
  printable characters only, cut at 100;
* only the chosen member is decompressed, in chunks, and stopped past ``MAX_MEMBER_BYTES``
  (64 MiB) or, beyond 1 MiB, past ``MAX_RATIO`` (200) times its compressed size (a zip bomb);
  the headers' declared sizes must not add up past ``MAX_UNPACKED_BYTES`` (256 MiB) either.

Which member: ``spec.file`` (a path or glob, ``**/results_*.json``); when several match, the
one whose file name sorts last (lm-eval's ``results_<timestamp>.json``, TensorBoard's
``events.out.tfevents.<time>.<host>``: the newest), ties by full path.  Without ``file``, the
only file of the artifact, else its lm-eval results file (``results*.json``), else its
TensorBoard event file; anything else is a skip asking for ``file:``.  The formats are in
``bot.core.history.artifact_formats``.
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
import zlib
from datetime import datetime
from pathlib import PurePosixPath
from typing import NamedTuple

from bot.core.globs import glob_match
from bot.core.history.artifact_formats import BadFile, read_file, shown
from bot.core.models import Run, RunState, SourceSpec

MAX_ARCHIVE_BYTES = 64 << 20  # 64 MiB of zip archive
MAX_MEMBERS = 10_000
MAX_MEMBER_BYTES = 64 << 20  # 64 MiB unpacked of the member read
MAX_UNPACKED_BYTES = 256 << 20  # 256 MiB unpacked in all, as the headers declare
MAX_RATIO = 200  # unpacked / compressed, checked beyond RATIO_FLOOR
RATIO_FLOOR = 1 << 20  # a small member may compress better (a file of zeros)
CHUNK = 1 << 16

_DRIVE = re.compile(r"^[A-Za-z]:")


class WorkflowRun(NamedTuple):
    """What GitHub says of one workflow run: it becomes the history run's fields."""

    id: str
    created_at: datetime  # the run's start time
    commit: str | None  # its head commit
    state: RunState  # finished (success), failed, crashed, killed (cancelled), running
    name: str | None = None


class Skipped(NamedTuple):
    """A workflow run whose artifact gave no run, and why (``expired``, ``no file matching
    results_*.json``, ``compression ratio over 200`` ...): counted, named in the review."""

    run_id: str
    reason: str


class _Refused(Exception):
    """The archive or its member breaks a bound; ``str()`` is the skip's reason."""


def read_artifact(archive: bytes, spec: SourceSpec, run: WorkflowRun) -> Run | Skipped:
    """The history run of ``run`` read from its artifact ``archive``, or why it is skipped.

    ``ModuleNotFoundError`` (``tensorboardX``) when a TensorBoard file is read without the
    ``actions`` extra installed: a missing library, not a bad artifact.
    """
    try:
        name, data = _member(archive, spec)
        summary, series = read_file(name, data, spec)
    except (_Refused, BadFile) as exc:
        return Skipped(run.id, str(exc))
    return Run(
        id=run.id,
        created_at=run.created_at,
        name=run.name,
        state=run.state,
        commit=run.commit,
        summary=summary,
        series=series,
    )


def _member(archive: bytes, spec: SourceSpec) -> tuple[str, bytes]:
    """The chosen member's name and bytes, within the bounds."""
    if len(archive) > MAX_ARCHIVE_BYTES:
        raise _Refused(f"archive over {MAX_ARCHIVE_BYTES:,} bytes")
    try:
        zipped = zipfile.ZipFile(io.BytesIO(archive))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise _Refused(f"not a zip archive: {exc}") from None
    with zipped:
        infos = zipped.infolist()
        if len(infos) > MAX_MEMBERS:
            raise _Refused(f"archive holds more than {MAX_MEMBERS:,} members")
        files: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            _check_path(info.filename)
            if not info.is_dir() and not _is_symlink(info):
                files[info.filename] = info
        if sum(info.file_size for info in files.values()) > MAX_UNPACKED_BYTES:
            raise _Refused(f"archive over {MAX_UNPACKED_BYTES >> 20} MiB unpacked")
        name = _choose(sorted(files), spec)
        return name, _read(zipped, files[name])


def _check_path(name: str) -> None:
    parts = name.split("/")
    if (
        "\x00" in name
        or "\\" in name
        or name.startswith("/")
        or _DRIVE.match(name)
        or ".." in parts
    ):
        raise _Refused(f"unsafe member path {shown(name)}")


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _newest(names: list[str]) -> str:
    return max(names, key=lambda n: (PurePosixPath(n).name, n))


def _choose(names: list[str], spec: SourceSpec) -> str:
    if spec.file:
        matching = [n for n in names if glob_match(spec.file, n)]
        if not matching:
            raise _Refused(f"no file matching {spec.file}")
        return _newest(matching)
    if len(names) == 1:
        return names[0]
    for pattern in ("**/results*.json", "**/events.out.tfevents.*"):
        if matching := [n for n in names if glob_match(pattern, n)]:
            return _newest(matching)
    if not names:
        raise _Refused("empty artifact")
    listed = ", ".join(map(shown, names[:5])) + (", ..." if len(names) > 5 else "")
    raise _Refused(f"several files in the artifact ({listed}): name one with `file:`")


def _read(zipped: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The member's bytes, counted while decompressing (the header's sizes are not trusted)."""
    chunks: list[bytes] = []
    size = 0
    compressed = max(info.compress_size, 1)
    try:
        with zipped.open(info) as member:
            while chunk := member.read(CHUNK):
                size += len(chunk)
                if size > MAX_MEMBER_BYTES:
                    raise _Refused(
                        f"{shown(info.filename)} over {MAX_MEMBER_BYTES:,} bytes unpacked"
                    )
                if size > RATIO_FLOOR and size > MAX_RATIO * compressed:
                    raise _Refused(f"compression ratio over {MAX_RATIO}")
                chunks.append(chunk)
    except (
        zipfile.BadZipFile,
        zlib.error,
        NotImplementedError,
        RuntimeError,
        OSError,
        EOFError,
    ) as exc:
        # a bad CRC or size (a header that lies), an encrypted or unknown compression method
        raise _Refused(f"unreadable member {shown(info.filename)}: {exc}") from None
    return b"".join(chunks)
