"""Typed models shared by every layer: runs, gates, rule settings and the review.

The analysis (``bot.core.analysis``) is pure functions over these models; adapters
(GitHub, W&B, the store) only build them or consume them.  Field names of
``GateReview``, ``Regime``, ``Change`` and ``Review`` follow the JSON review
(docs/json-review.md) and must stay stable.

Over the ~400-line guideline on purpose: the models are the contract between the layers,
and one page shows all of it.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from fnmatch import fnmatchcase
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from bot.core.formatting import percent
from bot.core.globs import glob_match, repo_path
from bot.core.limit_model import LimitModel

Op = Literal[">=", ">", "<=", "<", "=="]
"""``==`` only for a two-sided reference gate: ``|x - reference| <= tolerance``."""
GateKind = Literal["limit", "reference"]
Sides = Literal["lower", "upper", "both"]
Aggregation = Literal["last", "mean", "median", "min", "max"]
ReferenceStatistic = Literal["median", "mean"]
RunState = Literal["finished", "failed", "crashed", "killed", "running"]
Verdict = Literal[
    "ok", "too_tight", "looser_than_rule", "unchanged", "unchanged_failing", "no_data"
]
Conclusion = Literal["success", "action_required", "neutral"]
# why a gate has no data: the history has no run, no finished run, only values that are
# not numbers for its metric, not its metric at all; or it could not be read
NoDataReason = Literal[
    "empty_history", "no_finished_runs", "not_numbers", "no_metric", "unavailable"
]
Classification = Literal[
    "passing", "failing_every_run", "shifted", "failed_before_change", "flaky", "no_data"
]

LOWER_BOUND_OPS: frozenset[str] = frozenset({">=", ">"})
SIDES_OPS: dict[str, Op] = {"lower": ">=", "upper": "<=", "both": "=="}
"""The operator of a reference gate failing on those sides (``Gate.sides`` inverted)."""


class Frozen(BaseModel):
    """Immutable model base; unknown fields are rejected to catch typos early."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def as_utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime (naive means UTC, docs/history-format.md)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


# --------------------------------------------------------------------------- runs


class Run(Frozen):
    """One CI run with its finite numeric summary metrics."""

    id: str
    created_at: datetime
    name: str | None = None
    state: RunState = "finished"
    commit: str | None = None
    tags: tuple[str, ...] = ()
    summary: dict[str, float] = Field(default_factory=dict)
    # per-step values of some metrics (golden curves, expressions): metric -> step -> value
    series: dict[str, dict[int, float]] = Field(default_factory=dict)

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)


class HistoryStats(Frozen):
    """What was dropped or set aside while reading a history."""

    total: int = 0
    finished: int = 0
    by_state: dict[str, int] = Field(default_factory=dict)
    non_finite_values: int = 0
    non_numeric_values: int = 0
    duplicate_ids: int = 0
    skipped_lines: int = 0
    flattened_values: int = 0  # numbers read from nested objects, as ``a/b`` keys
    numeric_strings: int = 0  # numbers written as text, read as numbers
    # runs left out because what they left could not be read (an actions source's expired
    # or malformed artifact...): reason -> how many
    skipped_runs: dict[str, int] = Field(default_factory=dict)


class History(Frozen):
    """Runs sorted by ``created_at`` (all states) plus reading statistics."""

    runs: tuple[Run, ...]
    stats: HistoryStats = Field(default_factory=HistoryStats)
    source: str = ""
    warnings: tuple[str, ...] = ()  # what the reader could not make sense of (the review's)
    # per summary key, the finished runs whose value was set aside: not a finite number
    # (text, null, NaN...); known for history files and direct W&B / MLflow reads (the run
    # cache keeps counts only)
    not_numbers: dict[str, int] = Field(default_factory=dict)

    @property
    def finished(self) -> tuple[Run, ...]:
        """The finished runs, oldest first: the only ones that enter statistics."""
        return tuple(r for r in self.runs if r.state == "finished")


