"""The words of a gate review: short sentences a maintainer reads at a glance."""

from __future__ import annotations

from datetime import datetime

from bot.core.formatting import day_month, move, plural, significant
from bot.core.models import Change, Failures, WindowInfo

__all__ = [
    "describe_old",
    "describe_proposed",
    "short_window_warning",
    "straddle_warning",
]


def _moved_phrase(change: Change, metric: str) -> str:
    """``after the change that moved m 0.285 → 0.238`` (the gate's metric if it moved)."""
    if not change.metrics:
        return "after a regime change"
    name = metric if metric in change.metrics else next(iter(change.metrics))
    shift = change.metrics[name]
    return f"after the change that moved {name} {move(shift.before, shift.after)}"


def describe_old(
    recent: Failures,
    *,
    metric: str,
    shift: Change | None = None,
    since_shift: Failures | None = None,
    within_current_regime: bool = True,
    reference: datetime | None = None,
) -> str:
    """How the current value fares: passing, flaky or failing since a regime change."""
    if recent.total == 0:
        return f"no finished run has {metric}"
    if recent.failed == 0:
        if recent.total == 1:
            return "passes the only recent run"
        return f"passes all {recent.total} recent runs"
    if shift is not None and since_shift is not None:
        when = day_month(shift.at, reference)
        if since_shift.failed == since_shift.total:
            head = f"failing every run since {when}"
        else:
            runs = plural(since_shift.total, "run")
            head = f"failing {since_shift.failed} of {runs} since {when}"
        return f"{head} — {_moved_phrase(shift, metric)}"
    where = "within the current regime" if within_current_regime else "across regimes"
    return f"{recent.failed} of {recent.total} recent runs fail, scattered {where} (flaky)"


def describe_proposed(
    proposed: str,
    failures: Failures,
    *,
    rule_limit: float | None = None,
    looser: float = 0.0,
    step: float = 0.0,
) -> str:
    """What the ``proposed`` literal does in the window; with ``rule_limit``, that it is ``looser``
    than the rule's limit by more than one rounding ``step``."""
    value = proposed.strip()
    if failures.total == 0:
        return f"{value} cannot be checked: no run in the window"
    if failures.failed:
        runs = plural(failures.total, "run")
        text = f"{value} fails {failures.failed} of {runs} in the window"
    elif failures.total == 1:
        text = f"{value} passes the only run in the window"
    else:
        text = f"{value} passes all {failures.total} runs in the window"
    if rule_limit is not None:
        text += (
            f", but is looser than the rule's {significant(rule_limit, 6)} by {significant(looser)}"
            f" (more than one step of {significant(step)})"
        )
    return text


def straddle_warning(window: WindowInfo, change: Change, reference: datetime | None = None) -> str:
    """The window mixes two regimes of the gate's metric."""
    size = f"{window.runs}-run window" if window.kind == "last" else "window"
    return (
        f"the {size} straddles the regime change of {day_month(change.at, reference)}: "
        "the limit mixes two regimes; consider --window regime"
    )


def short_window_warning(window: WindowInfo, wanted: int) -> str:
    """The window holds fewer runs than asked for."""
    runs = plural(window.runs, "run")
    return f"only {runs} in the window ({wanted} wanted)"
