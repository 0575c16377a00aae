"""Run history in the fake W&B server: what ``Run.scan_history`` and ``Run.history`` read.

The real client (wandb 0.31, through wandb-core) scans a run's history with keys as:
``RunHistoryKeys`` (``historyKeys.lastStep``), ``RunParquetHistory`` (exported parquet files
plus the live tail; none here, so the client pages through GraphQL), then one
``SampledHistoryPage`` per range of ``page_size`` steps, whose spec carries ``keys``,
``minStep``, ``maxStep`` (inclusive: the client sends the range's last step) and
``samples``.  ``sampledHistory`` returns, per spec, the rows holding every key, projected on
the keys, sampled down evenly to ``samples`` rows when the range holds more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

SDL = """
type ParquetHistory {
  parquetUrls: [String!]!
  liveData: [JSON!]!
}
"""
RUN_FIELDS = """
  parquetHistory(liveKeys: [String!]!): ParquetHistory!
  sampledHistory(specs: [JSONString!]!): [JSON!]!
"""


def history_keys(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``historyKeys`` object: every logged key and the last step (0 without history)."""
    keys = sorted({key for row in rows for key in row if not key.startswith("_")})
    last = max((int(row["_step"]) for row in rows), default=0)
    return {"keys": {key: {"typeCounts": [{"type": "number"}]} for key in keys}, "lastStep": last}


def parquet_history() -> dict[str, Any]:
    """No exported parquet files and no live tail: the client reads GraphQL pages."""
    return {"parquetUrls": [], "liveData": []}


def sampled_history(
    rows: Sequence[Mapping[str, Any]], specs: Sequence[str], asked: list[tuple[str, ...]]
) -> list[Any]:
    """One list of rows per spec (a JSON string), as W&B's ``sampledHistory`` answers;
    the keys of each spec (without ``_step``) are appended to ``asked``."""
    parsed = [json.loads(spec) for spec in specs]
    asked += [tuple(k for k in dict.fromkeys(p.get("keys") or ()) if k != "_step") for p in parsed]
    return [_sample(rows, spec) for spec in parsed]


def _sample(rows: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    keys = list(dict.fromkeys(spec.get("keys") or ()))
    low = spec.get("minStep", 0)
    high = spec.get("maxStep")
    picked = [
        {key: row[key] for key in keys}
        for row in sorted(rows, key=lambda r: int(r["_step"]))
        if all(key in row for key in keys)
        and row["_step"] >= low
        and (high is None or row["_step"] <= high)
    ]
    samples = int(spec.get("samples") or 500)
    if len(picked) <= samples:
        return picked
    if samples <= 1:
        return picked[-1:]
    stride = (len(picked) - 1) / (samples - 1)
    return [picked[round(i * stride)] for i in range(samples)]