# --------------------------------------------------------------------------- sources


def _workflow_text(value: object) -> object:
    """A workflow's numeric id (``workflow: 5150``) as its text; anything else as given."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return str(value)
    return value


WorkflowName = Annotated[
    str,
    BeforeValidator(_workflow_text),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 1}]}),
]
"""A workflow's file name (``nightly.yml``) or numeric id, kept as text."""


class SourceSpec(Frozen):
    """Where a gate's run history comes from (repository config or shell-script default)."""

    kind: Literal["file", "wandb", "mlflow", "actions"] = "wandb"
    # file source: a history file path, relative to the repository root
    path: str | None = None
    # actions source (issue 29): the nightly's own GitHub Actions artifacts.  One workflow
    # run = one history run.  ``repo``: OWNER/NAME (default: the repository reviewed);
    # ``workflow``: its file name or id; ``branch``: default the default branch; ``events``:
    # the triggers whose runs count; ``artifact``: a name or glob; ``file``: a path or glob
    # inside it; ``format``: auto (by name / content), json, jsonl, csv, lm-eval,
    # tensorboard, pytest-benchmark.  Metrics: ``summary_keys`` (metric -> key path).
    repo: str | None = None
    workflow: WorkflowName | None = None
    branch: str | None = None
    events: tuple[str, ...] = ("schedule", "push", "workflow_dispatch")
    artifact: str | None = None
    file: str | None = None
    format: Literal[
        "auto", "json", "jsonl", "csv", "lm-eval", "tensorboard", "pytest-benchmark"
    ] = "auto"
    # wandb source
    entity: str | None = None
    project: str | None = None
    # run filters (applied server-side where the source allows it)
    states: tuple[RunState, ...] = ("finished", "failed", "crashed", "killed", "running")
    tags: tuple[str, ...] = ()
    group: str | None = None
    job_type: str | None = None
    name_regex: str | None = None
    created_after: datetime | None = None
    # metric name -> key in the run summary, when they differ
    summary_keys: dict[str, str] = Field(default_factory=dict)
    # mlflow source
    tracking_uri: str | None = None
    experiment: str | None = None
    # metrics whose per-step series a remote source reads (curve and aggregation gates):
    # what to read of the source, not which source, so not part of ``key()``
    series: tuple[str, ...] = ()

    def key(self) -> str:
        """A stable identifier of this source, used as the cache key (``series`` left out)."""
        return self.model_dump_json(exclude_defaults=True, exclude={"series"})

    def describe(self) -> str:
        """Human-readable name: ``wandb:entity/project``, ``file:path``, ``mlflow:exp``."""
        if self.kind == "file":
            return f"file:{self.path}"
        if self.kind == "mlflow":
            return f"mlflow:{self.experiment}"
        if self.kind == "actions":
            where = f"{self.repo}/" if self.repo else ""
            return f"actions:{where}{self.workflow}:{self.artifact}"
        return f"wandb:{self.entity + '/' if self.entity else ''}{self.project}"


