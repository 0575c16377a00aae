"""What the keys of a YAML / JSON / TOML threshold file say: a threshold's bound
(``acc_min``, ``max_latency``, ``expected_loss``), a metric (``accuracy``, ``ttft_ms_p99``),
or a setting (``max_steps``, ``min_lr``, ``max_model_len``) that is not a threshold.

Pure guesses from words, for gates found without configuration: a key is a gate only when
its words say both that it is a bound and what it bounds, and never when a word names a
training or serving setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from bot.core.models import Op
from bot.core.thresholds.structured.patterns import leaf_value
from bot.core.thresholds.structured.tree import Node

_WORD = re.compile(r"[A-Z]?[a-z][a-z0-9]*|[A-Z]+\d*(?![a-z])|\d+")  # gsm8k is one word
METRIC_WORDS = frozenset(
    {"acc", "accuracy", "score", "loss", "ppl", "perplexity", "f1", "bleu", "rouge", "em"}
    | {"exact", "match", "pass", "recall", "precision", "auc", "auroc", "map", "mrr", "ndcg"}
    | {"iou", "miou", "wer", "cer", "error", "err", "errors", "latency", "throughput", "tps"}
    | {"qps", "rps", "ttft", "tpot", "itl", "speed", "speedup", "time", "seconds", "sec", "ms"}
    | {"duration", "memory", "mem", "vram", "reward", "rewards", "return", "returns", "kl"}
    | {"entropy", "fid", "psnr", "ssim", "lpips", "mfu", "tflops", "flops", "nll"}
    | {"similarity", "correlation", "mae", "mse", "rmse", "bpb", "bpc", "winrate", "elo"}
    | {"acceptance", "hit", "hits", "util", "utilization", "bandwidth", "gb", "mb", "p50"}
    | {"p90", "p95", "p99", "tokens_per_s", "margins", "quality"}
)
SETTING_WORDS = frozenset(
    {"steps", "step", "iters", "iter", "iterations", "epochs", "epoch", "tokens", "token"}
    | {"toks", "tok", "len", "length", "lengths", "seq", "seqs", "batch", "bs", "size"}
    | {"workers", "worker", "retries", "retry", "lr", "learning", "warmup", "num", "new"}
    | {"gen", "model", "context", "ctx", "width", "height", "depth", "patience", "seed"}
    | {"gpus", "nodes", "concurrency", "parallel", "p", "k", "temperature", "position"}
    | {"positions", "window", "shards", "chunk", "buffer", "queue", "timeout", "wait", "delay"}
    | {"interval", "period", "freq", "frequency", "layers", "heads", "dim", "rank", "decay"}
    | {"samples", "prompts", "requests", "users", "clients", "port", "pixels", "scale"}
    | {"norm", "grad", "weight", "weights", "ratio", "factor", "coef", "alpha", "beta"}
)
TOLERANCE_WORDS = frozenset(
    {"rtol", "atol", "tol", "tolerance", "tolerances", "margin", "eps", "epsilon", "delta"}
    | {"slack", "noise", "std", "stddev", "sigma"}
)
"""A key with one of these words holds a tolerance, never a gate of its own."""
UPPER_WORDS = frozenset(
    {"loss", "ppl", "perplexity", "error", "err", "errors", "wer", "cer", "latency", "time"}
    | {"seconds", "sec", "ms", "duration", "memory", "mem", "vram", "nll", "bpb", "bpc"}
    | {"mae", "mse", "rmse", "fid", "lpips", "kl", "ttft", "tpot", "itl", "gb", "mb", "p50"}
    | {"p90", "p95", "p99"}
)
LOWER_WORDS = frozenset(
    {"acc", "accuracy", "score", "f1", "bleu", "rouge", "em", "exact", "pass", "recall"}
    | {"precision", "auc", "auroc", "map", "mrr", "ndcg", "iou", "miou", "throughput", "tps"}
    | {"qps", "rps", "speed", "speedup", "reward", "rewards", "return", "returns", "psnr"}
    | {"ssim", "similarity", "correlation", "winrate", "elo", "mfu", "tflops", "acceptance"}
    | {"hit", "hits", "tokens_per_s", "quality"}
)
CONTEXT_WORDS = frozenset(
    {"threshold", "thresholds", "golden", "goldens", "expected", "baseline", "baselines"}
    | {"reference", "references", "refs", "regression", "regressions", "limits", "gates"}
    | {"criteria", "slo", "slos", "targets", "tolerances", "expectations", "bounds"}
)
"""Words of a file name or an enclosing key that say "these numbers are thresholds"."""
REFERENCE_CONTEXT = frozenset(
    {"golden", "goldens", "expected", "baseline", "baselines", "reference", "references", "refs"}
)
CONTAINER_KEYS = CONTEXT_WORDS | {"metrics", "checks", "assertions", "requirements", "limit"}
"""Enclosing keys left out of a metric name: ``thresholds.accuracy_min`` bounds ``accuracy``."""
SWEEP_KEYS = frozenset(
    {"parameters", "sweep", "search_space", "hyperparameters", "param_grid", "grid", "space"}
)
"""Enclosing keys of hyperparameter ranges: ``{min: 0.0001, max: 0.1}`` there is no gate."""
_SEPARATOR = re.compile(r"[^A-Za-z0-9]+")
_LONGEST = 200  # characters of a key read for its words (a hostile key may be megabytes)
_PER_SECOND = re.compile(r"(?:^|_)per_(?:s|sec|second)(?:_|$)")

Bound = Literal["lower", "upper", "threshold", "reference"]
_AFFIXES: tuple[tuple[str, str, Bound], ...] = (
    ("prefix", "min_", "lower"),
    ("prefix", "max_", "upper"),
    ("prefix", "minimum_", "lower"),
    ("prefix", "maximum_", "upper"),
    ("prefix", "expected_", "reference"),
    ("prefix", "ref_", "reference"),
    ("prefix", "reference_", "reference"),
    ("prefix", "golden_", "reference"),
    ("prefix", "baseline_", "reference"),
    ("suffix", "_min", "lower"),
    ("suffix", "_max", "upper"),
    ("suffix", "_minimum", "lower"),
    ("suffix", "_maximum", "upper"),
    ("suffix", "_lower", "lower"),
    ("suffix", "_upper", "upper"),
    ("suffix", "_floor", "lower"),
    ("suffix", "_ceil", "upper"),
    ("suffix", "_ceiling", "upper"),
    ("suffix", "_threshold", "threshold"),
    ("suffix", "_thresh", "threshold"),
    ("suffix", "_ref", "reference"),
    ("suffix", "_reference", "reference"),
    ("suffix", "_expected", "reference"),
    ("suffix", "_golden", "reference"),
    ("suffix", "_baseline", "reference"),
)
BOUND_OPS: dict[Bound, Op] = {"lower": ">=", "upper": "<="}

# the fields of an entry such as {metric: M, threshold: V, op: ">="}
LOWER_FIELDS = frozenset(
    {"min", "minimum", "lower", "lower_bound", "lowerlimit", "lower_limit", "floor", "at_least"}
)
UPPER_FIELDS = frozenset(
    {"max", "maximum", "upper", "upper_bound", "upperlimit", "upper_limit", "ceil", "at_most"}
)
VALUE_FIELDS = frozenset({"threshold", "value", "limit", "bound", "target"})
REFERENCE_FIELDS = frozenset(
    {"expected", "reference", "baseline", "golden", "ref", "expected_value", "reference_value"}
)
OP_FIELDS = ("op", "operator", "comparison", "compare", "cmp", "condition", "check")
GOAL_FIELDS = ("direction", "mode", "goal", "better")
NAME_FIELDS = ("metric", "metric_name", "name", "benchmark", "task")
_OPS: dict[str, Op] = {
    **{k: ">=" for k in (">=", "≥", "ge", "gte", "greaterthanorequal", "greaterequal")},
    **{k: ">=" for k in ("min", "minimum", "atleast", "lowerbound")},
    **{k: ">" for k in (">", "gt", "greaterthan")},
    **{k: "<=" for k in ("<=", "≤", "le", "lte", "lessthanorequal", "lessequal")},
    **{k: "<=" for k in ("max", "maximum", "atmost", "upperbound")},
    **{k: "<" for k in ("<", "lt", "lessthan")},
    **{k: "==" for k in ("==", "=", "eq", "equal", "equals", "close", "isclose", "approx")},
}
_GOALS: dict[str, Op] = {
    **{k: ">=" for k in ("higher", "higherisbetter", "maximize", "max", "up", "increase")},
    **{k: "<=" for k in ("lower", "lowerisbetter", "minimize", "min", "down", "decrease")},
}


@dataclass(frozen=True)
class Affixed:
    """A key read as a bound of a metric: ``acc_min`` is the ``lower`` bound of ``acc``."""

    stem: str
    bound: Bound


@lru_cache(maxsize=4096)  # a large file repeats its keys: name, value, min_al …
def words(name: str) -> frozenset[str]:
    """The lower-case words of a name (``ttft_ms_p99`` -> ttft, ms, p99; camelCase split;
    digits stay with their word), with ``tokens_per_s`` and ``grad_norm`` as words too."""
    parts = _SEPARATOR.split(name[:_LONGEST])
    found = {w.lower() for part in parts for w in _WORD.findall(part)}
    found |= {p.lower() for p in parts if p}
    lowered = name[:_LONGEST].lower()
    if _PER_SECOND.search(lowered):
        found.add("tokens_per_s")
    if "grad_norm" in lowered:
        found.add("grad_norm")
    return frozenset(found)


def metric_like(name: str) -> bool:
    """Whether a name names a metric (``ttft_ms_p99``, ``exact_match``, ``rouge1``)."""
    found = words(name)
    return bool((found | {w.rstrip("0123456789") for w in found}) & METRIC_WORDS)


def setting_like(name: str) -> bool:
    """Whether a name names a setting (``model_len``, ``lr``, ``new_tokens``; unless it is a
    rate, ``tokens_per_s``) or a tolerance (``lm_loss_rtol``)."""
    found = words(name)
    if found & TOLERANCE_WORDS:
        return True
    return bool(found & SETTING_WORDS) and "tokens_per_s" not in found


def direction(name: str) -> Op | None:
    """``>=`` for names of metrics where more is better (accuracy, throughput), ``<=`` for
    those where less is (loss, latency, memory); None when the words do not say, or
    disagree."""
    found = set(words(name))
    found |= {w.rstrip("0123456789") for w in found}
    lower, upper = bool(found & LOWER_WORDS), bool(found & UPPER_WORDS)
    if lower == upper:
        return None
    return ">=" if lower else "<="


def affixed(key: str) -> Affixed | None:
    """The bound a key's affix names and the stem left (``max_latency`` -> latency, upper)."""
    lowered = key.lower()
    for where, affix, bound in _AFFIXES:
        if where == "prefix" and lowered.startswith(affix) and len(key) > len(affix):
            return Affixed(key[len(affix) :], bound)
        if where == "suffix" and lowered.endswith(affix) and len(key) > len(affix):
            return Affixed(key[: -len(affix)], bound)
    return None


def context_words(text: str) -> frozenset[str]:
    """The context words in a file path or a key (``ci/perf_thresholds.yaml`` -> thresholds)."""
    return words(text) & CONTEXT_WORDS


def parse_op(field: str, text: str) -> Op | None:
    """The operator an ``op`` / ``comparison`` (or, read as "better", ``direction`` / ``mode``
    / ``goal``) field writes; None when it says none."""
    word = re.sub(r"[\s_\-]", "", text.lower())
    return (_GOALS if field in GOAL_FIELDS else _OPS).get(word)


def entry_op(mapping: dict[str, Node]) -> Op | None:
    """The operator an entry's ``op`` / ``comparison`` / ``direction`` … field writes."""
    for key, node in mapping.items():
        lowered = str(key).lower()
        text = leaf_value(node)
        op = parse_op(lowered, text) if text is not None else None
        if op is not None and lowered in (*OP_FIELDS, *GOAL_FIELDS):
            return op
    return None
