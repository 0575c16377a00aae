"""Which threshold model suits a gate (docs/backtest.md): each model replayed run by run over
the gate's history, counting the healthy runs it would have failed and how soon it would have
caught the regime changes that hurt the metric.

Pure. The limit that judges run *i* comes from the ``window`` runs before it only, as CI would
have had it after a rebaseline; the regimes only *classify* runs (healthy, or in the span of a
harmful change), they never set a limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from statistics import median

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from bot.core import deadline
from bot.core.analysis.context import HistoryContext
from bot.core.analysis.keys import resolve_key, summary_keys
from bot.core.analysis.limits import recompute_limits
from bot.core.analysis.regimes import detect_regimes
from bot.core.analysis.windows import BoolArray, FloatArray, IntArray
from bot.core.formatting import day_month_year, plural
from bot.core.limit_model import LimitModel, parse_models
from bot.core.models import (
    COMPARISONS,
    Change,
    Gate,
    History,
    Op,
    RegimeSettings,
    RuleSettings,
    Sides,
)

__all__ = [
    "DEFAULT_MODELS",
    "Caught",
    "GateBacktest",
    "Score",
    "backtest_gates",
    "backtest_history",
    "limits_before",
    "replay",
]

DEFAULT_MODELS = parse_models("minmax,percentile p=5,zscore k=3,prediction,iqr")
CHUNK_BYTES = 4 << 20
"""The most bytes of windows the replay stacks at once (a window of each run, a row each):
its memory is the history's, O(runs), plus a few times this, whatever the window."""
FLOAT_BYTES = 8
CLEARLY = 2.0  # the current model is clearly noisier at this many times the false alarms…
MORE = 3  # … and at least this many more


@dataclass(frozen=True)
class Bound:
    """One side a gate (or a band) checks: ``value op limit``, the limit at ``literal``'s
    decimals."""

    op: Op
    literal: str


@dataclass(frozen=True)
class Caught:
    """A harmful regime change and how soon a model caught it."""

    at: datetime  # the change: created_at of the first run of the new regime
    index: int  # that run's index among the finished runs
    moved: float  # the metric's relative move at the change (signed)
    runs: int | None  # runs until the first failure (1: the first run after); None: missed


@dataclass(frozen=True)
class Score:
    """One model replayed over one gate's history."""

    model: LimitModel
    rule: RuleSettings  # the gate's rule with this model
    judged: int  # healthy runs judged (the false-alarm rate's denominator)
    false_alarms: int
    caught: tuple[Caught, ...]

    @property
    def rate(self) -> float | None:
        """False alarms per healthy run judged (None: none judged)."""
        return self.false_alarms / self.judged if self.judged else None

    @property
    def median_runs(self) -> float | None:
        """Median runs to catch a harmful change (a miss counts as infinite; None: none)."""
        if not self.caught:
            return None
        return float(median(math.inf if c.runs is None else c.runs for c in self.caught))

    def catches_all(self, within: int) -> bool:
        """Whether every harmful change failed the gate within ``within`` runs."""
        return all(c.runs is not None and c.runs <= within for c in self.caught)


@dataclass(frozen=True)
class GateBacktest:
    """The models compared on one gate (a band: a lower and an upper gate on one metric)."""

    name: str
    file: str
    line: int
    metric: str  # the history key
    sides: Sides
    runs: int  # runs having the metric
    within: int  # detect_within
    scores: tuple[Score, ...] = ()  # the gate's current model first
    recommended: Score | None = None
    # the other models as quiet as the recommended one, catching as it does: a tie, which
    # goes to the current model, else to the first of them in the models' order
    tied: tuple[Score, ...] = ()
    note: str = ""  # why nothing is recommended, or how the recommendation was judged
    skipped: str = ""  # why the gate was not backtested (scores empty)

    @property
    def current(self) -> Score | None:
        """The score of the gate's current model."""
        return self.scores[0] if self.scores else None

    def hint(self) -> str | None:
        """One line for the PR comment when the current model is clearly worse than the
        recommended one: it misses a harmful change, or fails at least twice as many healthy
        runs (and 3 more); None otherwise."""
        best, now = self.recommended, self.current
        if best is None or now is None or best is now:
            return None
        name = f"with `{best.model.describe()}` this gate would have"
        missed = next((c for c in now.caught if c.runs is None or c.runs > self.within), None)
        if missed is not None:
            caught = next(c for c in best.caught if c.index == missed.index)
            late = "missed" if missed.runs is None else f"caught after {missed.runs} runs"
            return (
                f"{name} caught the change of {day_month_year(missed.at)} within"
                f" {plural(caught.runs or 0, 'run')}, which `{now.model.describe()}` {late}"
            )
        more = now.false_alarms - best.false_alarms
        if now.false_alarms >= CLEARLY * best.false_alarms and more >= MORE:
            return (
                f"{name} failed {best.false_alarms} healthy runs instead of"
                f" {now.false_alarms} (of {now.judged})"
            )
        return None