class DeclaredSource(Frozen):
    """The history source a threshold file or the config names for a gate, and where.

    ``origin`` (``"from"`` in JSON) is ``script:LINE`` (a W&B project named in the shell
    script), ``config:files.N`` / ``config:files.N.gates.M`` (a ``source`` in the config)
    or ``config:default_source``.  What was actually read is ``GateReview.source``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True)

    kind: Literal["file", "wandb", "mlflow", "actions"]
    entity: str | None = None
    project: str | None = None
    path: str | None = None
    experiment: str | None = None
    origin: str = Field(serialization_alias="from")

    @classmethod
    def of(cls, spec: SourceSpec, origin: str) -> DeclaredSource:
        """What ``spec`` names, declared at ``origin``."""
        named = spec.model_dump(include={"kind", "entity", "project", "path", "experiment"})
        return cls(**named, origin=origin)

    def describe(self) -> str:
        """The same name as ``SourceSpec.describe`` (``wandb:entity/project`` …)."""
        return SourceSpec(**self.model_dump(exclude={"origin"})).describe()


# --------------------------------------------------------------------------- gates


class Span(Frozen):
    """A numeric literal in a file: its text exactly as written (without quotes) and where."""

    literal: str
    start: int  # character offset of the literal in the file text
    end: int  # offset one past the literal
    line: int  # 1-based line of the literal


class Tolerance(Frozen):
    """A reference gate's tolerance: ``abs + rel * |reference|`` (either may be absent).

    ``rel_span`` / ``abs_span``: where each is written in the threshold file, when it is
    (``/rebaseline --tolerance`` rewrites them); None when it comes from the config.
    """

    rel: float | None = None
    abs: float | None = None
    rel_span: Span | None = None
    abs_span: Span | None = None

    def margin(self, reference: float) -> float:
        """How far from ``reference`` a run may be: ``abs + rel * |reference|``."""
        return (self.abs or 0.0) + (self.rel or 0.0) * abs(reference)

    def describe(self) -> str:
        """``±8%``, ``±0.01``, ``±(0.01 + 8%)``."""
        rel = f"{self.rel * 100:g}%" if self.rel is not None else None
        absolute = f"{self.abs:g}" if self.abs is not None else None
        if rel and absolute:
            return f"±({absolute} + {rel})"
        return f"±{rel or absolute or '0'}"


class CurvePoint(Frozen):
    """One step of a golden curve: the reference value at ``step`` and its literal."""

    step: int
    value: float | None  # None: the golden value is "nan" (the step is not checked)
    span: Span


class Coupled(Frozen):
    """A literal derived from a gate's: ``literal = factor * gate's value`` (``min_al`` =
    0.95 x ``ref_al``). ``/rebaseline`` rewrites it together with the gate's."""

    name: str
    factor: float
    span: Span


class Gate(Frozen):
    """One threshold: a named numeric literal in a file, bound to a metric and operator.

    ``kind`` ``limit``: ``metric op value``.  ``kind`` ``reference``: ``value`` is a reference
    and runs must lie within ``tolerance`` of it, below it only (``op`` ``>=``, sides
    ``lower``), above it only (``<=``, ``upper``) or on both sides (``==``, ``both``).
    """

    name: str
    file: str
    line: int  # 1-based line of the literal
    metric: str
    op: Op
    value: float
    literal: str  # the literal's text exactly as written (without quotes)
    start: int  # character offset of the literal in the file text
    end: int  # offset one past the literal
    source: SourceSpec | None = None
    declared: DeclaredSource | None = None  # what the file or config names, and where
    kind: GateKind = "limit"
    tolerance: Tolerance | None = None  # reference gates (None: no tolerance, exact)
    # a golden curve: the reference per step (``value``/``literal``: the last checked step)
    points: tuple[CurvePoint, ...] = ()
    # how the CI reduces a per-step series to the compared value (``median(data["x"])``);
    # ``last_steps``: only the last N steps (``[-5:]``).  None: the run's summary value.
    aggregation: Aggregation | None = None
    last_steps: int | None = None
    context: str = ""  # where the gate is checked, e.g. "test_accuracy" in a Python test
    ignored: str = ""  # why the gate is a placeholder (``# threshold-bot: ignore``): not judged
    coupled: tuple[Coupled, ...] = ()
    pattern: str = ""  # the config pattern that declared it (``files.0.gates.1``), if any

    @property
    def is_lower_bound(self) -> bool:
        """True for ``>=``/``>`` gates: runs must stay above the limit (or the band's floor)."""
        return self.op in LOWER_BOUND_OPS

    @property
    def sides(self) -> Sides:
        """Which side of the limit or band fails: ``lower`` (``>=``, ``>``), ``upper``, ``both``."""
        if self.op == "==":
            return "both"
        return "lower" if self.is_lower_bound else "upper"

    @property
    def span(self) -> Span:
        """The gate's literal and where it is."""
        return Span(literal=self.literal, start=self.start, end=self.end, line=self.line)

    @property
    def test(self) -> tuple[str, str] | None:
        """The one test checking the gate and its class ("" outside one), from ``context``
        (``TestCls.test_x`` -> ``("test_x", "TestCls")``); None for none or several."""
        if not self.context or ", " in self.context:
            return None
        parts = self.context.split(".")
        at = next((i for i, p in enumerate(parts) if p.startswith("test")), len(parts) - 1)
        return parts[at], parts[at - 1] if at else ""


COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
}
"""``value op limit`` for each operator: on floats, or element-wise on numpy arrays."""


def passes(value: float, op: Op, limit: float) -> bool:
    """Evaluate ``value op limit`` exactly as the CI assert does."""
    return bool(COMPARISONS[op](value, limit))


class UnboundVariable(Frozen):
    """A hint: a numeric literal next to a metric-like name that no gate binds, reported with
    the reason, never guessed; ``config`` holds the config lines that would declare it (a
    ``files:`` entry: pasted into the config, the literal is a gate). The review carries every
    file's as ``Review.hints`` (JSON ``hints[]``)."""

    name: str
    file: str
    line: int
    literal: str
    reason: str
    config: str = ""  # YAML for .github/threshold-bot.yml (empty: no suggestion)
    compared: bool = False  # it reaches a comparison: its file is a threshold file


class ThresholdFile(Frozen):
    """The gates found in one file, with what could not be bound."""

    path: str
    gates: tuple[Gate, ...] = ()
    unbound: tuple[UnboundVariable, ...] = ()
    source: SourceSpec | None = None  # what a gate of the file reads unless declared otherwise
    declared: DeclaredSource | None = None  # ... and where that source is named
    notes: tuple[str, ...] = ()  # what could not be decided about the source (for the review)


class GateChange(Frozen):
    """A gate as it stands at base and head of a PR (``base`` None: added in the PR)."""

    head: Gate
    base: Gate | None = None

    @property
    def changed(self) -> bool:
        """Whether the PR changes this gate's value, metric, operator or kind, its tolerance,
        or any value of its golden curve."""
        base, head = self.base, self.head
        if base is None:
            return True
        tolerances = [(t.rel, t.abs) if t else None for t in (base.tolerance, head.tolerance)]
        return (
            base.value != head.value
            or base.metric != head.metric
            or base.op != head.op
            or base.kind != head.kind
            or tolerances[0] != tolerances[1]
            or [(p.step, p.value) for p in base.points] != [(p.step, p.value) for p in head.points]
        )


# --------------------------------------------------------------------------- rule


_ALLOWANCE_RE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)(?P<pct>%?)$")


def parse_allowance(text: str, what: str = "allowance") -> float:
    """``5%`` or ``0.05`` → 0.05; from 0 to 100% only (``ValueError`` naming ``what``).

    The one parser of allowances: ``/rebaseline --allowance``, the CLI's ``--allowance`` and
    the config's ``rule.allowance`` (through ``RuleSettings``); also of the backtest's harm.
    """
    match = _ALLOWANCE_RE.match(text.strip())
    if not match:
        raise ValueError(f"invalid {what} `{text[:40]}`: write a percentage like `5%` or `0.05`")
    value = float(match["num"]) / (100 if match["pct"] else 1)
    if value > 1:
        raise ValueError(f"{what} `{text[:40]}` is over 100%")
    return value


_WINDOW_RE = re.compile(r"^(?:(?P<n>\d+)|(?P<regime>regime)|since:(?P<since>\d{4}-\d{2}-\d{2}))$")
MAX_WINDOW = 1000
"""The most runs a window holds (``rule.window``, ``drift.window``, ``--window``): a review
backtests each limit gate, a model's limit for every run from the window before it, so its
time grows with runs × window (docs/configuration.md#rule); the default is 20."""


