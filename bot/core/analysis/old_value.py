"""How the old value of a gate fares against a history (docs/limit-rule.md#how-the-old-value-fares):
its case (``failures.diagnose``), tied to the regime changes that moved the gate's metric toward
failing it or away, and its words."""

from __future__ import annotations

from collections.abc import Sequence

from bot.core.analysis.context import HistoryContext
from bot.core.analysis.explain import describe_old
from bot.core.analysis.failures import Diagnosis, diagnose
from bot.core.analysis.windows import BoolArray, Series
from bot.core.models import Change, Gate

__all__ = ["explain_old"]


def _directions(changes: Sequence[Change], key: str, gate: Gate) -> tuple[list[int], list[int]]:
    """Positions of ``changes`` that moved ``key`` toward failing ``gate`` (down for a lower
    bound, up for an upper one, away from the reference for a two-sided band) and away from
    it; a change that records no move of ``key`` counts as both."""
    toward: list[int] = []
    away: list[int] = []
    two_sided = gate.sides == "both"
    for change in changes:
        shift = change.metrics.get(key)
        if shift is None or shift.after == shift.before:
            toward.append(change.index)
            away.append(change.index)
        elif two_sided:
            farther = abs(shift.after - gate.value) > abs(shift.before - gate.value)
            (toward if farther else away).append(change.index)
        else:
            (toward if (shift.after < shift.before) == gate.is_lower_bound else away).append(
                change.index
            )
    return toward, away


def explain_old(
    ctx: HistoryContext, gate: Gate, history: Series, fails: BoolArray, lookback: int
) -> tuple[Diagnosis, str]:
    """The case of the old value (``failures.diagnose``) and its words."""
    key = ctx.key(gate.metric)
    changes = ctx.changes_of(gate.metric)
    toward, away = _directions(changes, key, gate)
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