# --------------------------------------------------------------------------- the replay


def _chunks(start: int, stop: int, window: int) -> Iterator[range]:
    """Runs ``start`` to ``stop`` in consecutive ranges whose windows stacked hold at most
    ``CHUNK_BYTES`` (one run's at least)."""
    step = max(1, CHUNK_BYTES // (window * FLOAT_BYTES))
    for first in range(start, stop, step):
        yield range(first, min(first + step, stop))


def _windows(values: FloatArray, runs: range, window: int) -> FloatArray:
    """The windows before ``runs`` stacked, a row each: the ``window`` values before the
    run, or at the start all before it, padded at the end with NaN to the longest's width."""
    if runs.start >= window:
        rows = sliding_window_view(values, window)[runs.start - window : runs.stop - window]
        return np.ascontiguousarray(rows)
    head = values[: runs.stop - 1]  # the longest: every run before the chunk's last
    ends = np.arange(runs.start, runs.stop)[:, np.newaxis]
    padded: FloatArray = np.where(np.arange(head.size) < ends, head, np.nan)
    return padded


def limits_before(
    values: FloatArray, bound: Bound, rule: RuleSettings, window: int, min_runs: int
) -> FloatArray:
    """The limit ``rule`` gives run *i* of ``values`` (finite, oldest first) from the
    ``window`` runs before it (fewer at the start); NaN until ``min_runs`` runs precede it.
    Run *i* and later runs never enter the limit that judges run *i*.

    The windows are stacked a chunk of runs at a time (:data:`CHUNK_BYTES`), so the memory
    is O(runs) whatever the window; the job's deadline is checked between chunks."""
    n = values.size
    limits = np.full(n, np.nan)
    first = max(min_runs, 1)
    edge = max(first, min(window, n))  # the first runs have shorter windows
    for start, stop in ((first, edge), (edge, n)):
        for runs in _chunks(start, stop, window):
            deadline.check("backtesting")
            rows = _windows(values, runs, window)
            limits[runs.start : runs.stop], _ = recompute_limits(
                rows, bound.op, bound.literal, rule
            )
    return limits


def replay(
    values: FloatArray, bounds: Sequence[Bound], rule: RuleSettings, window: int, min_runs: int
) -> tuple[BoolArray, BoolArray]:
    """``(judged, failed)`` per run of ``values``: judged once ``min_runs`` runs precede it;
    failed when it fails the limit of any of ``bounds`` (:func:`limits_before`)."""
    judged = np.zeros(values.size, dtype=bool)
    judged[max(min_runs, 1) :] = True
    failed = np.zeros(values.size, dtype=bool)
    for bound in bounds:
        limits = limits_before(values, bound, rule, window, min_runs)
        with np.errstate(invalid="ignore"):
            failed |= judged & ~COMPARISONS[bound.op](values, limits)
    return judged, failed


def _bad_way(moved: float, sides: Sides) -> float:
    """How far ``moved`` goes the way that fails the gate (negative: the good way)."""
    return {"lower": -moved, "upper": moved, "both": abs(moved)}[sides]


def _moved(change: Change, key: str, values: FloatArray, at: int, window: int) -> float:
    """The metric's relative move at ``change`` (``at``: its position in ``values``): as the
    regime detector measured it, over the metric's own stretches (not between the regimes
    the file's other gates cut), else between the medians of ``window`` runs either side."""
    shift = change.metrics.get(key)
    if shift is not None:
        before, after = shift.before, shift.after
    else:
        before = float(np.median(values[max(0, at - window) : at]))
        after = float(np.median(values[at : at + window]))
    if before == 0:
        return math.copysign(math.inf, after) if after else 0.0
    return (after - before) / abs(before)


@dataclass(frozen=True)
class _Span:
    """A harmful change and the runs it may be caught in (``start`` to ``end``, positions)."""

    change: Change
    moved: float
    start: int
    end: int


def _harmful(
    changes: Sequence[Change],
    key: str,
    sides: Sides,
    series: tuple[FloatArray, IntArray],
    rule: RuleSettings,
    window: int,
) -> list[_Span]:
    """The judged changes that moved the metric the bad way by more than ``rule.harm``, each
    with its detection span: the runs whose window still reaches back before it, up to the
    next change."""
    values, index = series
    at = [int(np.searchsorted(index, c.index)) for c in changes]
    spans: list[_Span] = []
    for i, change in enumerate(changes):
        start = at[i]
        if start < rule.backtest.min_runs or start >= values.size:
            continue  # before anything is judged, or after the last run having the metric
        moved = _moved(change, key, values, start, window)
        if _bad_way(moved, sides) <= rule.harm:
            continue
        end = min(start + window, at[i + 1] if i + 1 < len(at) else values.size, values.size)
        spans.append(_Span(change, moved, start, end))
    return spans


def _score(
    model: LimitModel,
    rule: RuleSettings,
    replayed: tuple[BoolArray, BoolArray],
    spans: Sequence[_Span],
) -> Score:
    judged, failed = replayed
    healthy = judged.copy()
    caught: list[Caught] = []
    for span in spans:
        healthy[span.start : span.end] = False
        hits = np.flatnonzero(failed[span.start : span.end])
        runs = int(hits[0]) + 1 if hits.size else None
        caught.append(Caught(span.change.at, span.change.index, span.moved, runs))
    return Score(
        model=model,
        rule=rule,
        judged=int(healthy.sum()),
        false_alarms=int((failed & healthy).sum()),
        caught=tuple(caught),
    )


def _recommend(scores: Sequence[Score], within: int) -> tuple[Score | None, tuple[Score, ...], str]:
    """The model with the fewest false alarms among those catching every harmful change
    within ``within`` runs (ties: the earlier, the current model first), the others it
    ties with, and the note."""
    able = [s for s in scores if s.catches_all(within)]
    if not able:
        return None, (), f"no model catches every harmful change within {plural(within, 'run')}"
    best = min(able, key=lambda s: s.false_alarms)
    tied = tuple(s for s in able if s.false_alarms == best.false_alarms and s is not best)
    if not scores[0].caught:
        return best, tied, "no harmful change in the history: judged on false alarms alone"
    return best, tied, ""


# --------------------------------------------------------------------------- gates


@dataclass(frozen=True)
class _Target:
    """What one backtest row set judges: a gate, or a band of two."""

    gates: tuple[Gate, ...]
    bounds: tuple[Bound, ...]
    sides: Sides


def _targets(ctx: HistoryContext, gates: Sequence[Gate]) -> list[_Target | tuple[Gate, str]]:
    """Bands paired (one lower and one upper limit gate on one metric in one file), other
    limit gates alone; gates that cannot be backtested with the reason."""
    out: list[_Target | tuple[Gate, str]] = []
    groups: dict[tuple[str, str], list[Gate]] = {}
    for gate in gates:
        if gate.kind != "limit":
            out.append((gate, "a reference gate: its band is its tolerance as written"))
        elif gate.ignored:
            out.append((gate, "a placeholder"))
        else:
            groups.setdefault((gate.file, ctx.key(gate.metric)), []).append(gate)
    for group in groups.values():
        lower = [g for g in group if g.is_lower_bound]
        upper = [g for g in group if not g.is_lower_bound]
        if len(lower) == 1 and len(upper) == 1 and lower[0].aggregation == upper[0].aggregation:
            pair = (lower[0], upper[0])
            bounds = tuple(Bound(g.op, g.literal) for g in pair)
            out.append(_Target(pair, bounds, "both"))
        else:
            out += [_Target((g,), (Bound(g.op, g.literal),), g.sides) for g in group]
    return out


def _models(current: LimitModel, models: Sequence[LimitModel]) -> list[LimitModel]:
    others = [m for m in models if m.describe() != current.describe()]
    return [current, *others]


def _backtest(
    ctx: HistoryContext, target: _Target, rule: RuleSettings, models: Sequence[LimitModel]
) -> GateBacktest:
    head = target.gates[0]
    gate_rule = rule.for_gate(head.name, head.metric, head.file)
    series = ctx.values(head)
    keep = np.isfinite(series.values)
    values, index = series.values[keep], series.index[keep]
    key = ctx.key(head.metric)
    within = gate_rule.backtest.detect_within
    row = GateBacktest(
        name=" / ".join(dict.fromkeys(g.name for g in target.gates)),  # a chain: one name
        file=head.file,
        line=min(g.line for g in target.gates),
        metric=key,
        sides=target.sides,
        runs=int(values.size),
        within=within,
    )
    if values.size <= gate_rule.backtest.min_runs:
        have = f"only {plural(int(values.size), 'run')} have" if values.size else "no run has"
        return _skipped(row, f"{have} the metric: too few to replay")
    window = gate_rule.window.runs
    changes = ctx.changes_of(head.metric)
    spans = _harmful(changes, key, target.sides, (values, index), gate_rule, window)
    scores = []
    for model in _models(gate_rule.model, models):
        model_rule = gate_rule.model_copy(update={"model": model})
        replayed = replay(values, target.bounds, model_rule, window, gate_rule.backtest.min_runs)
        scores.append(_score(model, model_rule, replayed, spans))
    best, tied, note = _recommend(scores, within)
    return replace(row, scores=tuple(scores), recommended=best, tied=tied, note=note)


def _skipped(row: GateBacktest, reason: str) -> GateBacktest:
    return replace(row, skipped=reason)


def backtest_gates(
    ctx: HistoryContext,
    gates: Sequence[Gate],
    rule: RuleSettings,
    models: Sequence[LimitModel] = DEFAULT_MODELS,
) -> tuple[GateBacktest, ...]:
    """Each limit gate of ``gates`` (a band: its two gates together) replayed with its
    current model (``rule.for_gate``) and ``models``; other gates with why they are not."""
    out: list[GateBacktest] = []
    for target in _targets(ctx, gates):
        if isinstance(target, _Target):
            deadline.check(f"backtesting {target.gates[0].name}")  # a PR decides how many
            out.append(_backtest(ctx, target, rule, models))
            continue
        gate, reason = target
        row = GateBacktest(
            name=gate.name,
            file=gate.file,
            line=gate.line,
            metric=ctx.key(gate.metric),
            sides=gate.sides,
            runs=0,
            within=rule.backtest.detect_within,
        )
        out.append(_skipped(row, reason))
    return tuple(sorted(out, key=lambda b: (b.file, b.line)))


def backtest_history(
    gates: Sequence[Gate],
    history: History,
    rule: RuleSettings,
    regime_settings: RegimeSettings = RegimeSettings(),
    models: Sequence[LimitModel] = DEFAULT_MODELS,
) -> tuple[tuple[GateBacktest, ...], list[Change]]:
    """:func:`backtest_gates` over ``history``, its regimes detected on the gated metrics;
    with the regime changes found."""
    runs = history.finished
    keys = summary_keys(runs)
    gated = [resolve_key(g.metric, keys) for g in gates]
    regimes, changes = detect_regimes(runs, regime_settings, metrics=gated)
    ctx = HistoryContext(runs, regimes, changes, len(history.runs))
    return backtest_gates(ctx, gates, rule, models), changes