class WindowSpec(Frozen):
    """Which runs the limit rule looks at: the last N (1 to 1,000), the current regime, or
    since a date."""

    kind: Literal["last", "regime", "since"] = "last"
    runs: int = Field(default=20, ge=1, le=MAX_WINDOW)  # also a drifting regime's most
    since: date | None = None

    @classmethod
    def parse(cls, text: str | int) -> WindowSpec:
        """Parse ``20``, ``regime`` or ``since:YYYY-MM-DD``; otherwise raise ValueError
        naming the text (``invalid window 'since:2026-13-01': month must be in 1..12``)."""
        match = _WINDOW_RE.match(str(text).strip())
        invalid = f"invalid window {str(text)[:40]!r}"
        if not match:
            raise ValueError(f"{invalid}: expected a run count, 'regime' or 'since:YYYY-MM-DD'")
        if match["n"] is not None:
            digits = match["n"].lstrip("0")
            if not digits:
                raise ValueError(f"{invalid}: must hold at least 1 run")
            if len(digits) > len(str(MAX_WINDOW)) or int(digits) > MAX_WINDOW:
                raise ValueError(f"{invalid}: at most {MAX_WINDOW:,} runs")
            return cls(kind="last", runs=int(digits))
        if match["regime"]:
            return cls(kind="regime")
        try:
            return cls(kind="since", since=date.fromisoformat(match["since"]))
        except ValueError as exc:  # "month must be in 1..12"
            raise ValueError(f"{invalid}: {exc}") from None

    def __str__(self) -> str:
        if self.kind == "last":
            return str(self.runs)
        if self.kind == "regime":
            return "regime"
        return f"since:{self.since}"


MAX_REGIME_RUNS = 100
"""The most ``regimes.min_regime_runs``: the detector's running medians hold runs ×
2·min_regime_runs values (docs/configuration.md#regimes)."""


class RegimeSettings(Frozen):
    """Sensitivity of the regime detector (repository config ``regimes:``)."""

    min_regime_runs: int = Field(default=5, ge=2, le=MAX_REGIME_RUNS)
    min_effect_sigma: float = Field(default=2.0, gt=0)  # 3.0 missed half the 3-sigma steps
    min_relative_change: float = Field(default=0.0, ge=0)
    merge_distance: int = Field(default=3, ge=0)
    # per-metric search: BIC-like penalty (times log n); bad runs beyond outlier_sigma are ignored
    penalty: float = Field(default=3.0, gt=0)
    outlier_sigma: float = Field(default=3.0, gt=0)


class RuleOverride(Frozen):
    """Another model or allowance for the gates of some files or of some names
    (``rule.overrides``): ``file`` a glob of the threshold file's path, ``gate`` a glob of
    the gate's name or metric (``*`` any characters); an entry needs one of them."""

    file: str | None = Field(default=None, min_length=1, max_length=200)
    gate: str | None = Field(default=None, min_length=1, max_length=200)
    model: LimitModel | None = None
    allowance: float | None = Field(default=None, ge=0, le=1)

    @field_validator("allowance", mode="before")
    @classmethod
    def _percent(cls, value: object) -> object:
        return parse_allowance(value) if isinstance(value, str) else value

    @field_validator("file")
    @classmethod
    def _in_repository(cls, value: str | None) -> str | None:
        return None if value is None else repo_path(value)

    @model_validator(mode="after")
    def _complete(self) -> RuleOverride:
        if self.file is None and self.gate is None:
            raise ValueError("an override needs 'file', 'gate' or both")
        if self.model is None and self.allowance is None:
            raise ValueError("an override sets 'model', 'allowance' or both")
        return self

    def matches(self, name: str, metric: str, file: str) -> bool:
        """Whether the gate ``name`` on ``metric`` in ``file`` is one this entry is for."""
        if self.file is not None and not glob_match(self.file, file):
            return False
        if self.gate is None:
            return True
        return fnmatchcase(name, self.gate) or fnmatchcase(metric, self.gate)


