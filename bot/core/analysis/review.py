"""Assembly of a :class:`Review` from a PR's gates and a run history (docs/json-review.md).

Pure: no I/O. What each gate compares is extracted from the runs once, as numpy columns
(``context``, ``values``); what differs by kind of gate — limit, reference, golden curve,
aggregation — is in ``kinds``; regimes are detected once per history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bot.core.analysis.backtest import backtest_gates
from bot.core.analysis.charts import gate_chart, metric_charts
from bot.core.analysis.context import HistoryContext
from bot.core.analysis.explain import (
    describe_proposed,
    describe_trend,
    short_window_warning,
    straddle_warning,
    trend_warning,
)
from bot.core.analysis.failures import Diagnosis, failing_streak, tally
from bot.core.analysis.keys import per_test_key, resolve_key, series_keys, summary_keys
from bot.core.analysis.kinds import (
    Ruling,
    failing,
    proposed_words,
    read_kind,
    rule_of,
    tighten,
)
from bot.core.analysis.limits import rounding_step
from bot.core.analysis.old_value import explain_old
from bot.core.analysis.projection import gate_bounds, runs_until_fails, toward_failing
from bot.core.analysis.references import finite
from bot.core.analysis.regimes import detect_regimes
from bot.core.analysis.verdicts import conclusion_of, judge
from bot.core.analysis.windows import BoolArray, Series, window_start
from bot.core.models import (
    Change,
    Conclusion,
    Failures,
    Gate,
    GateChange,
    GateReview,
    History,
    NoDataReason,
    Regime,
    RegimeSettings,
    Review,
    RuleSettings,
    Trend,
    UnboundVariable,
    Verdict,
    WindowInfo,
)

__all__ = ["SCANNED_METRICS", "build_review", "merge_reviews", "unavailable_review"]

SCANNED_METRICS = 32  # ungated metrics segmented for the regime table (the most logged ones)


def _gate_warnings(
    ctx: HistoryContext, gate: Gate, window: Series, info: WindowInfo, rule: RuleSettings
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
    drift = _drift(ctx, gate)
    if drift is not None and drift[1].slope != 0:
        trend = drift[1]
        runs = runs_until_fails(trend, gate_bounds(gate))
        warnings.append(
            trend_warning(ctx.key(gate.metric), trend, value=proposed_words(gate), runs=runs)
        )
    return warnings


def _drift(ctx: HistoryContext, gate: Gate) -> tuple[Regime, Trend] | None:
    """The newest regime and the trend of ``gate``'s metric in it (never for a golden
    curve: its steps are not the summary value that trends)."""
    return None if gate.points else ctx.trend(gate.metric)


def _trend_words(ctx: HistoryContext, gate: Gate, old: Gate) -> str | None:
    """The sentence on the trend of the gate's metric in the newest regime, when it moves
    toward failing the old value (the failures come from it); projected for ``gate`` when
    it reads the same metric."""
    drift = _drift(ctx, old)
    if drift is None or not toward_failing(drift[1], old):
        return None
    regime, trend = drift
    key = ctx.key(old.metric)
    same = ctx.key(gate.metric) == key and not gate.points
    return describe_trend(
        key,
        trend,
        regime.start,
        value=proposed_words(gate),
        runs=runs_until_fails(trend, gate_bounds(gate)) if same else None,
        reference=ctx.newest,
    )


def _explain(
    ctx: HistoryContext,
    change: GateChange,
    verdict: Verdict,
    proposed: Failures,
    ruling: Ruling | None,
    head_runs: int,
    history: tuple[Series, BoolArray, int],
) -> tuple[Diagnosis, str, tuple[str, ...]]:
    """The case of the old value, the explanation, and the closest keys of a missing metric
    (``head_runs``: how many runs have the proposed gate's metric)."""
    head, old_gate = change.head, change.base or change.head
    series, fails, lookback = history
    closest: tuple[str, ...] = ()
    if len(series):
        diagnosis, old_words = explain_old(ctx, old_gate, series, fails, lookback)
        parts = [old_words]
        trend = _trend_words(ctx, head, old_gate) if diagnosis.recent.failed else None
        parts += [trend] if trend else []
    else:
        diagnosis = Diagnosis("no_data", tally(fails[-lookback:]))
        parts, closest = [ctx.missing(old_gate.metric)], ctx.closest(old_gate.metric)
    if change.changed and not head_runs:
        if ctx.key(head.metric) != ctx.key(old_gate.metric):
            parts.append(ctx.missing(head.metric))
            closest = ctx.closest(head.metric)
    elif change.changed:
        rule_value = ruling if verdict == "looser_than_rule" else None
        parts.append(
            describe_proposed(
                proposed_words(head),
                proposed,
                rule_value=None if rule_value is None else rule_value.words,
                looser=0.0 if rule_value is None else rule_value.looser,
                step=rounding_step(0 if ruling is None else ruling.decimals),
            )
        )
    elif verdict == "unchanged_failing" and diagnosis.recent.failed == 0:
        parts.append(f"fails {proposed.failed} of {proposed.total} runs in the window")
    return diagnosis, "; ".join(parts), closest


def _no_data_reason(
    ctx: HistoryContext, change: GateChange, head_runs: int, old_runs: int
) -> NoDataReason | None:
    """Why no run has the proposed gate's metric (else the old gate's); None when both have
    runs."""
    if not head_runs:
        return ctx.no_data_reason(change.head.metric)
    if not old_runs:
        return ctx.no_data_reason((change.base or change.head).metric)
    return None


def _model_of(gate: Gate, rule: RuleSettings) -> str:
    """The model and parameters of a limit gate's rule (``rule.for_gate`` applied)."""
    if gate.kind != "limit":
        return ""
    return rule.for_gate(gate.name, gate.metric, gate.file).describe_model()


def _backtest_hint(ctx: HistoryContext, gate: Gate, rule: RuleSettings) -> str:
    """The backtest's line for a limit gate whose model is clearly worse than another on
    its history (``GateBacktest.hint``); empty otherwise, also for a gate the backtest does
    not replay (a reference, a placeholder, too few runs)."""
    hint = next((b.hint() for b in backtest_gates(ctx, [gate], rule)), None)
    return f"Backtest: {hint} — `threshold-bot backtest`" if hint else ""


def _review_gate(
    ctx: HistoryContext, change: GateChange, repo_rule: RuleSettings, source: str
) -> GateReview:
    head, old_gate = change.head, change.base or change.head
    rule = repo_rule.for_gate(head.name, head.metric, head.file)
    lookback = rule.failure_lookback

    head_series = ctx.values(head)
    start = window_start(
        head_series,
        rule.window,
        regime_start=ctx.regime_start(head.metric),
        drifting=ctx.trend(head.metric) is not None,
    )
    window = head_series.tail(start)
    info = window.info(rule.window, ctx.runs)
    ruling = rule_of(head, window, old_gate.literal, rule)
    proposed_failures = tally(failing(head, window))

    history = ctx.values(old_gate)
    fails = failing(old_gate, history)
    old_failures = tally(fails[-lookback:])
    streak, failing_since = failing_streak(fails, history.index, ctx.runs)

    verdict = judge(
        changed=change.changed,
        window=proposed_failures,
        looser=None if ruling is None else ruling.is_looser,
    )
    diagnosis, explanation, closest = _explain(
        ctx,
        change,
        verdict,
        proposed_failures,
        ruling,
        len(head_series),
        (history, fails, lookback),
    )
    reading = read_kind(head, old_gate, window, ruling, rule)
    if reading.worst_step is not None and proposed_failures.failed:
        explanation += f"; farthest outside at step {reading.worst_step}"
    in_window = finite(window.values)
    tight = None  # a changed gate looser than the rule is ``looser_than_rule``: said already
    if not change.changed:
        tight = tighten(head, window, ruling, rule, metric=ctx.key(head.metric))
    review = GateReview(
        name=head.name,
        file=head.file,
        line=head.line,
        metric=head.metric,
        op=head.op,
        old=old_gate.value,
        proposed=head.value,
        recomputed=None if ruling is None else ruling.recomputed,
        window=info,
        window_min=float(in_window.min()) if in_window.size else None,
        window_max=float(in_window.max()) if in_window.size else None,
        old_failures=old_failures,
        proposed_failures=proposed_failures,
        consecutive_failures=streak,
        failing_since=failing_since,
        verdict=verdict,
        changed=change.changed,
        classification=diagnosis.classification,
        tied_change=next((c.at for c in ctx.changes if c.index == diagnosis.change), None),
        explanation=explanation,
        decimals=0 if ruling is None else ruling.decimals,
        source=source or (head.source.describe() if head.source else ""),
        declared_source=head.declared,
        warnings=(*_gate_warnings(ctx, head, window, info, rule), *reading.warnings),
        old_literal=old_gate.literal,
        proposed_literal=head.literal,
        closest_keys=closest,
        no_data_reason=_no_data_reason(ctx, change, len(head_series), len(history)),
        model=_model_of(head, rule),
        tighten_to=None if tight is None else tight[0],
        notes=() if tight is None else (tight[1],),
        backtest_hint=_backtest_hint(ctx, head, rule),
        **reading.fields(head),
    )
    return review.model_copy(update={"chart": gate_chart(ctx, change, review, rule)})


def _names(gate: Gate) -> set[str]:
    """What a per-test history key may call the test checking ``gate``: its name, without
    ``test_``, and the id of its case (``test_x[bm25]``, ``FLOORS[bm25]``: ``bm25``)."""
    test = gate.test[0] if gate.test else ""
    names = {test, test.removeprefix("test_")}
    case = gate.name.rstrip("]").rpartition("[")[2] if gate.name.endswith("]") else ""
    if case != gate.metric and not case.isdigit():
        names.add(case)
    return names


def _per_test(
    gates: Sequence[GateChange], keys: frozenset[str], series: frozenset[str]
) -> tuple[list[GateChange], dict[int, str]]:
    """``gates`` with a bare metric no run has (``score``) read from the history's one key
    for the gate's test ending with it (``test_bm25/score``), and a note per gate bound (by
    position); the reviews keep the metric as found."""
    bound: dict[int, str] = {}
    changed: list[GateChange] = []
    for index, change in enumerate(gates):
        head = change.head
        metric = head.metric
        known = resolve_key(metric, keys) in keys or resolve_key(metric, series) in series
        test = head.test
        key = None if known or test is None else per_test_key(metric, _names(head), keys)
        if key is None or test is None:
            changed.append(change)
            continue
        base = change.base
        if base is not None and base.metric == metric:
            base = base.model_copy(update={"metric": key})
        changed.append(GateChange(head=head.model_copy(update={"metric": key}), base=base))
        bound[index] = (
            f"{metric} read as {key}: the history's only key ending with /{metric} "
            f"for {test[0]} (map it in the config's metrics: to choose another)"
        )
    return changed, bound


def build_review(
    gates: Sequence[GateChange],
    history: History,
    *,
    rule: RuleSettings = RuleSettings(),
    regime_settings: RegimeSettings = RegimeSettings(),
    hints: Sequence[UnboundVariable] = (),
    warnings: Sequence[str] = (),
    detected: tuple[Sequence[Regime], Sequence[Change]] | None = None,
) -> Review:
    """Review ``gates`` against ``history``: limit rule, failures, regimes and verdicts.

    ``hints``: the literals of the files that no gate binds (:func:`hinted_conclusion`).
    ``detected``: the history's regimes and changes when already known (else detected here).
    """
    runs = history.finished
    written = [c.head.metric for c in gates]
    gates, bound = _per_test(gates, summary_keys(runs), series_keys(runs))
    if detected is None:
        keys = summary_keys(runs)
        gated = [resolve_key(c.head.metric, keys) for c in gates]
        detected = detect_regimes(runs, regime_settings, metrics=gated, extra=SCANNED_METRICS)
    regimes, changes = detected
    unfinished = summary_keys(r for r in history.runs if r.state != "finished")
    ctx = HistoryContext(
        runs, list(regimes), list(changes), len(history.runs), unfinished, history.not_numbers
    )
    reviews = tuple(_review_gate(ctx, change, rule, history.source) for change in gates)
    reviews = tuple(
        r.model_copy(update={"metric": written[i], "notes": (*r.notes, note)})
        if (note := bound.get(i))
        else r
        for i, r in enumerate(reviews)
    )  # a gate keeps its metric as found (features pair reviews with gates by it)
    notes = [*warnings, *history.warnings]
    if not history.runs:
        notes.append("the history is empty: it has no runs")
    elif not runs:
        notes.append("the history has no finished runs")
    return Review(
        conclusion=hinted_conclusion(conclusion_of(reviews), reviews, hints),
        gates=reviews,
        regimes=tuple(regimes),
        changes=tuple(changes),
        rule=rule,
        history=history.stats,
        source=history.source,
        hints=tuple(hints),
        warnings=tuple(notes),
        metric_charts=metric_charts(
            ctx,
            [ctx.key(c.head.metric) for c, r in zip(gates, reviews, strict=True) if not r.ignored],
        ),
    )


def hinted_conclusion(
    conclusion: Conclusion, gates: Sequence[GateReview], hints: Sequence[UnboundVariable]
) -> Conclusion:
    """``conclusion`` of the gates, except that a review with no gate but hints is ``neutral``:
    literals that reach a comparison were seen and none was checked (never ``success``)."""
    return "neutral" if not gates and hints else conclusion


def unavailable_review(
    gates: Sequence[GateChange],
    error: str,
    *,
    rule: RuleSettings = RuleSettings(),
    hints: Sequence[UnboundVariable] = (),
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
            no_data_reason="unavailable",
            explanation=f"history unavailable: {error}",
            source=c.head.source.describe() if c.head.source else "",
            declared_source=c.head.declared,
            old_literal=(c.base or c.head).literal,
            proposed_literal=c.head.literal,
            model=_model_of(c.head, rule),
            **read_kind(c.head, c.base or c.head, None, None, rule).fields(c.head),
        )
        for c in gates
    )
    conclusion = "action_required" if conclusion_of(reviews) == "action_required" else "neutral"
    return Review(conclusion=conclusion, gates=reviews, rule=rule, hints=tuple(hints), error=error)


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def merge_reviews(reviews: Sequence[Review]) -> Review:
    """One review of a PR whose gates read several history sources.

    Gates, warnings, hints and pulls are concatenated; regimes, changes and history
    statistics are those of the source with the most gates. The conclusion is
    ``action_required`` if any part requires action (a maintainer must act on it whatever else
    could not be checked), else ``neutral`` if any part is (a history could not be read, or an
    unchanged gate has no data), else ``success``.
    Errors are joined, each prefixed by its source.
    """
    if not reviews:
        return Review(conclusion="success")  # nothing was seen
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
    hints = {(u.file, u.line, u.name): u for r in reviews for u in r.hints}
    return Review(
        conclusion=conclusion,
        gates=tuple(g for r in reviews for g in r.gates),
        regimes=main.regimes,
        changes=main.changes,
        rule=main.rule,
        history=main.history,
        source=", ".join(_unique(r.source for r in reviews if r.source)),
        hints=tuple(hints.values()),
        pulls=pulls,
        warnings=_unique(w for r in reviews for w in r.warnings),
        error="; ".join(errors) if errors else None,
        metric_charts=main.metric_charts,
    )
