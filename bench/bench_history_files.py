"""Parse speed of run-history files: 10,000 runs x 40 metrics as JSON Lines and as CSV.

Prints the best of 3 parses for each format; the target is well under 1 s.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.core.history.formats import parse_csv, parse_jsonl

RUNS, METRICS = 10_000, 40


def make_texts() -> tuple[str, str]:
    rng = random.Random(0)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    metrics = [f"eval/metric_{i}" for i in range(METRICS)]
    rows = []
    for i in range(RUNS):
        at = (start + timedelta(hours=i)).isoformat()
        rows.append((f"run{i}", at, {m: rng.random() for m in metrics}))
    rng.shuffle(rows)
    jsonl = "\n".join(
        json.dumps({"id": r, "created_at": at, "state": "finished", "summary": s})
        for r, at, s in rows
    )
    header = "id,created_at,state," + ",".join(metrics)
    body = (f"{r},{at},finished," + ",".join(repr(v) for v in s.values()) for r, at, s in rows)
    return jsonl, "\n".join([header, *body])


def main() -> None:
    jsonl, csv = make_texts()
    for label, parse, text in (("jsonl", parse_jsonl, jsonl), ("csv", parse_csv, csv)):
        best = float("inf")
        for _ in range(3):
            began = time.perf_counter()
            history = parse(text, f"bench.{label}")
            best = min(best, time.perf_counter() - began)
        assert history.stats.total == RUNS
        size = len(text.encode()) / 1e6
        print(f"history {label}: {RUNS} runs x {METRICS} metrics ({size:.1f} MB): {best:.3f} s")


if __name__ == "__main__":
    main()