class BacktestSettings(Frozen):
    """How the backtest judges a model (``rule.backtest``; docs/backtest.md): a regime change
    is harmful when it moved the metric the bad way by more than ``harm`` of its level (None:
    the rule's allowance); a model must catch each within ``detect_within`` runs; a run is
    judged once ``min_runs`` runs precede it."""

    detect_within: int = Field(default=3, ge=1, le=1000)
    harm: float | None = Field(default=None, gt=0, le=1)
    min_runs: int = Field(default=5, ge=2, le=1000)

    @field_validator("harm", mode="before")
    @classmethod
    def _percent(cls, value: object) -> object:
        return parse_allowance(value, "harm") if isinstance(value, str) else value


class RuleSettings(Frozen):
    """The limit rule and the analysis parameters (repository config ``rule:``).

    ``allowance`` never exceeds ``max_allowance``, an override's neither; ``/rebaseline
    --allowance`` is held to the same cap (a model copy is not validated: its callers check).
    ``model`` is the threshold model of every gate but those an override names.
    """

    max_allowance: float = Field(default=0.25, ge=0, le=1)  # the highest allowance allowed
    allowance: float = Field(default=0.05, ge=0, le=1, validate_default=True)  # 0.05 = 5%
    window: WindowSpec = Field(default_factory=WindowSpec)
    significant_digits: int = Field(default=2, ge=1, le=12)
    failure_lookback: int = Field(default=30, ge=1)
    reference: ReferenceStatistic = "median"  # what a reference gate's rule recomputes
    model: LimitModel = Field(default_factory=LimitModel)  # what sets a limit gate's limit
    overrides: tuple[RuleOverride, ...] = ()  # first match wins
    backtest: BacktestSettings = Field(default_factory=BacktestSettings)

    @field_validator("allowance", mode="before")
    @classmethod
    def _percent(cls, value: object) -> object:
        return parse_allowance(value) if isinstance(value, str) else value  # "5%" or "0.05"

    @field_validator("allowance")
    @classmethod
    def _capped(cls, value: float, info: Any) -> float:
        cap = info.data.get("max_allowance")  # absent when max_allowance itself is invalid
        if cap is not None and value > cap:
            raise ValueError(f"{percent(value)} is over max_allowance ({percent(cap)})")
        return value

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, value: object) -> object:
        if isinstance(value, str | int) and not isinstance(value, bool):
            return WindowSpec.parse(value)
        return value

    @model_validator(mode="after")
    def _overrides_capped(self) -> RuleSettings:
        for i, entry in enumerate(self.overrides):
            if entry.allowance is not None and entry.allowance > self.max_allowance:
                raise ValueError(
                    f"overrides.{i}.allowance: {percent(entry.allowance)} is over"
                    f" max_allowance ({percent(self.max_allowance)})"
                )
        return self

    @property
    def allowance_percent(self) -> str:
        """The allowance as people write it: ``5%``, ``2.5%``."""
        return percent(self.allowance)

    @property
    def harm(self) -> float:
        """The backtest's harmful move, as a fraction of the level (default: the allowance)."""
        return self.backtest.harm if self.backtest.harm is not None else self.allowance

    def with_allowance(self, allowance: float) -> RuleSettings:
        """This rule with ``allowance`` for every gate (``--allowance``): the overrides keep
        their models, not their allowances (an override that only set one goes)."""
        overrides = tuple(
            o.model_copy(update={"allowance": None}) for o in self.overrides if o.model is not None
        )
        return self.model_copy(update={"allowance": allowance, "overrides": overrides})

    def for_gate(self, name: str, metric: str, file: str) -> RuleSettings:
        """The rule of one gate: the first override matching it applied (else this rule)."""
        for entry in self.overrides:
            if entry.matches(name, metric, file):
                update: dict[str, object] = {}
                if entry.model is not None:
                    update["model"] = entry.model
                if entry.allowance is not None:
                    update["allowance"] = entry.allowance
                return self.model_copy(update=update | {"overrides": ()})
        return self

    def describe_model(self) -> str:
        """The model as the method line names it: ``minmax, 5% allowance``,
        ``zscore k=3``, ``percentile p=5, 2% allowance``."""
        words = self.model.describe()
        return (
            f"{words}, {self.allowance_percent} allowance" if self.model.uses_allowance else words
        )


