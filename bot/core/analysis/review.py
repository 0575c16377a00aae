"""Assembly of a :class:`Review` from a PR's gates and a run history (docs/json-review.md).

Pure: no I/O. Each gated metric is extracted from the runs once, as numpy columns; regimes are
detected once per history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from bot.core.analysis.explain import (
    describe_missing,
    describe_old,
    describe_proposed,
    short_window_warning,
    straddle_warning,
)
from bot.core.analysis.failures import (
    Diagnosis,
    count_failures,
    diagnose,
    failing_mask,
    failing_streak,
    tally,
)
from bot.core.analysis.keys import closest_keys, resolve_key, summary_keys
from bot.core.analysis.limits import looser_by, recompute_limit, rounding_step
from bot.core.analysis.regimes import detect_regimes
from bot.core.analysis.verdicts import conclusion_of, verdict_of
from bot.core.analysis.windows import (
    BoolArray,
    FloatArray,
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
    Regime,
    RegimeSettings,
    Review,
    RuleSettings,
    Run,
    UnboundVariable,
    WindowInfo,
)

__all__ = ["SCANNED_METRICS", "build_review", "merge_reviews", "unavailable_review"]

SCANNED_METRICS = 32  # ungated metrics segmented for the regime table (the most logged ones)


@dataclass
class _Context:
    """What every gate of one history shares: runs, regimes and the metric columns."""

    runs: Sequence[Run]
    regimes: list[Regime]
    changes: list[Change]
    read: int = 0  # runs read, in any state
    unfinished_keys: frozenset[str] = frozenset()  # summary keys of runs not finished
    times: FloatArray = field(init=False)
    keys: frozenset[str] = field(init=False)  # summary keys of the finished runs
    columns: dict[str, Series] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.times = run_times(self.runs)
        self.keys = summary_keys(self.runs)

    def key(self, metric: str) -> str:
        """The summary key ``metric`` reads (``eval.acc`` reads a nested ``eval/acc``)."""
        return resolve_key(metric, self.keys)

    def series(self, metric: str) -> Series:
        """``metric`` over the finished runs having it (extracted once, then cached)."""
        key = self.key(metric)
        if key not in self.columns:
            self.columns[key] = series_of(self.runs, key, self.times)
        return self.columns[key]

    def closest(self, metric: str) -> tuple[str, ...]:
        """The finished runs' keys most like ``metric``, which none of them has."""
        return closest_keys(metric, self.keys)

    def missing(self, metric: str) -> str:
        """Why a gate on ``metric``, which no finished run has, cannot be verified."""
        return describe_missing(
            metric,
            closest=self.closest(metric),
            read=self.read,
            finished=len(self.runs),
            others_have_it=resolve_key(metric, self.unfinished_keys) in self.unfinished_keys,
        )

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
        key = self.key(metric)
        moved = [c for c in self.changes if key in c.metrics]
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


def _directions(changes: Sequence[Change], key: str, lower: bool) -> tuple[list[int], list[int]]:
    """Positions of ``changes`` that moved ``key`` toward failing a lower (``lower``) or upper
    bound, and away from it; a change that records no move of ``key`` counts as both."""
    toward: list[int] = []
    away: list[int] = []
    for change in changes:
        shift = change.metrics.get(key)
        if shift is None or shift.after == shift.before:
            toward.append(change.index)
            away.append(change.index)
        else:
            (toward if (shift.after < shift.before) == lower else away).append(change.index)
    return toward, away


def _explain_old(
    ctx: _Context, gate: Gate, history: Series, fails: BoolArray, lookback: int
) -> tuple[Diagnosis, str]:
    """The case of the old value (``failures.diagnose``) and its words."""
    key = ctx.key(gate.metric)
    changes = ctx.changes_of(gate.metric)
    toward, away = _directions(changes, key, gate.is_lower_bound)
    found = diagnose(fails, history.index, lookback=lookback, toward=toward, away=away)
    within = True
    if changes and found.recent.failed:
        first_failure = history.index[-lookback:][fails[-lookback:]][0]
        within = bool(first_failure >= changes[-1].index)
    streak_since = ctx.runs[int(history.index[-found.streak])].created_at if found.streak else None
    return found, describe_old(
        found,
        metric=key,
        runs=len(history),
        change=next((c for c in changes if c.index == found.change), None),
        streak_since=streak_since,
        within_current_regime=within,
        reference=ctx.newest,
    )


