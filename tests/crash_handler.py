"""A slow test handler loaded into a real server through ``EXTRA_HANDLERS`` (crash test).

It handles the made-up event ``crash_test`` only.  Each run appends to ``started``
(delivery, attempt, wall-clock time) in the SQLite file ``CRASH_TEST_DB``, sleeps
``CRASH_TEST_SECONDS``, then records its completion idempotently (one row per delivery
id), as a real handler editing its one marked comment would.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from bot.core.routing import Router
from bot.features.context import HandlerContext

EVENT = "crash_test"


def _connect() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["CRASH_TEST_DB"], timeout=30, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS started (delivery TEXT, attempt INTEGER, at REAL)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS completed (delivery TEXT PRIMARY KEY, attempt INTEGER)"
    )
    return conn


router = Router[HandlerContext]()


@router.register(EVENT)
def slow_handler(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Record the start, work slowly, record the completion once."""
    conn = _connect()
    try:
        conn.execute(
            "INSERT INTO started VALUES (?, ?, ?)",
            (ctx.delivery.id, ctx.delivery.attempt, time.time()),
        )
        time.sleep(float(os.environ.get("CRASH_TEST_SECONDS", "0.5")))
        conn.execute(
            "INSERT OR IGNORE INTO completed VALUES (?, ?)", (ctx.delivery.id, ctx.delivery.attempt)
        )
    finally:
        conn.close()