# --------------------------------------------------------------------------- review


class Failures(Frozen):
    """``failed`` of ``total`` runs fail a value."""

    failed: int
    total: int


class WindowInfo(Frozen):
    """The window actually used for one gate."""

    kind: Literal["last", "regime", "since"]
    runs: int
    first: datetime | None = None
    last: datetime | None = None


class Band(Frozen):
    """Where a reference gate passes runs: ``band_low <= x <= band_high`` (None: open side)."""

    band_low: float | None = None
    band_high: float | None = None


class ChartPoint(Frozen):
    """One run in a chart: when, what the gate (or metric) compares, which run and commit."""

    at: datetime  # the run's created_at
    value: float  # the summary value, or the aggregate of the series the gate compares
    run: str  # the run's name, else its id
    commit: str | None = None
    regime_median: float | None = None  # the metric's median in the regime holding this run


BandEdges = tuple[float | None, float | None]
"""A reference gate's band as (low, high); None: that side is open."""


class GateChart(Frozen):
    """What a gate's chart draws: its history with the old, proposed and rule values."""

    metric: str  # the history key
    # oldest first: the runs having the metric among the newest max(window, failure_lookback)
    points: tuple[ChartPoint, ...]
    window_start: int  # index in points of the window's first run (before it: lookback only)
    old: float | None  # the limit (or reference) at the base; None when the PR adds the gate
    proposed: float | None  # at the head
    rule: float | None  # the rule's recomputed value; None without data
    # reference gates: the bands around old / proposed / rule (None otherwise)
    old_band: BandEdges | None = None
    proposed_band: BandEdges | None = None
    rule_band: BandEdges | None = None


class MetricChart(Frozen):
    """A regime-relevant metric (one the regime table shows) over the newest runs having it."""

    metric: str
    points: tuple[ChartPoint, ...]  # oldest first, at most 350


class GateReview(Frozen):
    """The analysis of one gate (docs/json-review.md, plus explanatory fields)."""

    name: str
    file: str
    line: int
    metric: str
    op: Op
    old: float
    proposed: float
    recomputed: float | None
    window: WindowInfo
    window_min: float | None
    window_max: float | None
    old_failures: Failures
    proposed_failures: Failures
    consecutive_failures: int
    failing_since: datetime | None
    verdict: Verdict
    # extras beyond the documented JSON fields
    changed: bool = False
    classification: Classification = "passing"
    # ``at`` of the regime change the classification is tied to (``Change.at``), if any
    tied_change: datetime | None = None
    explanation: str = ""
    decimals: int = 0
    source: str = ""
    declared_source: DeclaredSource | None = None
    warnings: tuple[str, ...] = ()
    old_literal: str = ""  # the literals as written (empty: show the floats)
    proposed_literal: str = ""
    closest_keys: tuple[str, ...] = ()  # without data: the history's keys closest to metric
    no_data_reason: NoDataReason | None = None  # set when no run of the history has the metric
    # the source the PR names for this gate instead of the base's: not read until approved
    proposed_source: str = ""
    # reference gates (``kind`` "reference"): old / proposed / recomputed are references
    kind: GateKind = "limit"
    reference: float | None = None  # the proposed reference
    tolerance: Tolerance | None = None
    sides: Sides = "lower"
    old_band: Band | None = None
    proposed_band: Band | None = None
    recomputed_band: Band | None = None
    # the tolerance the rule would need for the band around ``recomputed`` to hold the window
    recomputed_tolerance: Tolerance | None = None
    worst_step: int | None = None  # golden curves: the step farthest outside (or nearest) the band
    aggregation: str = ""  # e.g. "median of the last 5 steps"
    context: str = ""  # e.g. the test function
    ignored: str = ""  # a placeholder: shown apart, never judged
    # limit gates: the gate's model and parameters (``RuleSettings.describe_model``)
    model: str = ""
    # information only, never a verdict: the rule's limit when a harmful move of the metric
    # would still pass the proposed limit (it could be tightened), and why (``notes``)
    tighten_to: float | None = None
    notes: tuple[str, ...] = ()
    # the backtest's one line when the gate's current model is clearly worse than another
    backtest_hint: str = ""
    # the chart's data (None: golden curves, no data); not part of the JSON review
    chart: GateChart | None = Field(default=None, exclude=True)


