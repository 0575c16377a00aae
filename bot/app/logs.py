"""Structured logs: one JSON object per line on stderr, secrets redacted.

Fields passed with ``extra=`` (``delivery``, ``event``, ``status``…) become keys of
the object.  Every configured secret value is replaced by ``***`` in the final line,
whatever logged it (our code, uvicorn, huey, PyGithub).

In the App's processes (``configure(..., capture=True)``) every line written is JSON:
the handlers libraries give their own loggers (PyGithub's on ``github``) are removed so
their records reach the JSON handler; warnings and uncaught exceptions (in any thread)
become records; and ``sys.stdout`` / ``sys.stderr`` turn each line written to them into a
record of the logger ``stdout`` / ``stderr``, which catches prints and the handlers a
library adds later on (MLflow configures its loggers when first imported).

Repeats of one error are summarised (``Repeats``): while a service is down, the loops that
keep trying it (the queue's consumer threads, the supervisor, ``/healthz`` probes) write the
same error over and over.  Each kind of warning or error is written in full ``burst`` times
per window of ``interval`` seconds (``LOG_REPEAT_BURST``, ``LOG_REPEAT_SECONDS``); the rest
are counted and written as one line, ``… (repeated 312 times in the last 60 s)``.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, TextIO

log = logging.getLogger(__name__)

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's ANSI-coloured duplicate of msg
}


class JsonFormatter(logging.Formatter):
    """Format records as JSON lines with ``extra`` fields and secrets redacted."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        parts: set[str] = set()
        for secret in secrets:
            parts.add(secret)
            # each line of a multi-line secret (a PEM key) on its own, too
            parts.update(line.strip() for line in secret.splitlines() if len(line.strip()) >= 16)
        # as written, and as it appears inside a JSON string; longest first
        needles = {p for p in parts if p} | {json.dumps(p)[1:-1] for p in parts if p}
        ordered = sorted(needles, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        line = json.dumps(data, default=str, ensure_ascii=False)
        return self.redact(line)

    def redact(self, text: str) -> str:
        """Replace every secret (and its JSON-escaped form) by ``***``, in one pass."""
        return text if self._pattern is None else self._pattern.sub("***", text)


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


class JsonHandler(logging.StreamHandler[TextIO]):
    """Redacted JSON lines on a stream, repeats of an error summarised (``Repeats``)."""

    def __init__(self, stream: TextIO, secrets: Iterable[str], interval: float, burst: int) -> None:
        super().__init__(stream)
        self.setFormatter(JsonFormatter(secrets))
        self.repeats = Repeats(interval, burst, lambda r: logging.StreamHandler.handle(self, r))

    def handle(self, record: logging.LogRecord) -> bool:
        shown = self.repeats.admit(record)
        return shown is not None and bool(super().handle(shown))

    def close(self) -> None:
        self.repeats.close()
        super().close()


def configure(
    level: str = "INFO",
    secrets: Iterable[str] = (),
    *,
    capture: bool = False,
    repeat_seconds: float = REPEAT_SECONDS,
    repeat_burst: int = REPEAT_BURST,
) -> None:
    """Send every log record (ours and libraries') to stderr as redacted JSON lines.

    With ``capture`` (the App's processes), every other output of the process becomes
    such a line too: library handlers, warnings, uncaught exceptions, stdout and stderr.
    Repeats of one warning or error past ``repeat_burst`` per ``repeat_seconds`` are
    counted and summarised (``Repeats``).
    """
    stderr = sys.stderr.raw if isinstance(sys.stderr, LineRecords) else sys.stderr
    handler = JsonHandler(stderr, secrets, repeat_seconds, repeat_burst)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "huey"):
        lib = logging.getLogger(name)
        lib.handlers[:] = []
        lib.propagate = True
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    logging.getLogger("huey").setLevel(logging.WARNING)  # one line per task otherwise
    if not capture:
        return
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger) and _console_handlers(logger):
            dropped = _console_handlers(logger)
            logger.handlers[:] = [h for h in logger.handlers if h not in dropped]
            logger.propagate = True
    logging.captureWarnings(True)
    sys.excepthook = _uncaught
    threading.excepthook = _uncaught_in_thread
    stdout = sys.stdout.raw if isinstance(sys.stdout, LineRecords) else sys.stdout
    sys.stdout = LineRecords("stdout", logging.INFO, stdout)
    sys.stderr = LineRecords("stderr", logging.WARNING, stderr)


def _console_handlers(logger: logging.Logger) -> list[logging.Handler]:
    """The handlers of ``logger`` writing to a stream other than a file."""
    return [
        h
        for h in logger.handlers
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
    ]


def _uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    log.critical("uncaught exception", exc_info=(kind, exc, tb))


def _uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is not SystemExit:  # as the default hook: a thread may exit that way
        name = args.thread.name if args.thread is not None else "?"
        log.error("uncaught exception in thread %s", name, exc_info=args.exc_value)


class LineRecords(io.TextIOBase):
    """A text stream that logs each line written to it as a record of the logger ``name``
    (whatever the logger's level), so it comes out as JSON with secrets redacted.

    Each thread's partial line is kept apart until its end comes.  ``raw`` is the stream
    it replaces.  What a thread writes while a line of it is being logged is dropped: a
    handler a library put on the root logger, writing to ``sys.stderr``, repeating that
    line (else it would come back here without end).
    """

    def __init__(self, name: str, level: int, raw: TextIO) -> None:
        super().__init__()
        self.raw = raw
        self._logger = logging.getLogger(name)
        self._level = level
        self._thread = threading.local()  # ``pending``: the partial line; ``inside``: logging

    @property
    def encoding(self) -> str:  # type: ignore[override]  # read-only in io.TextIOBase
        return "utf-8"

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.raw.fileno()

    def write(self, text: str) -> int:
        state = self._thread
        if getattr(state, "inside", False):
            return len(text)
        *lines, state.pending = _LINE_END.split(getattr(state, "pending", "") + text)
        state.inside = True
        try:
            for line in lines:
                if line.strip():
                    record = self._logger.makeRecord(
                        self._logger.name, self._level, "(stream)", 0, line, (), None
                    )
                    self._logger.handle(record)
        finally:
            state.inside = False
        return len(text)

    def flush(self) -> None:
        self.raw.flush()


_LINE_END = re.compile(r"\r\n|\r|\n")


def delivery_logger(
    name: str, delivery_id: str, event: str
) -> logging.LoggerAdapter[logging.Logger]:
    """A logger whose records carry the delivery id and event."""
    return logging.LoggerAdapter(logging.getLogger(name), {"delivery": delivery_id, "event": event})
