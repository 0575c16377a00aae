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

Repeats of one error are summarised (``bot.app.log_repeats``): each kind of warning or error
is written in full ``LOG_REPEAT_BURST`` times per ``LOG_REPEAT_SECONDS``, then counted.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, TextIO

from bot.app.log_repeats import REPEAT_BURST, REPEAT_SECONDS, Repeats

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
