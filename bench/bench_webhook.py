"""Benchmark: webhook acknowledgement latency of a real server under concurrent deliveries.

Starts ``python -m bot.cli.serve serve`` (what ``threshold-bot serve`` runs: uvicorn,
SQLite store, embedded huey queue, its default in-process workers) on a free local
port, then sends bursts of 50 simultaneous signed ``pull_request.closed`` deliveries
from this separate process, one kept-alive connection each.  The payload is the real
fixture (~25 kB, like every ``pull_request`` event) and its real handler runs (it
forgets the PR in the store), so each delivery goes through verify, store, enqueue
and processing.  Prints the p50 / p99 time to the 202 as the client sees it, the
server's and the client's CPU time, the CPU time of the server's event loop (the
thread every answer waits for: on a busy machine a steadier figure than the
latencies), and the load average before and after.
Target: p99 <= 25 ms for bursts (the workers drain each burst before the next);
the back-to-back figure shows the cost of workers busy in the same process.
Run: ``.venv/bin/python bench/bench_webhook.py``.

Each figure is one function in ``BENCHES`` taking a ``Bench`` (a running server and
its settings) and returning printed lines; add more figures there.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live import SECRET, ServerProcess, server_env  # noqa: E402
from tests.webhooks import fixture, signed  # noqa: E402

CONCURRENCY = 50
ROUNDS = 20
WARMUP_ROUNDS = 2
ACK_TARGET_P99 = 0.025
FIXTURE = "pull_request.closed"  # real payload, handled by a real (store-only) handler


@dataclass
class Bench:
    """A running server for the figures to measure."""

    server: ServerProcess
    env: dict[str, str]
    workdir: Path


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples``, nearest-rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def _request(body: bytes, headers: dict[str, str]) -> bytes:
    """The raw HTTP/1.1 request, sent in one write."""
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (
        f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n{head}\r\n"
    ).encode() + body


async def _exchange(conn: tuple[asyncio.StreamReader, asyncio.StreamWriter], raw: bytes) -> float:
    """Send one request on a kept-alive connection; seconds until the whole answer is read."""
    reader, writer = conn
    started = time.perf_counter()
    writer.write(raw)
    status = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    elapsed = time.perf_counter() - started
    if b" 202 " not in status:
        raise RuntimeError(f"unexpected answer: {status!r}")
    return elapsed


async def _ack_latencies(bench: Bench, drain: bool) -> list[float]:
    """Rounds of ``CONCURRENCY`` deliveries sent at once, one per kept-alive connection.

    ``drain``: wait for the workers to finish each burst before the next (bursts
    separated by quiet time, as GitHub sends them); otherwise back to back, so the
    workers are busy with the previous bursts while the next arrives.  A raw asyncio
    client keeps the client's own cost (both share the machine) out of the figure:
    every request is pre-built and written in one send.
    """
    conns = [
        await asyncio.open_connection("127.0.0.1", bench.server.port) for _ in range(CONCURRENCY)
    ]
    payload = fixture(FIXTURE)
    event = FIXTURE.split(".")[0]
    samples: list[float] = []
    try:
        for n in range(WARMUP_ROUNDS + ROUNDS):
            raws = [_request(*signed(event, payload, SECRET)) for _ in conns]
            times = await asyncio.gather(
                *(_exchange(c, r) for c, r in zip(conns, raws, strict=True))
            )
            if n >= WARMUP_ROUNDS:
                samples += times
            if drain:
                await asyncio.to_thread(_wait_drained, bench)
    finally:
        for _, writer in conns:
            writer.close()
    return samples


def _cpu_seconds(pid: int, thread: int | None = None) -> float | None:
    """User + system CPU time of a process (or of its ``thread``, a native thread id) so far
    (Linux ``/proc``; None elsewhere)."""
    stat = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    try:
        fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _open(bench: Bench) -> int:
    """Deliveries not yet finished, read from the server's SQLite file (no server CPU)."""
    with closing(sqlite3.connect(bench.workdir / "bot.db", timeout=30)) as db:
        row = db.execute(
            "SELECT count(*) FROM deliveries WHERE status IN ('queued', 'running', 'retry')"
        ).fetchone()
    return int(row[0])


