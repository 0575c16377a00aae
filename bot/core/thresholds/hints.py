"""Config lines that would declare a literal no gate binds (the review's hints).

Pure: the parsers call :func:`config_lines` for each numeric literal next to a metric-like
name that they could not bind, and put the text in ``UnboundVariable.config``.
"""

from __future__ import annotations

import json
import re

from bot.core.config import CONFIG_PATH

_PLAIN = re.compile(r"[A-Za-z_][\w./\-]*")
_UPPER_HINTS = ("max", "loss", "time", "latency", "memory", "mem", "error", "ppl", "perplexity")


def _scalar(value: str) -> str:
    """``value`` as a YAML flow scalar: bare when safe, else JSON-quoted (valid YAML)."""
    return (
        value
        if _PLAIN.fullmatch(value)
        and value.lower() not in {"yes", "no", "on", "off", "null", "true", "false"}
        else json.dumps(value)
    )


def guess_op(name: str) -> str:
    """The direction a name suggests: ``>=`` for ``*_MIN``, accuracies and scores, ``<=`` for
    ``*_MAX``, losses, times and memory; ``>=`` when it says nothing."""
    lowered = name.lower()
    if any(h in lowered for h in ("max", "upper", "ceil")):
        return "<="
    if any(h in lowered for h in ("min", "lower", "floor")):
        return ">="
    if any(h in lowered for h in _UPPER_HINTS):
        return "<="
    return ">="


def config_lines(path: str, key: str, metric: str, op: str | None = None) -> str:
    """The ``files:`` entry of ``CONFIG_PATH`` that declares ``key`` of ``path`` as a limit
    gate on ``metric`` (``op`` guessed from the name when not given)."""
    entry = (
        f"{{key: {_scalar(key)}, metric: {_scalar(metric)}, op: {json.dumps(op or guess_op(key))}}}"
    )
    return "\n".join(
        (
            f"# {CONFIG_PATH}",
            "files:",
            f"  - path: {_scalar(path)}",
            "    gates:",
            f"      - {entry}",
        )
    )
