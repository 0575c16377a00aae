"""The formats of a file read from a workflow run's artifact: its summary and per-step series.

``read_file(name, data, spec)`` -> ``(summary, series)``; ``BadFile`` with a short named
reason (``malformed JSON in results.json line 3: ...``) otherwise.  ``spec.format``:

* ``json``: an object; nested objects flattened to ``a/b`` keys, numbers written as text read
  as numbers (``bot.core.history.runs.numeric_summary``, as W&B summaries are read);
* ``lm-eval``: lm-evaluation-harness's ``results_<timestamp>.json``: each
  ``results.<task>.<metric>,<filter>`` (and ``groups.<group>...``, lm-eval 0.4.0-0.4.2) is the
  metric ``<task>/<metric>,<filter>``
  (``gsm8k/exact_match,strict-match``: the names lm-eval threshold YAML gates bind to,
  docs/threshold-files.md); ``*_stderr`` entries and ``alias`` are left out (a task written
  without filters, lm-eval < 0.4, gives ``<task>/<metric>``);
* ``pytest-benchmark``: ``benchmarks[].name`` and its ``stats`` -> ``<name>/mean``,
  ``<name>/median`` ...;
* ``jsonl`` (one object a line) and ``csv`` (a header row): with a ``step`` (or ``_step``,
  ``global_step``) column each metric is a per-step series and its last step's value the
  summary; without one, the rows' values, a later row's winning;
* ``tensorboard``: an event file's scalars (``simple_value``, or a scalar tensor of the
  ``scalars`` plugin) -> per-step series by tag, the last step's value the summary.  Records
  are framed as TFRecords (length, masked CRC-32C of it, payload, masked CRC-32C of it), both
  checksums verified (google-crc32c); the payload is an ``Event`` protobuf decoded with
  tensorboardX's message classes, imported here on first use (the ``actions`` extra);
* ``auto``: by name (``events.out.tfevents.*``, ``.jsonl``/``.ndjson``, ``.csv``, ``.json``)
  and, for JSON, by content: lm-eval by its ``results`` of objects beside ``configs`` /
  ``versions`` / ``n-shot`` / ``config``, pytest-benchmark by its ``benchmarks`` with
  ``stats``; other JSON is read as ``json``.

``spec.summary_keys`` (metric -> key) then also exposes a key's value under the metric name.
Bounds, beyond the archive's (``bot.core.history.artifacts``): JSON nesting and digits as
``bot.core.bounded.json_bounds``; at most ``MAX_SERIES_METRICS`` (100) series and
``MAX_SERIES_STEPS`` (100,000) rows or steps per series; at most ``MAX_SUMMARY_METRICS``
(10,000) numbers in a run's summary; at most ``MAX_TABLE_VALUES`` (1,000,000) values read from
a JSONL / CSV file's rows; at most ``MAX_RECORDS`` (500,000) TensorBoard records.
"""

from __future__ import annotations

import csv
import io
import json
import math
import struct
from collections.abc import Iterable, Iterator, Mapping
from pathlib import PurePosixPath
from typing import Any

from bot.core.bounded import json_bounds
from bot.core.history.runs import numeric_summary, read_summary
from bot.core.history.series import MAX_SERIES_METRICS, MAX_SERIES_STEPS, MAX_STEP_DIGITS
from bot.core.models import SourceSpec

MAX_RECORDS = 500_000  # TensorBoard records of one event file (about 2 s)
MAX_TABLE_VALUES = 1_000_000  # values read from the rows of a JSONL / CSV file (about 2 s)
MAX_SUMMARY_METRICS = 10_000  # numbers of one run's summary
STEP_KEYS = ("step", "_step", "global_step")
LM_EVAL_KEYS = frozenset({"configs", "versions", "n-shot", "config"})
_MASK_DELTA = 0xA282EAD8
_DT_FLOAT, _DT_DOUBLE = 1, 2  # TensorFlow's DataType

Summary = dict[str, float]
Series = dict[str, dict[int, float]]


class BadFile(ValueError):
    """The file breaks its format or a bound; ``str()`` is the skip's reason."""


def read_file(name: str, data: bytes, spec: SourceSpec) -> tuple[Summary, Series]:
    """The summary and per-step series of the artifact's file ``name`` (module docstring)."""
    base = PurePosixPath(name).name
    kind = spec.format if spec.format != "auto" else _by_name(base)
    base = shown(base)
    if kind == "tensorboard":
        summary, series = _tensorboard(base, data)
    elif kind in ("jsonl", "csv"):
        summary, series = _table(base, _jsonl(base, data) if kind == "jsonl" else _csv(base, data))
    else:
        summary, series = _json(base, data, kind), {}
    for metric, key in spec.summary_keys.items():
        if key in summary:
            summary[metric] = summary[key]
        if key in series:
            series[metric] = series[key]
    if not summary:
        raise BadFile(f"no numbers in {base}")
    if len(summary) > MAX_SUMMARY_METRICS:
        raise BadFile(f"{base} holds more than {MAX_SUMMARY_METRICS:,} numbers")
    return summary, series


