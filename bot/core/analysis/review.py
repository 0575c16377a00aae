"""Assembly of a :class:`Review` from a PR's gates and a run history (docs/json-review.md).

Pure: no I/O. Each gated metric is extracted from the runs once, as numpy columns; regimes are
detected once per history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from bot.core.analysis.explain import (
    describe_old,
    describe_proposed,
    short_window_warning,
    straddle_warning,
)
from bot.core.analysis.failures import (
    classify,
    count_failures,
    failing_mask,
    failing_streak,
    find_shift,
    tally,
)
from bot.core.analysis.limits import looser_by, looser_than_rule, recompute_limit, rounding_step
from bot.core.analysis.regimes import detect_regimes
from bot.core.analysis.windows import (
    BoolArray,
    FloatArray,
    IntArray,
    Series,
    run_times,
    series_of,
    window_start,
)
from bot.core.models import (
    Change,
    Conclusion,
    Failures,
    Gate,
    GateChange,
    GateReview,
    History,
    Op,
    Regime,
    RegimeSettings,
    Review,
    RuleSettings,
    Run,
    UnboundVariable,
    Verdict,
    WindowInfo,
)

__all__ = [
    "ACTION_VERDICTS",
    "build_review",
    "conclusion_of",
    "merge_reviews",
    "unavailable_review",
    "verdict_of",
]

ACTION_VERDICTS: frozenset[str] = frozenset({"too_tight", "looser_than_rule", "unchanged_failing"})


def conclusion_of(verdicts: Iterable[Verdict], *, history_ok: bool = True) -> Conclusion:
    """``neutral`` without history, ``action_required`` if any verdict needs action, else
    ``success``."""
    if not history_ok:
        return "neutral"
    return "action_required" if any(v in ACTION_VERDICTS for v in verdicts) else "success"


def verdict_of(
    *,
    changed: bool,
    window: Failures,
    proposed: float,
    recomputed: float | None,
    decimals: int,
    op: Op,
) -> Verdict:
    """The verdict table (docs/limit-rule.md) for one gate.

    ``window``: failures of the proposed value in the window. A changed gate is
    ``looser_than_rule`` when it is more permissive than ``recomputed`` by more than one
    rounding step at ``decimals``.
    """
    if window.total == 0 or recomputed is None:
        return "no_data"
    if not changed:
        return "unchanged_failing" if window.failed else "unchanged"
    if window.failed:
        return "too_tight"
    return "looser_than_rule" if looser_than_rule(proposed, recomputed, decimals, op) else "ok"


@dataclass
class _Context:
    """What every gate of one history shares: runs, regimes and the metric columns."""

    runs: Sequence[Run]
    regimes: list[Regime]
    changes: list[Change]
    times: FloatArray = field(init=False)
    columns: dict[str, Series] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.times = run_times(self.runs)

    def series(self, metric: str) -> Series:
        """``metric`` over the finished runs having it (extracted once, then cached)."""
        if metric not in self.columns:
            self.columns[metric] = series_of(self.runs, metric, self.times)
        return self.columns[metric]

    def regime_start(self, metric: str) -> datetime | None:
        """Start of ``metric``'s current regime: its newest change (None: all runs)."""
        changes = self.changes_of(metric)
        return changes[-1].at if changes else None

    @property
    def newest(self) -> datetime | None:
        """When the newest finished run was created (None without runs)."""
        return self.runs[-1].created_at if self.runs else None

    def changes_of(self, metric: str) -> list[Change]:
        """Regime changes that moved ``metric`` (all of them if none records its metrics)."""
        moved = [c for c in self.changes if metric in c.metrics]
        return moved if moved or any(c.metrics for c in self.changes) else list(self.changes)


def _gate_warnings(
    ctx: _Context, gate: Gate, window: Series, info: WindowInfo, rule: RuleSettings
) -> list[str]:
    warnings: list[str] = []
    spec = rule.window
    if spec.kind == "last" and 0 < info.runs < spec.runs:
        warnings.append(short_window_warning(info, spec.runs))
    if spec.kind != "regime" and len(window) > 1:
        inside = [
            c for c in ctx.changes_of(gate.metric) if window.index[0] < c.index <= window.index[-1]
        ]
        if inside:
            warnings.append(straddle_warning(info, inside[-1], ctx.newest))
    return warnings


def _explain_old(
    ctx: _Context, gate: Gate, fails: BoolArray, index: IntArray, recent: Failures, lookback: int
) -> str:
    changes = ctx.changes_of(gate.metric)
    at = find_shift(fails, index, [c.index for c in changes])
    shift = next((c for c in changes if c.index == at), None)
    since_shift = None
    if shift is not None:
        since_shift = tally(fails[int(np.searchsorted(index, shift.index)) :])
    within = True
    if changes and recent.failed:
        first_failure = index[-lookback:][fails[-lookback:]][0]
        within = bool(first_failure >= changes[-1].index)
    return describe_old(
        recent,
        metric=gate.metric,
        shift=shift,
        since_shift=since_shift,
        within_current_regime=within,
        reference=ctx.newest,
    )


