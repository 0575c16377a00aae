"""Repeats of one error are written once per window with their count (``bot.app.logs``).

Through the App's own handler (``JsonHandler``: JSON lines, secrets redacted) on a logger
of the test's own, writing to a string; the real clock, with windows short enough to end
during the test or long enough not to.  The outage of a real service: test_log_floods.py.
"""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from bot.app.logs import JsonHandler
from tests.live import wait_until

SECRET = "s3cr3t-value-of-the-app"
LONG = 3600.0  # a window that does not end during a test


class Log:
    """A logger of its own whose records go through a ``JsonHandler`` into a string."""

    def __init__(self, interval: float, burst: int) -> None:
        self.out = io.StringIO()
        self.handler = JsonHandler(self.out, [SECRET], interval, burst)
        self.logger = logging.getLogger(f"test.repeats.{uuid.uuid4().hex}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self.handler)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.getvalue().splitlines()]

    def failing(self, error: Exception, message: str = "reading failed", *args: object) -> None:
        try:
            raise error
        except Exception:
            self.logger.exception(message, *args)


@pytest.fixture
def make_log() -> Iterator[Any]:
    made: list[Log] = []

    def make(interval: float = LONG, burst: int = 1) -> Log:
        made.append(Log(interval, burst))
        return made[-1]

    yield make
    for log in made:
        log.logger.removeHandler(log.handler)
        log.handler.close()


def test_repeats_are_counted_and_summarised_when_the_window_ends(make_log: Any) -> None:
    log = make_log(interval=1.0)
    began = time.monotonic()
    for _ in range(40):
        log.failing(ConnectionError(f"connecting to 127.0.0.1:{6379}: refused"))
    assert time.monotonic() - began < 1.0, "the records must fall in one window"

    first, *rest = log.lines()
    assert rest == []  # the 39 repeats held back
    assert first["msg"] == "reading failed" and "ConnectionError: connecting" in first["exc"]

    wait_until(lambda: len(log.lines()) == 2, timeout=10, what="the summary")
    summary = log.lines()[1]
    assert summary["msg"] == "reading failed (repeated 39 times in the last 1 s)"
    assert summary["repeated"] == 39 and "exc" not in summary
    assert (summary["logger"], summary["level"]) == (first["logger"], "error")

    # a new window: the next one is written in full again
    log.failing(ConnectionError("refused"))
    assert len(log.lines()) == 3 and "exc" in log.lines()[2]


def test_the_kind_is_the_template_not_the_numbers(make_log: Any) -> None:
    log = make_log(burst=2)
    for attempt in range(5):  # changing numbers, one kind: two in full, three counted
        log.logger.warning("retrying in %.1f s (attempt %d)", 0.5 * attempt, attempt)
    log.failing(ConnectionError("down"))
    log.failing(TimeoutError("slow"))  # another exception type: another kind
    log.logger.error("retrying in %.1f s (attempt %d)", 9.0, 9)  # another level: another
    log.failing(ConnectionError("down again"))  # the burst's second
    log.failing(ConnectionError("down once more"))  # counted

    assert [(r["level"], r["msg"], r.get("exc", "").splitlines()[-1:]) for r in log.lines()] == [
        ("warning", "retrying in 0.0 s (attempt 0)", []),
        ("warning", "retrying in 0.5 s (attempt 1)", []),
        ("warning", "retrying in 2.0 s (attempt 4) (repeated 3 times in the last 1 s)", []),
        ("error", "reading failed", ["ConnectionError: down"]),
        ("error", "reading failed", ["TimeoutError: slow"]),
        ("error", "retrying in 9.0 s (attempt 9)", []),
        ("error", "reading failed", ["ConnectionError: down again"]),
    ]


def test_a_new_message_of_the_logger_writes_the_count_first(make_log: Any) -> None:
    log = make_log()
    for n in range(4):
        log.logger.error("store check failed: %s", f"refused #{n}")
    log.logger.error("store is back after %d s", 12)

    assert [r["msg"] for r in log.lines()] == [
        "store check failed: refused #0",
        "store check failed: refused #3 (repeated 3 times in the last 1 s)",  # the last one's text
        "store is back after 12 s",
    ]


def test_work_and_records_about_one_delivery_are_never_held_back(make_log: Any) -> None:
    log = make_log()
    for n in range(3):
        log.logger.info("delivery done: %s", "1 handler(s) ran")
        log.logger.warning("transient error, retrying", extra={"delivery": f"d{n}"})
        log.logger.warning("periodic job skipped", extra={"job": "recheck", "period": str(n)})
    assert len(log.lines()) == 9


def test_a_delivery_s_line_drops_a_repeated_traceback(make_log: Any) -> None:
    log = make_log(burst=2)
    for n in range(4):
        try:
            raise OSError(f"connection refused ({n})")
        except OSError:
            log.logger.exception("could not store the delivery", extra={"delivery": f"d{n}"})

    lines = log.lines()
    assert [r["delivery"] for r in lines] == ["d0", "d1", "d2", "d3"]  # every one
    assert ["exc" in r for r in lines] == [True, True, False, False]
    assert "OSError: connection refused (1)" in lines[1]["exc"]
    assert [r.get("exc_type") for r in lines[2:]] == ["builtins.OSError"] * 2


def test_close_writes_what_is_still_counted_redacted(make_log: Any) -> None:
    log = make_log()
    for _ in range(3):
        log.logger.error("token %s refused", SECRET)
    log.handler.close()
    lines = log.lines()
    assert [r["msg"] for r in lines] == [
        "token *** refused",
        "token *** refused (repeated 2 times in the last 1 s)",
    ]
    assert SECRET not in log.out.getvalue()


def test_an_interval_of_zero_writes_every_record(make_log: Any) -> None:
    log = make_log(interval=0.0)
    for _ in range(5):
        log.failing(ConnectionError("down"))
    assert len(log.lines()) == 5 and all("exc" in r for r in log.lines())