def shown(name: str) -> str:
    """A member name as a reason may show it: printable characters only, at most 100."""
    cut = name if len(name) <= 100 else name[:97] + "..."
    return "".join(c if c.isprintable() else "?" for c in cut)


def _by_name(base: str) -> str:
    suffix = PurePosixPath(base).suffix.lower()
    if base.startswith("events.out.tfevents."):
        return "tensorboard"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    return "auto"  # JSON, recognised by its content


def _text(base: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadFile(f"{base} is not UTF-8 text") from None


def _loads(base: str, text: str, line: int | None = None) -> Any:
    where = f" line {line}" if line is not None else ""
    if (found := json_bounds(text)) is not None:
        raise BadFile(f"malformed JSON in {base}{where}: {found[1]}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = line if line is not None else exc.lineno
        raise BadFile(f"malformed JSON in {base} line {at}: {exc.msg}") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise BadFile(f"malformed JSON in {base}{where}: {str(exc).split(':')[0]}") from None


# --------------------------------------------------------------------------- JSON


def _json(base: str, data: bytes, kind: str) -> Summary:
    found = _loads(base, _text(base, data))
    if not isinstance(found, dict):
        raise BadFile(f"{base}: expected a JSON object, got {type(found).__name__}")
    if kind == "lm-eval" or (kind == "auto" and _is_lm_eval(found)):
        return _lm_eval(base, found)
    if kind == "pytest-benchmark" or (kind == "auto" and _is_benchmark(found)):
        return _benchmark(base, found)
    return numeric_summary(found, {}).metrics


def _is_lm_eval(found: Mapping[str, Any]) -> bool:
    results = found.get("results")
    return (
        isinstance(results, dict)
        and bool(results)
        and all(isinstance(task, dict) for task in results.values())
        and not LM_EVAL_KEYS.isdisjoint(found)
    )


def _lm_eval(base: str, found: Mapping[str, Any]) -> Summary:
    results = found.get("results")
    if not isinstance(results, dict):
        raise BadFile(f"{base}: no lm-eval `results` object")
    groups = found.get("groups")
    tasks = [*(groups.items() if isinstance(groups, dict) else ()), *results.items()]
    raw: dict[str, Any] = {}
    for task, entries in tasks:  # a task of `results` wins over a group of the same name
        if not isinstance(entries, dict):
            continue
        filtered = any("," in key for key in entries)
        for key, value in entries.items():
            metric = key.partition(",")[0]
            if key == "alias" or metric.endswith("_stderr") or (filtered and "," not in key):
                continue
            raw[f"{task}/{key}"] = value
    return read_summary(raw).metrics


def _is_benchmark(found: Mapping[str, Any]) -> bool:
    benchmarks = found.get("benchmarks")
    return (
        isinstance(benchmarks, list)
        and bool(benchmarks)
        and all(isinstance(b, dict) and isinstance(b.get("stats"), dict) for b in benchmarks)
    )


def _benchmark(base: str, found: Mapping[str, Any]) -> Summary:
    if not _is_benchmark(found):
        raise BadFile(f"{base}: no pytest-benchmark `benchmarks` with `stats`")
    raw = {
        f"{b.get('name')}/{stat}": value
        for b in found["benchmarks"]
        for stat, value in b["stats"].items()
    }
    return read_summary(raw).metrics


# --------------------------------------------------------------------------- JSONL, CSV


def _jsonl(base: str, data: bytes) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for number, line in enumerate(_text(base, data).split("\n"), start=1):
        if not line.strip():
            continue
        row = _loads(base, line, number)
        if not isinstance(row, dict):
            raise BadFile(f"{base} line {number}: expected a JSON object")
        yield number, row


def _csv(base: str, data: bytes) -> Iterator[tuple[int, Mapping[str, Any]]]:
    reader = csv.reader(io.StringIO(_text(base, data), newline=""))
    try:
        header = [cell.strip() for cell in next(reader, [])]
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) != len(header):
                raise BadFile(
                    f"malformed CSV in {base} line {reader.line_num}: "
                    f"{len(cells)} fields, the header has {len(header)}"
                )
            yield reader.line_num, {k: v for k, v in zip(header, cells, strict=True) if v.strip()}
    except csv.Error as exc:
        raise BadFile(f"malformed CSV in {base} line {reader.line_num}: {exc}") from None


def _step(base: str, number: int, value: object) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and text.isascii() and text.isdigit():
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadFile(f"{base} line {number}: step {str(value)[:30]!r} is not a whole number")
    if len(str(value)) > MAX_STEP_DIGITS:
        raise BadFile(f"{base} line {number}: step of more than {MAX_STEP_DIGITS} digits")
    return value


def _table(base: str, rows: Iterable[tuple[int, Mapping[str, Any]]]) -> tuple[Summary, Series]:
    """Rows -> per-step series (with a step column) or the rows' values, later ones winning."""
    summary: Summary = {}
    series: Series = {}
    step_key: str | None = None
    read = 0
    for count, (number, row) in enumerate(rows, start=1):
        if count > MAX_SERIES_STEPS:
            raise BadFile(f"{base} holds more than {MAX_SERIES_STEPS:,} rows")
        read += len(row)
        if read > MAX_TABLE_VALUES:
            raise BadFile(f"{base} holds more than {MAX_TABLE_VALUES:,} values")
        if count == 1:
            step_key = next((k for k in STEP_KEYS if k in row), None)
        values = read_summary({k: v for k, v in row.items() if k != step_key}).metrics
        if step_key is None:
            summary.update(values)
            continue
        if step_key not in row:
            raise BadFile(f"{base} line {number}: no {step_key!r}")
        step = _step(base, number, row[step_key])
        for metric, value in values.items():
            series.setdefault(metric, {})[step] = value
        if len(series) > MAX_SERIES_METRICS:
            raise BadFile(f"{base} holds more than {MAX_SERIES_METRICS} series")
    return _last_steps(series) if step_key else summary, series


def _last_steps(series: Series) -> Summary:
    return {metric: steps[max(steps)] for metric, steps in series.items() if steps}


# --------------------------------------------------------------------------- TensorBoard


def _masked_crc(data: bytes) -> int:
    import google_crc32c  # the actions extra

    crc = int(google_crc32c.value(data))
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _records(base: str, data: bytes) -> Iterator[bytes]:
    """The payloads of a TFRecord file, both checksums of each verified."""
    corrupt = BadFile(f"corrupt TensorBoard record in {base}")
    offset = count = 0
    while offset < len(data):
        count += 1
        if count > MAX_RECORDS:
            raise BadFile(f"{base} holds more than {MAX_RECORDS:,} records")
        if len(data) - offset < 12:
            raise corrupt
        header = data[offset : offset + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[offset + 8 : offset + 12])
        end = offset + 12 + length
        if _masked_crc(header) != length_crc or end + 4 > len(data):
            raise corrupt
        payload = data[offset + 12 : end]
        (payload_crc,) = struct.unpack("<I", data[end : end + 4])
        if _masked_crc(payload) != payload_crc:
            raise corrupt
        offset = end + 4
        yield payload


def _scalar(value: Any, scalar_tags: set[str]) -> float | None:
    """A summary value's scalar: ``simple_value``, or a one-element float tensor of a tag the
    ``scalars`` plugin declared (TF2 / ``new_style`` writers declare it on the first event)."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if value.metadata.plugin_data.plugin_name == "scalars":
        scalar_tags.add(value.tag)
    if kind != "tensor" or value.tag not in scalar_tags:
        return None
    tensor = value.tensor
    if tensor.dtype == _DT_FLOAT:
        listed, code = list(tensor.float_val), "<f"
    elif tensor.dtype == _DT_DOUBLE:
        listed, code = list(tensor.double_val), "<d"
    else:
        return None
    if len(listed) == 1:
        return float(listed[0])
    if len(tensor.tensor_content) == struct.calcsize(code):
        return float(struct.unpack(code, tensor.tensor_content)[0])
    return None


def _tensorboard(base: str, data: bytes) -> tuple[Summary, Series]:
    from google.protobuf.message import DecodeError
    from tensorboardX.proto.event_pb2 import Event  # the actions extra

    series: Series = {}
    scalar_tags: set[str] = set()
    for payload in _records(base, data):
        try:
            event = Event.FromString(payload)
        except DecodeError:
            raise BadFile(f"corrupt TensorBoard record in {base}") from None
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            number = _scalar(value, scalar_tags)
            if number is None:
                continue
            steps = series.setdefault(value.tag, {})
            steps[int(event.step)] = number
            if len(steps) > MAX_SERIES_STEPS:
                raise BadFile(f"{base}: {value.tag[:60]} has more than {MAX_SERIES_STEPS:,} steps")
        if len(series) > MAX_SERIES_METRICS:
            raise BadFile(f"{base} holds more than {MAX_SERIES_METRICS} series")
    finite = {
        tag: {step: v for step, v in steps.items() if math.isfinite(v)}
        for tag, steps in series.items()
    }
    return _last_steps(finite), {tag: steps for tag, steps in finite.items() if steps}