def _review_gate(ctx: _Context, change: GateChange, rule: RuleSettings, source: str) -> GateReview:
    head, old_gate = change.head, change.base or change.head
    lookback = rule.failure_lookback

    window = ctx.series(head.metric)
    window = window.tail(
        window_start(window, rule.window, regime_start=ctx.regime_start(head.metric))
    )
    info = window.info(rule.window, ctx.runs)
    limit = recompute_limit(window.values, head.op, old_gate.literal, rule)
    recomputed, decimals = limit if limit is not None else (None, 0)
    proposed_failures = count_failures(window.values, head.op, head.value)

    history = ctx.series(old_gate.metric)
    fails = failing_mask(history.values, old_gate.op, old_gate.value)
    old_failures = tally(fails[-lookback:])
    streak, failing_since = failing_streak(fails, history.index, ctx.runs)
    changes = [c.index for c in ctx.changes_of(old_gate.metric)]

    verdict = verdict_of(
        changed=change.changed,
        window=proposed_failures,
        proposed=head.value,
        recomputed=recomputed,
        decimals=decimals,
        op=head.op,
    )
    parts = [_explain_old(ctx, old_gate, fails, history.index, old_failures, lookback)]
    if change.changed and (proposed_failures.total or fails.size):
        rule_limit = recomputed if verdict == "looser_than_rule" else None
        parts.append(
            describe_proposed(
                head.literal,
                proposed_failures,
                rule_limit=rule_limit,
                looser=0.0 if rule_limit is None else looser_by(head.value, rule_limit, head.op),
                step=rounding_step(decimals),
            )
        )
    elif verdict == "unchanged_failing" and old_failures.failed == 0:
        parts.append(
            f"fails {proposed_failures.failed} of {proposed_failures.total} runs in the window"
        )

    return GateReview(
        name=head.name,
        file=head.file,
        line=head.line,
        metric=head.metric,
        op=head.op,
        old=old_gate.value,
        proposed=head.value,
        recomputed=recomputed,
        window=info,
        window_min=float(window.values.min()) if len(window) else None,
        window_max=float(window.values.max()) if len(window) else None,
        old_failures=old_failures,
        proposed_failures=proposed_failures,
        consecutive_failures=streak,
        failing_since=failing_since,
        verdict=verdict,
        changed=change.changed,
        classification=classify(fails, history.index, lookback=lookback, changes=changes),
        explanation="; ".join(parts),
        decimals=decimals,
        source=head.source.describe() if head.source else source,
        warnings=tuple(_gate_warnings(ctx, head, window, info, rule)),
    )


def build_review(
    gates: Sequence[GateChange],
    history: History,
    *,
    rule: RuleSettings = RuleSettings(),
    regime_settings: RegimeSettings = RegimeSettings(),
    unbound: Sequence[UnboundVariable] = (),
    warnings: Sequence[str] = (),
    detected: tuple[Sequence[Regime], Sequence[Change]] | None = None,
) -> Review:
    """Review ``gates`` against ``history``: limit rule, failures, regimes and verdicts.

    ``detected``: the history's regimes and changes when already known (else detected here).
    """
    runs = history.finished
    regimes, changes = detect_regimes(runs, regime_settings) if detected is None else detected
    ctx = _Context(runs, list(regimes), list(changes))
    reviews = tuple(_review_gate(ctx, change, rule, history.source) for change in gates)
    notes = list(warnings)
    if not runs:
        notes.append("the history has no finished runs")
    return Review(
        conclusion=conclusion_of(g.verdict for g in reviews),
        gates=reviews,
        regimes=tuple(regimes),
        changes=tuple(changes),
        rule=rule,
        history=history.stats,
        source=history.source,
        unbound=tuple(unbound),
        warnings=tuple(notes),
    )


def unavailable_review(
    gates: Sequence[GateChange],
    error: str,
    *,
    rule: RuleSettings = RuleSettings(),
    unbound: Sequence[UnboundVariable] = (),
) -> Review:
    """The review when the history could not be read: every gate ``no_data``, ``neutral``."""
    empty = Failures(failed=0, total=0)
    reviews = tuple(
        GateReview(
            name=c.head.name,
            file=c.head.file,
            line=c.head.line,
            metric=c.head.metric,
            op=c.head.op,
            old=(c.base or c.head).value,
            proposed=c.head.value,
            recomputed=None,
            window=WindowInfo(kind=rule.window.kind, runs=0),
            window_min=None,
            window_max=None,
            old_failures=empty,
            proposed_failures=empty,
            consecutive_failures=0,
            failing_since=None,
            verdict="no_data",
            changed=c.changed,
            classification="no_data",
            explanation=f"history unavailable: {error}",
            source=c.head.source.describe() if c.head.source else "",
        )
        for c in gates
    )
    return Review(
        conclusion="neutral", gates=reviews, rule=rule, unbound=tuple(unbound), error=error
    )


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def merge_reviews(reviews: Sequence[Review]) -> Review:
    """One review of a PR whose gates read several history sources.

    Gates, warnings, unbound variables and pulls are concatenated; regimes, changes and history
    statistics are those of the source with the most gates. The conclusion is
    ``action_required`` if any part requires action (a maintainer must act on it whatever else
    could not be checked), else ``neutral`` if any history could not be read, else ``success``.
    Errors are joined, each prefixed by its source.
    """
    if not reviews:
        return Review(conclusion="success")
    if len(reviews) == 1:
        return reviews[0]
    main = max(reviews, key=lambda r: len(r.gates))
    conclusions = {r.conclusion for r in reviews}
    conclusion: Conclusion = (
        "action_required"
        if "action_required" in conclusions
        else "neutral"
        if "neutral" in conclusions
        else "success"
    )
    errors = [f"{r.source}: {r.error}" if r.source else r.error for r in reviews if r.error]
    pulls = {n: p for r in reviews for n, p in r.pulls.items()}
    unbound = {(u.file, u.line, u.name): u for r in reviews for u in r.unbound}
    return Review(
        conclusion=conclusion,
        gates=tuple(g for r in reviews for g in r.gates),
        regimes=main.regimes,
        changes=main.changes,
        rule=main.rule,
        history=main.history,
        source=", ".join(_unique(r.source for r in reviews if r.source)),
        unbound=tuple(unbound.values()),
        pulls=pulls,
        warnings=_unique(w for r in reviews for w in r.warnings),
        error="; ".join(errors) if errors else None,
    )
