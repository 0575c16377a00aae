"""Repeats of one log record, summarised: while a service is down, the loops that keep
trying it (the queue's consumer threads, the supervisor, ``/healthz`` probes) write the same
error over and over.

A record's kind is its logger, level, message template and exception type (not the
formatted text, whose numbers change).  Each kind of warning or error is written in full
``burst`` times per window of ``interval`` seconds (``LOG_REPEAT_BURST``,
``LOG_REPEAT_SECONDS``); the rest are counted and written as one line,
``… (repeated 312 times in the last 60 s)``, when the window ends (a background thread
writes it when nothing else is logged) or the logger writes another message.  ``info``
records are never held back; records naming a delivery, job or period (``SUBJECTS``) are
always written, past the burst without their traceback.  Used by ``bot.app.logs``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

REPEAT_SECONDS = 60.0  # LOG_REPEAT_SECONDS: the window in which repeats are counted
REPEAT_BURST = 3  # LOG_REPEAT_BURST: records of a kind written in full per window
SUBJECTS = ("delivery", "job", "period")  # fields naming what one record is about
MAX_KINDS = 1000  # kinds counted at once; past it the oldest window is summarised early

Kind = tuple[str, int, str, str]


@dataclass
class _Window:
    """One kind's current window: when it began, records written and held back."""

    began: float
    written: int = 0
    repeated: int = 0
    last: logging.LogRecord | None = None  # the last record held back


class Repeats:
    """Which records to write now; summaries of the repeats held back.

    A record's kind is its logger, level, message template (``msg`` before its arguments,
    so changing numbers do not make a new kind) and exception type.  A window of
    ``interval`` seconds opens at the first record of a kind: ``burst`` records of it are
    written in full (the first with its traceback), the rest counted.  When the window
    ends, or sooner when the same logger writes a record of another kind, the count is
    written as one record: the last repeat's message with ``(repeated N times in the last
    S s)``, its fields, the field ``repeated``, no traceback.  A background thread ends
    windows when nothing else is logged (after a service came back); ``close`` writes
    what is still counted.

    Always written: records below WARNING (the account of the work done) and records
    naming a delivery or a periodic job's period (fields ``delivery``, ``job``, ``period``),
    each about its own subject (a delivery answered 503 is one to redeliver), their number
    bounded by the deliveries and the periods; past the burst, such a record is written
    without its traceback, which is a repeat, with the field ``exc_type`` instead.
    ``interval`` 0 writes everything.
    """

    def __init__(
        self, interval: float, burst: int, write: Callable[[logging.LogRecord], object]
    ) -> None:
        self.interval = interval
        self.burst = max(1, burst)
        self._write = write
        self._windows: OrderedDict[Kind, _Window] = OrderedDict()  # oldest first
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closed = False

    def admit(self, record: logging.LogRecord) -> logging.LogRecord | None:
        """The record to write for ``record`` now (itself, or it without its traceback), or
        None to hold it back; summaries due are written first."""
        if self.interval <= 0 or record.levelno < logging.WARNING or self._closed:
            return record
        own = any(hasattr(record, name) for name in SUBJECTS)  # about one delivery or period
        if own and not record.exc_info:
            return record
        kind = _kind(record)
        now = time.monotonic()
        with self._lock:
            due = self._ended(now)
            window = self._windows.get(kind)
            if window is None:
                window = self._windows[kind] = _Window(now)
                while len(self._windows) > MAX_KINDS:
                    _, oldest = self._windows.popitem(last=False)
                    due += self._summaries([oldest], now)
            shown: logging.LogRecord | None = record
            if window.written < self.burst:
                window.written += 1
                # the logger's message changed: what it repeated before is summarised now
                others = [w for k, w in self._windows.items() if k[0] == kind[0] and k != kind]
                due += self._summaries(others, now)
            elif own:  # written, but its traceback is a repeat: its type says which
                shown = _without_traceback(record, exc_type=kind[3])
            else:
                window.repeated += 1
                window.last = _without_traceback(record)  # its frames are not kept alive
                shown = None
                if window.repeated == 1:
                    self._watch()
        for summary in due:
            self._write(summary)
        return shown

    def close(self) -> None:
        """Write the summaries of every window still counting; stop the thread."""
        with self._lock:
            self._closed = True
            due = self._summaries(list(self._windows.values()), time.monotonic())
            self._windows.clear()
            self._wake.notify()
        for summary in due:
            self._write(summary)

    def _ended(self, now: float) -> list[logging.LogRecord]:
        """Drop the windows that have ended (oldest first); their summaries."""
        ended = []
        while self._windows:
            window = next(iter(self._windows.values()))
            if window.began + self.interval > now:
                break
            self._windows.popitem(last=False)
            ended.append(window)
        return self._summaries(ended, now)

    def _summaries(self, windows: Iterable[_Window], now: float) -> list[logging.LogRecord]:
        """The summaries of ``windows``' repeats, which are counted from zero again."""
        found = []
        for window in windows:
            if window.last is None or not window.repeated:
                continue
            found.append(_summary(window.last, window.repeated, max(1, round(now - window.began))))
            window.repeated, window.last = 0, None
        return found

    def _watch(self) -> None:
        """Make sure the thread ending windows runs and sees the latest one (lock held)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="log-repeats", daemon=True)
            self._thread.start()
        self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    self._thread = None
                    return
                now = time.monotonic()
                due = self._ended(now)
                if not due:
                    counting = [w.began for w in self._windows.values() if w.repeated]
                    if not counting:
                        self._thread = None
                        return
                    self._wake.wait(min(counting) + self.interval - now)
                    continue
            for summary in due:
                self._write(summary)


def _kind(record: logging.LogRecord) -> Kind:
    template = record.msg if isinstance(record.msg, str) else type(record.msg).__qualname__
    error = record.exc_info[0] if record.exc_info else None
    named = f"{error.__module__}.{error.__qualname__}" if error is not None else ""
    return record.name, record.levelno, template, named


def _without_traceback(record: logging.LogRecord, **fields: object) -> logging.LogRecord:
    """A copy of ``record`` without its exception (and with ``fields``)."""
    return logging.makeLogRecord(
        {**record.__dict__, "exc_info": None, "exc_text": None, "stack_info": None, **fields}
    )


def _summary(last: logging.LogRecord, count: int, seconds: int) -> logging.LogRecord:
    """A record saying ``last``'s message was repeated ``count`` times in ``seconds``."""
    try:
        message = last.getMessage()
    except Exception:  # arguments that do not fit: the template as it is
        message = str(last.msg)
    fields = {
        **last.__dict__,
        "msg": "%s (repeated %d times in the last %d s)",
        "args": (message, count, seconds),
        "created": time.time(),
        "repeated": count,
    }
    return logging.makeLogRecord(fields)
