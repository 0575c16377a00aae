"""Benchmark: the server's memory under concurrent unsigned (unverified) webhook bodies.

Starts ``python -m bot.cli.serve serve`` (uvicorn, SQLite store, in-process workers)
with the default ``MAX_BODY_BYTES`` (25 MiB) and ``MAX_UNVERIFIED_BYTES`` (64 MiB), then
sends 40 deliveries of 24 MiB each at once, every one with a made-up signature, from
this separate process, each from its own loopback address (40 clients: the budget, not
one client's share, is what fills).  Each client stops sending as soon as it is answered.  Prints
how the requests were answered, the server's resident memory before and its peak
(``VmHWM`` of ``/proc/<pid>/status``), and that a signed delivery still gets a 202
afterwards.  Target: peak below 400 MB.
Run: ``.venv/bin/python bench/bench_unverified_bodies.py`` (Linux: reads ``/proc``).
"""

from __future__ import annotations

import asyncio
import collections
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live import SECRET, ServerProcess, server_env  # noqa: E402
from tests.webhooks import fixture, signed  # noqa: E402

REQUESTS = 40
BODY_BYTES = 24 * 1024 * 1024
SEND_CHUNK = 256 * 1024
PEAK_TARGET = 400 * 1000 * 1000


def _memory(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak) of a process, in bytes."""
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) * 1024
    return found


async def _unsigned(port: int, n: int, body: bytes) -> str:
    """Send one unsigned delivery of ``body``, stopping once answered; how it was answered."""
    peer = f"127.0.1.{n + 1}"  # Linux answers on all of 127.0.0.0/8
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(peer, 0))
    head = (
        "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: bench-{n}\r\n"
        f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    answer = asyncio.ensure_future(reader.readline())
    view = memoryview(body)
    try:
        writer.write(head)
        for start in range(0, len(body), SEND_CHUNK):
            if answer.done():  # answered before the whole body was sent
                break
            writer.write(view[start : start + SEND_CHUNK])
            await writer.drain()
        status = (await asyncio.wait_for(answer, 60)).decode().split()
        return f"{status[1]} (body {'sent whole' if start + SEND_CHUNK >= len(body) else 'cut'})"
    except (ConnectionError, TimeoutError) as exc:
        return f"no answer: {type(exc).__name__}"
    finally:
        answer.cancel()
        writer.close()


async def _burst(port: int) -> list[str]:
    body = b'{"padding": "' + b"x" * (BODY_BYTES - 16) + b'"}'
    return list(await asyncio.gather(*(_unsigned(port, n, body) for n in range(REQUESTS))))


def main() -> int:
    """Start a server in a temp dir, send the burst, print the figures."""
    with tempfile.TemporaryDirectory(prefix="bench-unverified-") as tmp:
        workdir = Path(tmp)
        env = server_env(workdir)
        server = ServerProcess(env, workdir, workdir / "server.log")
        try:
            pid = server.proc.pid
            before = _memory(pid)
            started = time.perf_counter()
            answers = asyncio.run(_burst(server.port))
            elapsed = time.perf_counter() - started
            peak = _memory(pid)["VmHWM"]
            body, headers = signed("pull_request", fixture("pull_request.closed"), SECRET)
            after = httpx.post(f"{server.url}/webhook", content=body, headers=headers, timeout=30)
        finally:
            server.stop(signal.SIGTERM)
    mib = 1024 * 1024
    print(f"{REQUESTS} concurrent unsigned deliveries of {BODY_BYTES // mib} MiB each:")
    for answer, count in sorted(collections.Counter(answers).items()):
        print(f"  {count:3d} x {answer}")
    print(f"  all answered in {elapsed:.1f} s")
    print(f"  server RSS before: {before['VmRSS'] / mib:.0f} MiB")
    verdict = "ok" if peak < PEAK_TARGET else "MISSED"
    print(f"  server peak RSS (VmHWM): {peak / mib:.0f} MiB  (target < 400 MB: {verdict})")
    print(f"  a signed delivery afterwards: {after.status_code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