class Trend(Frozen):
    """A metric drifting steadily through one regime: its least-squares line over the regime."""

    slope: float  # change per run, in the metric's units
    first: float  # the line's value at the regime's first run having the metric
    last: float  # … and at its last run having the metric
    runs: int  # runs of the regime having the metric

    @property
    def relative(self) -> float | None:
        """The slope as a fraction of the line's last value (None when that is 0)."""
        return self.slope / abs(self.last) if self.last != 0 else None


class Regime(Frozen):
    """A stretch of finished runs whose metrics hold a level or drift steadily.

    ``trends`` has the metrics that drift through this regime (absent: flat); ``slope`` is the
    per-run slope of the gated metric that drifts most (in its noise units; any metric read when
    no gated one drifts), None when none drifts; ``wandering`` names the metrics with no stable
    level at all (a random walk: reported, cut only at its jumps).
    """

    start: datetime
    end: datetime
    runs: int
    medians: dict[str, float]
    first_index: int = 0  # index into the finished runs, oldest first
    last_index: int = 0
    slope: float | None = None
    trends: dict[str, Trend] = Field(default_factory=dict)
    wandering: tuple[str, ...] = ()


class MetricShift(Frozen):
    """How one metric moved across a regime boundary."""

    before: float
    after: float
    relative: float | None = None  # (after - before) / |before|; None when before == 0
    sigma: float | None = None  # |after - before| in units of in-regime noise


class Change(Frozen):
    """A boundary between two consecutive regimes and what moved there."""

    at: datetime  # created_at of the first run of the new regime
    index: int = 0  # index of that run among the finished runs
    before_run: str | None = None
    after_run: str | None = None
    before_at: datetime | None = None
    before_commit: str | None = None
    after_commit: str | None = None
    earlier_commit: str | None = None  # of the run before before_run (widens attribution)
    later_commit: str | None = None  # of the run after after_run
    metrics: dict[str, MetricShift] = Field(default_factory=dict)  # sorted by effect size
    pulls: tuple[int, ...] = ()


class PullRef(Frozen):
    """A pull request linked from the regime table."""

    number: int
    title: str = ""
    url: str = ""


class Review(Frozen):
    """The whole review of one PR (or one file audit)."""

    conclusion: Conclusion
    gates: tuple[GateReview, ...] = ()
    regimes: tuple[Regime, ...] = ()
    changes: tuple[Change, ...] = ()
    rule: RuleSettings = Field(default_factory=RuleSettings)
    history: HistoryStats = Field(default_factory=HistoryStats)
    source: str = ""
    hints: tuple[UnboundVariable, ...] = ()  # every file's literals no gate binds
    pulls: dict[int, PullRef] = Field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    error: str | None = None  # set when the history could not be read (its gates: no_data)
    # the regime-relevant metrics over the newest runs; not part of the JSON review
    metric_charts: tuple[MetricChart, ...] = Field(default=(), exclude=True)
