"""Which statistic sets a gate's limit (docs/limit-rule.md#models): the model a config names
under ``rule.model`` or a per-gate override, in the shorthand people write and read
(``percentile p=5``, ``zscore k=3 sigma=std``, ``absolute min_limit=0.5``).

Pure settings: the arithmetic is ``bot.core.analysis.limit_models``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["MODEL_NAMES", "LimitModel", "ModelName", "parse_model", "parse_models"]

ModelName = Literal["minmax", "percentile", "zscore", "prediction", "iqr", "absolute"]
MODEL_NAMES: tuple[ModelName, ...] = (
    "minmax",
    "percentile",
    "zscore",
    "prediction",
    "iqr",
    "absolute",
)
PARAMETERS: dict[ModelName, tuple[str, ...]] = {
    "minmax": (),
    "percentile": ("p",),
    "zscore": ("k", "sigma"),
    "prediction": ("confidence",),
    "iqr": ("k",),
    "absolute": (),
}
"""The parameters of each model, beside ``min_limit`` / ``max_limit`` (any model)."""
DEFAULT_K: dict[str, float] = {"zscore": 3.0, "iqr": 1.5}
BOUNDS = ("min_limit", "max_limit")
MAX_SPEC = 200  # characters of one model's shorthand


class LimitModel(BaseModel):
    """A threshold model and its parameters; ``min_limit``/``max_limit`` bound the limit
    whatever the model (``absolute`` alone: the bound on the gate's side *is* the limit).

    ``p`` is the percentile on the failing side (a lower bound takes the p-th, an upper bound
    the (100 − p)-th); ``k`` is in noise units (zscore: σ, default 3; iqr: IQRs, default 1.5);
    ``confidence`` is the one-sided prediction interval's.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: ModelName = "minmax"
    p: float = Field(default=5.0, ge=0, lt=50)
    k: float | None = Field(default=None, ge=0, le=100)
    sigma: Literal["mad", "std"] = "mad"
    confidence: float = Field(default=0.99, gt=0.5, lt=1)
    min_limit: float | None = None
    max_limit: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        """The shorthand read; ``k`` filled with its default, so ``zscore`` equals
        ``zscore k=3`` (as their words do)."""
        if isinstance(value, str):
            value = _fields(value)
        if isinstance(value, LimitModel):
            return value
        if not isinstance(value, dict):
            raise ValueError("expected a model (zscore k=3) or a mapping of its settings")
        name = value.get("name", "minmax")
        if isinstance(name, str) and name in PARAMETERS:
            # written out, even a default value of another model's parameter is a mistake
            others = set(value) & set(cls.model_fields) - {"name", *BOUNDS, *PARAMETERS[name]}  # type: ignore[index]
            if others:
                raise ValueError(_not_taken(name, others))
            if value.get("k") is None and name in DEFAULT_K:
                value = {**value, "k": DEFAULT_K[name]}  # type: ignore[index]
        return value

    @model_validator(mode="after")
    def _consistent(self) -> LimitModel:
        for bound in (self.min_limit, self.max_limit):
            if bound is not None and not math.isfinite(bound):
                raise ValueError("min_limit and max_limit must be finite numbers")
        low, high = self.min_limit, self.max_limit
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_limit {low:g} is above max_limit")
        if self.name == "absolute" and self.min_limit is None and self.max_limit is None:
            raise ValueError("absolute needs min_limit, max_limit or both")
        return self

    @property
    def spread(self) -> float:
        """``k`` with the model's default."""
        return self.k if self.k is not None else DEFAULT_K.get(self.name, 0.0)

    def describe(self) -> str:
        """The shorthand, every parameter of the model shown: ``percentile p=5``,
        ``zscore k=3``, ``prediction confidence=99%``, ``minmax max_limit=0.9``."""
        words: list[str] = [self.name]
        if self.name == "percentile":
            words.append(f"p={self.p:g}")
        elif self.name in ("zscore", "iqr"):
            words.append(f"k={self.spread:g}")
            if self.name == "zscore" and self.sigma == "std":
                words.append("sigma=std")
        elif self.name == "prediction":
            words.append(f"confidence={self.confidence * 100:g}%")
        words += [f"{b}={v:g}" for b in BOUNDS if (v := getattr(self, b)) is not None]
        return " ".join(words)

    @property
    def uses_allowance(self) -> bool:
        """Whether ``rule.allowance`` widens this model's limit (minmax and percentile)."""
        return self.name in ("minmax", "percentile")

    def __str__(self) -> str:
        return self.describe()


def _not_taken(name: str, unused: set[str]) -> str:
    takes = ", ".join(PARAMETERS[name]) or "no parameter"  # type: ignore[index]
    return f"{name} takes {takes} (besides min_limit/max_limit), not {', '.join(sorted(unused))}"


def _number(key: str, text: str) -> float:
    """``5``, ``0.99``, ``99%`` (a fraction: confidence only) as a float."""
    try:
        if text.endswith("%"):
            if key != "confidence":
                raise ValueError
            return float(text[:-1]) / 100
        return float(text)
    except ValueError:
        raise ValueError(f"{key}={text[:40]}: not a number") from None


def _fields(text: str) -> dict[str, Any]:
    """``zscore k=3 sigma=std`` as the model's fields; ``ValueError`` in plain words."""
    if len(text) > MAX_SPEC:
        raise ValueError(f"a model is at most {MAX_SPEC} characters")
    words = text.split()
    if not words:
        raise ValueError("empty model: name one of " + ", ".join(MODEL_NAMES))
    name, *params = words
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model {name[:40]!r}: one of " + ", ".join(MODEL_NAMES))
    fields: dict[str, Any] = {"name": name}
    for word in params:
        key, sep, value = word.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"{word[:40]!r}: write parameters as key=value (p=5)")
        if key in fields:
            raise ValueError(f"{key} given twice")
        fields[key] = value if key == "sigma" else _number(key, value)
    return fields


def parse_model(text: str) -> LimitModel:
    """One model from its shorthand; ``ValueError`` in plain words."""
    from pydantic import ValidationError

    try:
        return LimitModel.model_validate(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        ctx = err.get("ctx") or {}
        for key, words in _LIMITS.items():
            if key in ctx:  # a number out of range, in the config's words
                message = f"must be {words} {ctx[key]:g}, not {err['input']:g}"
        if err["type"] == "literal_error":
            message = f"expected one of {ctx['expected']}, not {err['input']!r}"
        if err["type"] == "extra_forbidden":
            message = "unknown parameter"
        raise ValueError(f"{where}: {message}" if where else message) from None


_LIMITS = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}


def parse_models(text: str) -> tuple[LimitModel, ...]:
    """``minmax,percentile p=1,zscore k=4``: models separated by commas, none twice."""
    models = tuple(parse_model(part) for part in text.split(",") if part.strip())
    if not models:
        raise ValueError("no model named")
    seen = [m.describe() for m in models]
    twice = sorted({m for m in seen if seen.count(m) > 1})
    if twice:
        raise ValueError(f"{twice[0]} named twice")
    return models
