"""The run history file formats, JSON Lines and CSV (docs/history-format.md): pure parsing.

``parse_history`` picks the format by the name's extension; ``select_runs`` applies a
source's run filters.  A JSON line may carry per-step series (``bot.core.history.series``);
CSV rows carry none.  Reading the file is the adapters' work
(``bot.adapters.history.files``).

Values are validated here once, by hand, and ``Run`` objects are then built with
``model_construct``: running pydantic over every metric of 10,000 runs costs more than
parsing the JSON itself.

A history file read from a repository is hostile: a JSON line nested deeper than
``MAX_DEPTH`` (``bot.core.bounded``, found before ``json.loads`` recurses) or with an
integer of more digits than Python converts is a malformed line; ``name_regex`` is
matched in linear time (``bot.core.history.names``).
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import PurePosixPath
from typing import Any, cast, get_args

from bot.core.bounded import json_bounds
from bot.core.history.names import name_filter
from bot.core.history.runs import Summary, read_summary
from bot.core.history.series import BadSeries, RunSeries, read_series, values
from bot.core.history.sources import BadHistory
from bot.core.models import History, HistoryStats, Run, RunState, SourceSpec, as_utc

STATES: frozenset[str] = frozenset(get_args(RunState))
CSV_FIELDS: frozenset[str] = frozenset({"id", "created_at", "name", "state", "commit", "tags"})
JSONL_SUFFIXES: frozenset[str] = frozenset({".jsonl", ".ndjson"})
CSV_SUFFIXES: frozenset[str] = frozenset({".csv"})


class _BadLine(ValueError):
    """A malformed line or row; the reader adds the file name and line number."""


@dataclass
class _Parsed:
    """One run as read from one line, with what was dropped from its summary."""

    run: Run
    non_finite: int
    non_numeric: int
    flattened: int = 0
    numeric_strings: int = 0
    not_numbers: tuple[str, ...] = ()  # the summary keys of the values dropped


# --------------------------------------------------------------------------- values


def _text(value: object, field: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _BadLine(f"{field!r} must be a string, not {type(value).__name__}")
    return str(value)


def _required(value: object, field: str) -> str:
    text = _text(value, field)
    if text is None:
        raise _BadLine(f"missing {field!r}")
    return text


def _timestamp(value: object) -> datetime:
    text = _required(value, "created_at")
    try:
        return as_utc(datetime.fromisoformat(text.strip()))
    except (ValueError, OverflowError):  # OverflowError: out of range once moved to UTC
        raise _BadLine(f"'created_at' is not an ISO 8601 timestamp: {text!r}") from None


def _state(value: object) -> RunState:
    text = _text(value, "state")
    if text is None:
        return "finished"
    state = text.strip().lower()
    if state not in STATES:
        raise _BadLine(f"unknown state {text!r} (expected one of {', '.join(sorted(STATES))})")
    return cast(RunState, state)


def _tags(value: object) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):  # CSV: "a;b"
        return tuple(t.strip() for t in value.split(";") if t.strip())
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return tuple(value)
    raise _BadLine("'tags' must be a list of strings")


def _csv_summary(cells: Iterable[tuple[str, str]]) -> tuple[dict[str, float], list[str], int]:
    """Numbers of a CSV row, the columns of the values dropped (NaN and infinities too), and
    how many were text; an empty cell is an absent value, other text is non-numeric."""
    summary: dict[str, float] = {}
    texts: list[str] = []
    for key, cell in cells:
        if cell.strip():
            try:
                summary[key] = float(cell)
            except ValueError:
                texts.append(key)
    dropped = [key for key, value in summary.items() if not math.isfinite(value)]
    for key in dropped:
        del summary[key]
    return summary, texts + dropped, len(texts)


def _run(
    fields: dict[str, Any],
    summary: dict[str, float],
    non_finite: int,
    non_numeric: int,
    series: RunSeries | None = None,
    not_numbers: tuple[str, ...] = (),
) -> _Parsed:
    run = Run.model_construct(
        id=_required(fields.get("id"), "id"),
        created_at=_timestamp(fields.get("created_at")),
        name=_text(fields.get("name"), "name"),
        state=_state(fields.get("state")),
        commit=_text(fields.get("commit"), "commit"),
        tags=_tags(fields.get("tags")),
        summary=summary,
        series=values(series) if series else {},
    )
    if series:
        non_finite += sum(steps.non_finite for steps in series.values())
        non_numeric += sum(steps.non_numeric for steps in series.values())
    return _Parsed(run, non_finite, non_numeric, not_numbers=not_numbers)


# --------------------------------------------------------------------------- lines


def _jsonl_line(line: str) -> _Parsed:
    if (found := json_bounds(line, numbers=False)) is not None:  # before json.loads recurses
        raise _BadLine(f"not valid JSON: {found[1]} (column {found[0] + 1})")
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _BadLine(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise _BadLine(f"not valid JSON: {str(exc).split(':')[0]}") from None
    if not isinstance(data, dict):
        raise _BadLine(f"expected a JSON object, got {type(data).__name__}")
    if "summary" not in data:
        raise _BadLine("missing 'summary'")
    raw = data["summary"]
    if not isinstance(raw, dict):
        raise _BadLine(f"'summary' must be an object, not {type(raw).__name__}")
    if isinstance(data.get("tags"), str):
        raise _BadLine("'tags' must be a list of strings")
    summary: Summary = read_summary(raw)  # nested objects flattened, numeric text read
    try:  # per-step values (bot.core.history.series); null is no series
        series = None if data.get("series") is None else read_series(data["series"])
    except BadSeries as exc:
        raise _BadLine(str(exc)) from None
    parsed = _run(
        data, summary.metrics, summary.non_finite, summary.non_numeric, series, summary.not_numbers
    )
    parsed.flattened, parsed.numeric_strings = summary.flattened, summary.numeric_strings
    return parsed


def _numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    # split on newlines only: JSON strings may hold U+2028 and other characters that
    # str.splitlines() would treat as line breaks
    for number, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        if line.strip():
            yield number, line


def _collect(
    rows: Iterable[tuple[int, Callable[[], _Parsed]]], name: str, skip_bad_lines: bool
) -> History:
    """Build the History: last duplicate wins, sorted by ``created_at``, with the counts."""
    kept: dict[str, _Parsed] = {}
    duplicates = skipped = 0
    for number, parse in rows:
        try:
            parsed = parse()
        except _BadLine as exc:
            if not skip_bad_lines:
                raise BadHistory(f"{name}:{number}: {exc}") from None
            skipped += 1
            continue
        if parsed.run.id in kept:
            duplicates += 1
            del kept[parsed.run.id]  # the later line also takes the later position
        kept[parsed.run.id] = parsed
    runs = sorted((p.run for p in kept.values()), key=lambda r: r.created_at)
    by_state = Counter(r.state for r in runs)
    not_numbers = Counter(
        key for p in kept.values() if p.run.state == "finished" for key in p.not_numbers
    )
    stats = HistoryStats(
        total=len(runs),
        finished=by_state.get("finished", 0),
        by_state=dict(sorted(by_state.items())),
        non_finite_values=sum(p.non_finite for p in kept.values()),
        non_numeric_values=sum(p.non_numeric for p in kept.values()),
        duplicate_ids=duplicates,
        skipped_lines=skipped,
        flattened_values=sum(p.flattened for p in kept.values()),
        numeric_strings=sum(p.numeric_strings for p in kept.values()),
    )
    return History.model_construct(
        runs=tuple(runs), stats=stats, source=name, not_numbers=dict(not_numbers)
    )


def parse_jsonl(text: str, name: str, *, skip_bad_lines: bool = False) -> History:
    """Parse JSON Lines run history; ``BadHistory("NAME:LINE: reason")`` on a malformed line."""

    def rows() -> Iterator[tuple[int, Callable[[], _Parsed]]]:
        for number, line in _numbered_lines(text):
            yield number, partial(_jsonl_line, line)

    return _collect(rows(), name, skip_bad_lines)


def parse_csv(text: str, name: str, *, skip_bad_lines: bool = False) -> History:
    """Parse CSV run history: a header with ``id,created_at``; unknown columns are metrics.

    Optional columns ``name``, ``state``, ``commit`` and ``tags`` (``;``-separated).  Empty
    cells are absent values.  A column of text only (``stat`` for ``state``) is named in the
    history's ``warnings``, with the known column it may mean.  A bad header is always an
    error; a bad row is one unless ``skip_bad_lines``.
    """
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    header: list[str] | None = None
    header_line = 0
    for header in reader:
        header_line = reader.line_num
        if any(cell.strip() for cell in header):
            break
    if header is None or not any(cell.strip() for cell in header):
        return History(runs=(), source=name)
    columns = [cell.strip() for cell in header]
    problems = [f"missing column {c!r}" for c in ("id", "created_at") if c not in columns]
    repeated = sorted(c for c, n in Counter(columns).items() if n > 1)
    problems += [f"column {c!r} appears twice" for c in repeated]
    if "" in columns:
        problems.append(f"column {columns.index('') + 1} has no name")
    if problems:
        raise BadHistory(f"{name}:{header_line}: bad header: {'; '.join(problems)}")
    metrics = [(i, c) for i, c in enumerate(columns) if c not in CSV_FIELDS]
    fixed = [(i, c) for i, c in enumerate(columns) if c in CSV_FIELDS]
    texts: Counter[str] = Counter()  # metric columns' non-numeric cells
    numeric: set[str] = set()  # metric columns with a number in some row

    def row(cells: list[str]) -> _Parsed:
        if len(cells) != len(columns):
            raise _BadLine(f"expected {len(columns)} fields, found {len(cells)}")
        fields = {c: cells[i].strip() for i, c in fixed}
        summary, dropped, non_numeric = _csv_summary((c, cells[i]) for i, c in metrics)
        numeric.update(summary)
        texts.update(c for i, c in metrics if cells[i].strip() and _is_text(cells[i]))
        non_finite = len(dropped) - non_numeric
        return _run(fields, summary, non_finite, non_numeric, not_numbers=tuple(dropped))

    def rows() -> Iterator[tuple[int, Callable[[], _Parsed]]]:
        start = reader.line_num + 1
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:  # the reader goes on with the next line
                yield start, partial(_raise, exc)
            else:
                if any(cell.strip() for cell in cells):
                    yield start, partial(row, cells)
            start = reader.line_num + 1

    history = _collect(rows(), name, skip_bad_lines)
    unknown = [(c, n) for c, n in texts.items() if c not in numeric]
    if not unknown:
        return history
    warnings = tuple(_text_column(name, column, n) for column, n in unknown)
    return history.model_copy(update={"warnings": warnings})


def _is_text(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return True
    return False


def _text_column(name: str, column: str, cells: int) -> str:
    """The warning for a column of text only: neither a metric nor a known column."""
    close = difflib.get_close_matches(column.lower(), sorted(CSV_FIELDS), n=1)
    hint = f"; did you mean `{close[0]}`?" if close else ""
    return f"{name}: column `{column}` holds text, not numbers ({cells} cells): ignored{hint}"


def _raise(exc: Exception) -> _Parsed:
    raise _BadLine(f"not valid CSV: {exc}")


# --------------------------------------------------------------------------- formats


def parse_history(text: str, name: str, *, skip_bad_lines: bool = False) -> History:
    """Parse ``text`` as JSON Lines or CSV, chosen by the extension of ``name``."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return parse_jsonl(text, name, skip_bad_lines=skip_bad_lines)
    if suffix in CSV_SUFFIXES:
        return parse_csv(text, name, skip_bad_lines=skip_bad_lines)
    raise BadHistory(
        f"{name}: unknown history format {suffix or '(no extension)'!r}: use .jsonl or .csv"
    )


