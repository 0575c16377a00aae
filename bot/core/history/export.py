"""Runs written back as a JSON Lines history file (docs/history-format.md): pure.

``run_line`` is the inverse of reading one line with ``bot.core.history.formats``:
``parse_jsonl`` reads the lines written here back to the same runs (id, name, time, state,
commit, tags, summary and per-step series).  ``merge`` brings a history file up to date
with runs read again from a source (``threshold-bot export --append``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from bot.core.models import History, Run


def timestamp(value: datetime) -> str:
    """A time in UTC as ISO 8601 with a ``Z``: ``2026-07-31T08:05:12Z``."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def run_line(run: Run) -> str:
    """One run as one JSON line (no newline); ``series`` only when the run has some.

    Values are finite (a ``Run`` holds no others); text is ASCII-escaped so that the line
    is valid whatever the output's encoding.
    """
    record: dict[str, Any] = {
        "id": run.id,
        "name": run.name,
        "created_at": timestamp(run.created_at),
        "state": run.state,
        "commit": run.commit,
        "tags": list(run.tags),
        "summary": run.summary,
    }
    if run.series:
        record["series"] = {
            metric: {str(step): value for step, value in sorted(steps.items())}
            for metric, steps in run.series.items()
        }
    return json.dumps(record, allow_nan=False)


def history_text(runs: Iterable[Run]) -> str:
    """The runs as a JSON Lines file, one line each, in the order given."""
    return "".join(run_line(run) + "\n" for run in runs)


def running_ids(history: History) -> list[str]:
    """Ids of the runs that had not ended when the history was written (read them again)."""
    return [r.id for r in history.runs if r.state == "running"]


class Merged(NamedTuple):
    """A history file brought up to date: its new text, and how many runs changed."""

    text: str
    added: int
    updated: int


def merge(text: str, existing: History, fresh: Iterable[Run]) -> Merged:
    """``text`` (a JSON Lines file, read whole as ``existing``) with ``fresh`` runs merged in.

    A run the file does not have is appended; a run it has is replaced in place when it
    changed (a run that was still running has ended: the line a reader keeps, the last of
    its id) and kept as written otherwise.  A fresh run read without series keeps the
    series the file had for it.  Other lines are kept as written (blank lines dropped, line
    ends ``\n``); ``text`` must be what ``parse_jsonl`` read into ``existing`` without error.
    """
    known = {r.id: r for r in existing.runs}
    changed: dict[str, str] = {}
    added: list[str] = []
    for run in fresh:
        old = known.get(run.id)
        if old is not None and old.series and not run.series:
            run = run.model_copy(update={"series": old.series})
        line = run_line(run)
        if old is None:
            added.append(line)
        elif line != run_line(old):
            changed[run.id] = line
    lines = [line for line in text.removeprefix("\ufeff").split("\n") if line.strip()]
    ids = [_id(json.loads(line)["id"]) for line in lines]
    last = {run_id: index for index, run_id in enumerate(ids)}  # the copy a reader keeps
    lines = [
        changed[run_id] if run_id in changed and last[run_id] == index else line.rstrip("\r")
        for index, (run_id, line) in enumerate(zip(ids, lines, strict=True))
    ]
    lines += added
    return Merged("".join(line + "\n" for line in lines), len(added), len(changed))


def _id(value: object) -> str:
    """A line's id as ``parse_jsonl`` reads it (a string, or an integer's digits)."""
    return value if isinstance(value, str) else str(value)
