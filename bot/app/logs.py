"""Structured logs: one JSON object per line on stderr, secrets redacted.

Fields passed with ``extra=`` (``delivery``, ``event``, ``status``…) become keys of
the object.  Every configured secret value is replaced by ``***`` in the final line,
whatever logged it (our code, uvicorn, huey, PyGithub).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

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


def configure(level: str = "INFO", secrets: Iterable[str] = ()) -> None:
    """Send every log record (ours and libraries') to stderr as redacted JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "huey"):
        lib = logging.getLogger(name)
        lib.handlers[:] = []
        lib.propagate = True
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    logging.getLogger("huey").setLevel(logging.WARNING)  # one line per task otherwise


def delivery_logger(
    name: str, delivery_id: str, event: str
) -> logging.LoggerAdapter[logging.Logger]:
    """A logger whose records carry the delivery id and event."""
    return logging.LoggerAdapter(logging.getLogger(name), {"delivery": delivery_id, "event": event})