def select_runs(history: History, spec: SourceSpec) -> History:
    """Apply a source's run filters and ``summary_keys`` to a history read whole.

    Filters on fields a history file has (states, tags: all required, ``name_regex`` on the
    name or else the id, ``created_after``); ``group`` and ``job_type`` have no column and
    are ignored.  ``summary_keys`` maps a metric name to the summary key holding it.
    """
    matches = name_filter(spec.name_regex) if spec.name_regex else None
    after = as_utc(spec.created_after) if spec.created_after else None
    wanted_tags = set(spec.tags)
    runs = [
        r
        for r in history.runs
        if r.state in spec.states
        and wanted_tags <= set(r.tags)
        and (matches is None or matches(r.name or r.id))
        and (after is None or r.created_at >= after)
    ]
    if spec.summary_keys:
        runs = [_renamed(r, spec.summary_keys) for r in runs]
    if len(runs) == len(history.runs) and not spec.summary_keys:
        return history
    states = Counter(r.state for r in runs)
    stats = history.stats.model_copy(
        update={
            "total": len(runs),
            "finished": states.get("finished", 0),
            "by_state": dict(sorted(states.items())),
        }
    )
    return History.model_construct(
        runs=tuple(runs), stats=stats, source=history.source, warnings=history.warnings
    )


def _renamed(run: Run, summary_keys: dict[str, str]) -> Run:
    """``run`` with each metric of ``summary_keys`` also under its name (summary, series)."""
    summary, series = dict(run.summary), dict(run.series)
    for metric, key in summary_keys.items():
        if key in run.summary:
            summary[metric] = run.summary[key]
        if key in run.series:
            series[metric] = run.series[key]
    return run.model_copy(update={"summary": summary, "series": series})