def _done(bench: Bench) -> int:
    """Deliveries the handlers finished successfully."""
    with closing(sqlite3.connect(bench.workdir / "bot.db", timeout=30)) as db:
        row = db.execute("SELECT count(*) FROM deliveries WHERE status = 'done'").fetchone()
    return int(row[0])


def _wait_drained(bench: Bench, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while _open(bench):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the workers did not drain the queue in {timeout} s")
        time.sleep(0.02)


def _ack_figure(bench: Bench, drain: bool) -> list[str]:
    pid = bench.server.proc.pid
    done_before = _done(bench)
    load_before = _load()
    cpu_before = _cpu_seconds(pid)
    loop_before = _cpu_seconds(pid, pid)  # the main thread: uvicorn's event loop
    client_before = time.process_time()
    samples = asyncio.run(_ack_latencies(bench, drain))
    client_cpu = time.process_time() - client_before
    load = _load()
    _wait_drained(bench)
    cpu_after = _cpu_seconds(pid)
    loop_after = _cpu_seconds(pid, pid)
    p50, p99 = percentile(samples, 0.50), percentile(samples, 0.99)
    total = len(samples) + WARMUP_ROUNDS * CONCURRENCY
    kind = "bursts, drained in between" if drain else "back-to-back bursts, workers busy"
    lines = [
        f"webhook ack, {ROUNDS} x {CONCURRENCY} concurrent deliveries ({kind}):",
        f"  p50 {p50 * 1000:.1f} ms   p99 {p99 * 1000:.1f} ms   max {max(samples) * 1000:.1f} ms"
        f"   mean {statistics.fmean(samples) * 1000:.1f} ms",
    ]
    if drain:
        verdict = "ok" if p99 <= ACK_TARGET_P99 else "MISSED"
        lines.append(f"  target p99 <= {ACK_TARGET_P99 * 1000:.0f} ms: {verdict}")
    if cpu_before is not None and cpu_after is not None:
        per = (cpu_after - cpu_before) / total * 1000
        lines.append(f"  server CPU per delivery (intake + processing): {per:.2f} ms")
    if loop_before is not None and loop_after is not None:
        per = (loop_after - loop_before) / total * 1000
        lines.append(f"  event loop CPU per delivery (the answer's path): {per:.3f} ms")
    lines.append(f"  client CPU per request: {client_cpu / total * 1000:.2f} ms")
    lines.append(
        f"  {_done(bench) - done_before} of {total} done; {os.cpu_count()} CPUs,"
        f" load average {load_before:.2f} before, {load:.2f} after"
    )
    return lines


def _load() -> float:
    """The 1-minute load average (NaN where unknown)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def bench_ack(bench: Bench) -> list[str]:
    """p50 / p99 of the time to the 202 for bursts of 50 simultaneous deliveries."""
    return _ack_figure(bench, drain=True)


def bench_ack_sustained(bench: Bench) -> list[str]:
    """The same with bursts back to back, while the workers process the earlier ones."""
    return _ack_figure(bench, drain=False)


BENCHES: list[Callable[[Bench], list[str]]] = [bench_ack, bench_ack_sustained]


def main() -> int:
    """Start a server in a temp dir, run every figure, print the results."""
    with tempfile.TemporaryDirectory(prefix="bench-webhook-") as tmp:
        workdir = Path(tmp)
        env = server_env(workdir)
        server = ServerProcess(env, workdir, workdir / "server.log")
        try:
            for figure in BENCHES:
                for line in figure(Bench(server, env, workdir)):
                    print(line, flush=True)
        finally:
            server.stop(signal.SIGTERM)
    return 0


if __name__ == "__main__":
    sys.exit(main())
