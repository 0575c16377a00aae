"""What names say in a Python test: a metric, a threshold, or a count that is neither.

A name is split into lower-case words (``evalAcc_top1`` -> ``eval``, ``acc``, ``top1``).
The word lists decide, with no configuration, whether a compared expression is a metric
(``metrics["accuracy"]``, ``wer``, ``step_time``) and whether a constant's name says it
is a threshold (``ACC_MIN``, ``EXPECTED_LOSS``): a literal becomes a gate only when one of
them does, and never when the compared expression is a count (``len(x)``, ``num_steps``,
``status_code``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise

_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")

METRIC_WORDS = frozenset(
    {
        "acc", "accuracy", "loss", "losses", "ppl", "perplexity", "score", "scores", "f1",
        "bleu", "rouge", "rouge1", "rouge2", "rougel", "em", "exact", "match", "precision",
        "recall", "auc", "auroc", "map", "mrr", "ndcg", "reward", "rewards", "return",
        "returns", "mse", "mae", "rmse", "error", "err", "wer", "cer", "throughput",
        "latency", "time", "runtime", "duration", "seconds", "secs", "ms", "speed", "speedup",
        "tps", "qps", "memory", "mem", "gb", "mib", "gib", "result", "results", "metric",
        "metrics", "eval", "measured", "benchmark", "bench", "gsm8k", "mmlu", "humaneval",
        "mbpp", "hellaswag", "winogrande", "truthfulqa", "pass", "win", "rate", "kl",
        "entropy", "grad", "norm", "mfu", "tflops", "flops", "similarity", "sim", "fid",
        "iou", "dice", "psnr", "ssim", "acceptance", "top1", "top5", "correct",
        "correctness", "quality", "confidence", "bpb", "bpc", "nll", "ece", "sec",
    }
)  # fmt: skip
_METRIC_PREFIXES = ("acc", "perplex", "throughput", "latenc", "rouge", "bleu", "recall")
THRESHOLD_WORDS = frozenset(
    {
        "threshold", "thresholds", "thresh", "thr", "expected", "expect", "baseline",
        "baselines", "ref", "reference", "target", "targets", "golden", "gold", "limit",
        "limits", "bound", "bounds", "tol", "rtol", "atol", "tolerance", "margin",
    }
)  # fmt: skip
_WEAK_THRESHOLD_WORDS = frozenset(
    {"min", "max", "minimum", "maximum", "lower", "upper", "floor", "ceil", "ceiling"}
)
TOLERANCE_WORDS = frozenset({"tol", "rtol", "atol", "tolerance", "margin", "eps", "delta"})
_NON_METRIC = frozenset(
    {
        "len", "length", "shape", "size", "ndim", "dim", "dims", "numel", "count", "counts",
        "step", "steps", "epoch", "epochs", "iter", "iters", "iteration", "iterations",
        "idx", "index", "rank", "ranks", "world", "seed", "version", "batch", "bs", "port",
        "pid", "id", "ids", "status", "code", "returncode", "retries", "retry", "attempts",
        "workers", "gpus", "gpu", "nodes", "layers", "heads", "vocab", "width", "height",
        "depth", "timeout", "diff", "delta", "warmup", "interval", "freq", "frequency",
        "patience", "level", "dtype", "lr", "shards", "samples", "utterances", "examples",
        "items", "rows", "columns", "cols", "files", "chunks", "threads", "processes", "tokens",
    }
)  # fmt: skip
_COUNT_FIRST = frozenset({"num", "n", "len", "total", "nb"})
_STATISTICS = frozenset({"mean", "avg", "average", "median", "p50", "p90", "p95", "p99"})
_NUMERIC_CHECK = frozenset({"err", "error", "diff", "delta", "dist", "distance", "residual"})


@lru_cache(maxsize=4096)
def words(name: str) -> tuple[str, ...]:
    """``evalAcc_top1`` -> ``("eval", "acc", "top1")``."""
    return tuple(w.lower() for w in _SEPARATORS.split(_CAMEL.sub("_", name)) if w)


def _metric_word(word: str) -> bool:
    return word in METRIC_WORDS or word.startswith(_METRIC_PREFIXES)


_RATES = frozenset(
    {"second", "seconds", "sec", "s", "step", "iter", "token", "image", "sample", "gpu", "device"}
)


def _rate(found: tuple[str, ...]) -> bool:
    """A rate: ``images_per_second``, ``tokens_per_sec``, ``samples_per_step``,
    ``tflops_per_gpu``."""
    return any(a == "per" and b in _RATES for a, b in pairwise(found))


def metric_like(*names: str) -> bool:
    """Whether any of the names (a metric and its container) has a metric word, is a rate
    (``images_per_second``) or a statistic of something (``avg_output_tokens``)."""
    return any(
        _rate(found := words(name))
        or any(_metric_word(w) for w in found)
        or any(w in _STATISTICS for w in found[:-1])
        for name in names
    )


def count_like(name: str) -> bool:
    """A count, a size or an index (``len``, ``num_samples``, ``max_steps``, ``status_code``):
    never a metric, whatever it is compared with; a statistic of counts is a measurement
    (``mean_summary_tokens``, ``p95_tokens``), and so is a rate per unit (``tflops_per_gpu``,
    ``images_per_step``)."""
    found = words(name)
    if found and found[0] in _STATISTICS:
        return False
    return bool(found) and (
        found[0] in _COUNT_FIRST or (found[-1] in _NON_METRIC and not _rate(found))
    )


def threshold_like(name: str) -> bool:
    """A constant whose name says it is a threshold (``ACC_MIN``, ``EXPECTED_LOSS``,
    ``RTOL``) and not a count (``MAX_STEPS``)."""
    found = words(name)
    if count_like(name):
        return False
    strong = any(w in THRESHOLD_WORDS for w in found)
    weak = any(w in _WEAK_THRESHOLD_WORDS for w in found)
    return strong or (weak and any(_metric_word(w) for w in found))


def bound_like(name: str) -> bool:
    """A name that may hold a threshold: ``ACC_MIN``, ``IMPORTED_MIN``, ``EXPECTED``; not a
    count (``MAX_STEPS``)."""
    found = words(name)
    strong = any(w in THRESHOLD_WORDS or w in _WEAK_THRESHOLD_WORDS for w in found)
    return strong and not count_like(name)


def hint_worthy(name: str) -> bool:
    """A constant worth a hint when no gate binds it: a threshold's name, or a metric's
    (``LOSS_THRESHOLD``, ``MMLU_MIN``, ``BASELINE_ACC``); never a count (``MAX_STEPS``)."""
    if count_like(name):
        return False
    return threshold_like(name) or any(_metric_word(w) for w in words(name))


def tolerance_like(name: str) -> bool:
    """``RTOL``, ``ATOL``, ``LOSS_TOLERANCE``, ``EPS``: a tolerance, not a threshold."""
    return any(w in TOLERANCE_WORDS for w in words(name))


def numeric_check(name: str, value: float) -> bool:
    """A numerical-equality check rather than a metric threshold: an error or a difference
    held under a tiny bound (``max_err < 1e-5``)."""
    return abs(value) <= 1e-3 and any(w in _NUMERIC_CHECK for w in words(name))


def sanity_bound(literal: str) -> bool:
    """A bound written as a power of ten far from any metric (``1e6``, ``1e-5``): that a
    value is finite or numerically zero, not a threshold."""
    mantissa, _, exponent = literal.lower().partition("e")
    return bool(exponent) and abs(int(exponent)) >= 4 and abs(float(mantissa or 0)) == 1


def metric_guess(name: str) -> str:
    """The metric a threshold constant names: ``LOSS_THRESHOLD`` -> ``loss``,
    ``MIN_ACCURACY`` -> ``accuracy``; the name in lower case when nothing is left."""
    kept = [w for w in words(name) if w not in THRESHOLD_WORDS and w not in _WEAK_THRESHOLD_WORDS]
    return "_".join(kept) or name.lower()


_BOUNDED = frozenset(
    {"acc", "accuracy", "f1", "precision", "recall", "auc", "auroc", "iou", "dice", "ssim"}
    | {"em", "exact", "match", "rate", "similarity", "correctness", "top1", "top5", "map"}
)  # fmt: skip
_AT_LEAST_ONE = frozenset({"ppl", "perplexity"})


def trivial_bound(name: str, op: str, value: float) -> bool:
    """A limit no run can fail, the metric's own range: a score at most 1 (or 100, in
    percent: ``accuracy <= 1.0``), a perplexity at least 1."""
    found = set(words(name))
    upper = op in ("<", "<=")
    if upper and value in (1, 100) and found & _BOUNDED:
        return True
    return not upper and value == 1 and bool(found & _AT_LEAST_ONE)
