"""Benchmark: log bytes per second of the App while Redis, then PostgreSQL, is down.

A cluster as deploy/compose.yaml runs it (``tests/cluster.py``): one ``serve --no-workers``
process and two ``worker`` processes (two threads each, the default) on a throwaway
PostgreSQL (``tests.services.start_postgres``) and Redis (``start_redis``), idle (no
webhooks: what an outage costs by itself), with the default settings (``LOG_REPEAT_SECONDS``
60, ``LOG_REPEAT_BURST`` 3).  The log bytes written by the three processes over 10 s of
quiet; then for each service, over ``--seconds`` (120) with it stopped (Redis terminated;
PostgreSQL ``pg_ctl stop -m fast``) and over ``--back`` (70) seconds after it was started
again on its port (the summaries of the last window come then).  Prints bytes/s and lines/s
per phase, and the loggers and messages that wrote most.

Run: ``.venv/bin/python bench/bench_log_flood.py`` (``--seconds N --back N`` to size it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cluster import Cluster, app_env  # noqa: E402
from tests.live import make_pem  # noqa: E402
from tests.services import start_postgres, start_redis  # noqa: E402


def _sizes(cluster: Cluster) -> int:
    return sum(m.log.stat().st_size for m in cluster.members)


def _lines(cluster: Cluster, since: dict[str, int]) -> list[dict[str, object]]:
    found = []
    for member in cluster.members:
        data = member.log.read_bytes()[since[member.name] :]
        for line in data.decode(errors="replace").splitlines():
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                found.append({"logger": "?", "msg": line[:80]})
    return found


def _phase(cluster: Cluster, name: str, seconds: float) -> None:
    offsets = {m.name: m.log.stat().st_size for m in cluster.members}
    before = _sizes(cluster)
    time.sleep(seconds)
    written = _sizes(cluster) - before
    records = _lines(cluster, offsets)
    top = Counter(f"{r.get('logger')}: {str(r.get('msg'))[:60]}" for r in records)
    print(f"{name:<22} {written / seconds:>10,.0f} B/s  {len(records) / seconds:>7.1f} lines/s")
    for what, count in top.most_common(4):
        print(f"{'':<24}{count:>6} × {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="each outage")
    parser.add_argument("--back", type=float, default=70.0, help="after each outage")
    args = parser.parse_args()
    postgres, redis = start_postgres(), start_redis()
    try:
        name = postgres.create_database("flood")
        with tempfile.TemporaryDirectory() as tmp:
            env = app_env(
                None,
                postgres.url(name),
                redis.url,
                APP_ID="4242",
                PRIVATE_KEY=make_pem(),
                GITHUB_API_URL="http://127.0.0.1:9",
            )
            with Cluster(env, Path(tmp)) as cluster:
                cluster.serve()
                cluster.worker()
                cluster.worker()
                time.sleep(3)
                _phase(cluster, "quiet", 10)
                redis.halt()
                _phase(cluster, "Redis stopped", args.seconds)
                redis.resume()
                _phase(cluster, "Redis back", args.back)
                postgres.halt()
                _phase(cluster, "PostgreSQL stopped", args.seconds)
                postgres.resume()
                _phase(cluster, "PostgreSQL back", args.back)
                cluster.stop()
    finally:
        redis.stop()
        postgres.stop()


if __name__ == "__main__":
    main()