def _review_gate(ctx: _Context, change: GateChange, rule: RuleSettings, source: str) -> GateReview:
    head, old_gate = change.head, change.base or change.head
    lookback = rule.failure_lookback

    head_series = ctx.series(head.metric)
    window = head_series.tail(
        window_start(head_series, rule.window, regime_start=ctx.regime_start(head.metric))
    )
    info = window.info(rule.window, ctx.runs)
    limit = recompute_limit(window.values, head.op, old_gate.literal, rule)
    recomputed, decimals = limit if limit is not None else (None, 0)
    proposed_failures = count_failures(window.values, head.op, head.value)

    history = ctx.series(old_gate.metric)
    fails = failing_mask(history.values, old_gate.op, old_gate.value)
    old_failures = tally(fails[-lookback:])
    streak, failing_since = failing_streak(fails, history.index, ctx.runs)

    verdict = verdict_of(
        changed=change.changed,
        window=proposed_failures,
        proposed=head.value,
        recomputed=recomputed,
        decimals=decimals,
        op=head.op,
    )
    closest: tuple[str, ...] = ()
    if len(history):
        diagnosis, old_words = _explain_old(ctx, old_gate, history, fails, lookback)
        parts = [old_words]
    else:
        diagnosis, parts = Diagnosis("no_data", old_failures), [ctx.missing(old_gate.metric)]
        closest = ctx.closest(old_gate.metric)
    if change.changed and not len(head_series):
        if ctx.key(head.metric) != ctx.key(old_gate.metric):
            parts.append(ctx.missing(head.metric))
            closest = ctx.closest(head.metric)
    elif change.changed:
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
        classification=diagnosis.classification,
        explanation="; ".join(parts),
        decimals=decimals,
        source=source or (head.source.describe() if head.source else ""),
        declared_source=head.declared,
        warnings=tuple(_gate_warnings(ctx, head, window, info, rule)),
        old_literal=old_gate.literal,
        proposed_literal=head.literal,
        closest_keys=closest,
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
    if detected is None:
        keys = summary_keys(runs)
        gated = [resolve_key(c.head.metric, keys) for c in gates]
        detected = detect_regimes(runs, regime_settings, metrics=gated, extra=SCANNED_METRICS)
    regimes, changes = detected
    unfinished = summary_keys(r for r in history.runs if r.state != "finished")
    ctx = _Context(runs, list(regimes), list(changes), len(history.runs), unfinished)
    reviews = tuple(_review_gate(ctx, change, rule, history.source) for change in gates)
    notes = list(warnings)
    if not runs:
        notes.append("the history has no finished runs")
    return Review(
        conclusion=conclusion_of(reviews),
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
    """The review when the history could not be read: every gate ``no_data``;
    ``action_required`` when the PR changes a gate (it cannot be verified), else ``neutral``."""
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
            declared_source=c.head.declared,
            old_literal=(c.base or c.head).literal,
            proposed_literal=c.head.literal,
        )
        for c in gates
    )
    conclusion = "action_required" if conclusion_of(reviews) == "action_required" else "neutral"
    return Review(
        conclusion=conclusion, gates=reviews, rule=rule, unbound=tuple(unbound), error=error
    )


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def merge_reviews(reviews: Sequence[Review]) -> Review:
    """One review of a PR whose gates read several history sources.

    Gates, warnings, unbound variables and pulls are concatenated; regimes, changes and history
    statistics are those of the source with the most gates. The conclusion is
    ``action_required`` if any part requires action (a maintainer must act on it whatever else
    could not be checked), else ``neutral`` if any part is (a history could not be read, or an
    unchanged gate has no data), else ``success``.
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
