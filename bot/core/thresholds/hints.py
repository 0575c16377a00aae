"""Config lines that would declare a literal no gate binds (the review's hints).

Pure: the parsers call :func:`config_lines` for each numeric literal next to a metric-like
name that they could not bind, and put the text in ``UnboundVariable.config``.  What a name
suggests (:func:`metric_like`, :func:`guess_metric`, :func:`guess_op`) is a guess, and the
lines say so in YAML comments.
"""

from __future__ import annotations

import json
import re

from bot.core.config import CONFIG_PATH

_PLAIN = re.compile(r"[A-Za-z_][\w./\-]*")
_UPPER_HINTS = ("max", "loss", "time", "latency", "memory", "mem", "error", "ppl", "perplexity")
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_LIMIT_WORDS = frozenset(
    {"THRESHOLD", "THRESHOLDS", "THRESH", "TOL", "TOLERANCE", "RTOL", "ATOL", "EXPECTED"}
    | {"BASELINE", "REF", "REFERENCE", "GOLDEN", "TARGET", "LIMIT", "BOUND", "MARGIN", "CUTOFF"}
)
_METRIC_WORDS = frozenset(
    {"ACC", "ACCURACY", "LOSS", "SCORE", "REWARD", "REWARDS", "PPL", "PERPLEXITY", "F1"}
    | {"BLEU", "ROUGE", "AUC", "ERROR", "ERR", "LATENCY", "THROUGHPUT", "TPS", "QPS", "MFU"}
    | {"EM", "WER", "CER", "MSE", "RMSE", "MAE", "KL", "PRECISION", "RECALL", "SPEEDUP"}
    | {"TIME", "MEMORY", "MEM", "NORM"}
)
_CONFIG_WORDS = frozenset(
    {"STEPS", "EPOCHS", "EPOCH", "ITERS", "ITERATIONS", "LR", "LEN", "LENGTH", "BATCH", "BS"}
    | {"SIZE", "SEQ", "SEQS", "GPUS", "NODES", "WORKERS", "JOBS", "RETRIES", "CONNECTIONS"}
    | {"PIXELS", "PORT", "SEED", "TIMEOUT", "SCALE", "WARMUP", "DECAY", "RANK", "SAMPLES"}
    | {"INTERVAL", "FREQ", "PERIOD", "LAYERS", "HEADS", "DIM"}
)
_BOUND_WORDS = frozenset(
    {"MIN", "MAX", "LOWER", "UPPER", "FLOOR", "CEIL", "CEILING", "MINIMUM", "MAXIMUM"}
)


def _words(name: str) -> list[str]:
    """``EVAL_ACC_MIN_VALUE`` / ``evalAccMin`` -> ``["EVAL", "ACC", "MIN", ...]``."""
    return [w.upper() for part in re.split(r"[^A-Za-z0-9]+", name) for w in _WORD.findall(part)]


def metric_like(name: str) -> bool:
    """Whether a variable's name reads like a threshold: it names a limit (``THRESHOLD``,
    ``TOL``, ``EXPECTED``, ``BASELINE``, ``REF`` …, or ``MIN``/``MAX`` with ``VALUE``), or a
    metric (``ACC``, ``LOSS``, ``SCORE`` …) without a training setting (``STEPS``, ``LR``,
    ``BATCH`` …: ``MAX_STEPS`` and ``LOSS_SCALE`` are not thresholds)."""
    words = set(_words(name))
    if words & _LIMIT_WORDS or (words & _BOUND_WORDS and "VALUE" in words):
        return True
    return bool(words & _METRIC_WORDS) and not words & _CONFIG_WORDS


def guess_metric(name: str) -> str:
    """The metric a name suggests, its limit words removed: ``EVAL_ACC_MIN_VALUE`` ->
    ``eval_acc``, ``LOSS_THRESHOLD`` -> ``loss`` (a guess: the history key may differ)."""
    kept = [w for w in _words(name) if w not in _LIMIT_WORDS | _BOUND_WORDS | {"VALUE"}]
    return "_".join(kept).lower() or name.lower()


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


def config_lines(
    path: str, key: str, metric: str, op: str | None = None, *, metric_guessed: bool = False
) -> str:
    """The ``files:`` entry of ``CONFIG_PATH`` that declares ``key`` of ``path`` as a limit
    gate on ``metric`` (``op`` guessed from the name when not given).  Guesses are marked
    in YAML comments; parsed with ``parse_config`` the lines declare the gate."""
    metric_note = "  # a guess: the history key this is checked against" * metric_guessed
    op_note = "  # a guess from the name: >= fails runs below it, <= runs above" * (op is None)
    return "\n".join(
        (
            f"# {CONFIG_PATH}",
            "files:",
            f"  - path: {_scalar(path)}",
            "    gates:",
            f"      - key: {_scalar(key)}",
            f"        metric: {_scalar(metric)}{metric_note}",
            f"        op: {json.dumps(op or guess_op(key))}{op_note}",
        )
    )
