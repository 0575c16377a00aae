"""STUB of the artifact reader (issue 29; the real one replaces this module when merged).

``read_artifact(archive, spec, run)``: the metrics of one workflow run from its artifact's
zip archive, as ``run`` with its summary, or ``Skipped(reason)``.  This stub reads a JSON
file only (the first ``.json`` member, or ``spec.file``), bounded by the zip's own sizes.
"""

from __future__ import annotations

import fnmatch
import io
import json
import zipfile
from typing import NamedTuple

from bot.core.history.runs import numeric_summary
from bot.core.models import Run, SourceSpec

MAX_MEMBER_BYTES = 64 * 1024 * 1024


class Skipped(NamedTuple):
    """Why a run's artifact gave no metrics (a short, named reason)."""

    reason: str


def read_artifact(archive: bytes, spec: SourceSpec, run: Run) -> Run | Skipped:
    """``run`` with the metrics of its artifact, or why it has none."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            names = [i for i in zf.infolist() if not i.is_dir()]
            if any(".." in i.filename.split("/") for i in names):
                return Skipped("unsafe path")
            wanted = spec.file or "*.json"
            found = [i for i in names if fnmatch.fnmatchcase(i.filename, wanted)]
            if not found:
                return Skipped("missing file")
            if found[0].file_size > MAX_MEMBER_BYTES:
                return Skipped("zip bomb")
            raw = json.loads(zf.read(found[0]))
    except (zipfile.BadZipFile, ValueError, OSError):
        return Skipped("malformed file")
    if not isinstance(raw, dict):
        return Skipped("malformed file")
    summary = numeric_summary(raw, dict(spec.summary_keys))
    return run.model_copy(update={"summary": summary.metrics})
