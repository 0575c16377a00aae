"""The words of a gate review: short sentences a maintainer reads at a glance."""

from __future__ import annotations

from datetime import datetime

from bot.core.models import Change, Failures, WindowInfo

__all__ = [
    "describe_old",
    "describe_proposed",
    "fmt_date",
    "fmt_move",
    "fmt_num",
    "short_window_warning",
    "straddle_warning",
]


def fmt_num(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, without exponent for everyday magnitudes."""
    if value == 0:
        return "0"
    if 1e-4 <= abs(value) < 10 ** max(digits, 6):
        text = f"{value:.{digits}g}"
        if "e" in text:  # e.g. 1.23e+04: write the integer part out
            return f"{value:.0f}"
        return text
    return f"{value:.{digits}g}"


def fmt_move(before: float, after: float) -> str:
    """``before → after``, with as many digits as needed to tell them apart (3 to 6)."""
    for digits in range(3, 7):
        left, right = fmt_num(before, digits), fmt_num(after, digits)
        if left != right:
            break
    return f"{left} → {right}"


def fmt_date(moment: datetime, reference: datetime | None = None) -> str:
    """``30 Jun``; with the year when it differs from ``reference``'s."""
    text = f"{moment.day} {moment:%b}"
    if reference is not None and reference.year != moment.year:
        text += f" {moment.year}"
    return text


def _runs(count: int) -> str:
    return f"{count} run{'' if count == 1 else 's'}"


def _moved(change: Change, metric: str) -> str:
    """``after the change that moved m 0.285 → 0.238`` (the gate's metric if it moved)."""
    if not change.metrics:
        return "after a regime change"
    name = metric if metric in change.metrics else next(iter(change.metrics))
    shift = change.metrics[name]
    return f"after the change that moved {name} {fmt_move(shift.before, shift.after)}"


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
        when = fmt_date(shift.at, reference)
        if since_shift.failed == since_shift.total:
            head = f"failing every run since {when}"
        else:
            head = f"failing {since_shift.failed} of {_runs(since_shift.total)} since {when}"
        return f"{head} — {_moved(shift, metric)}"
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
        text = f"{value} fails {failures.failed} of {_runs(failures.total)} in the window"
    elif failures.total == 1:
        text = f"{value} passes the only run in the window"
    else:
        text = f"{value} passes all {failures.total} runs in the window"
    if rule_limit is not None:
        text += (
            f", but is looser than the rule's {fmt_num(rule_limit, 6)} by {fmt_num(looser)}"
            f" (more than one step of {fmt_num(step)})"
        )
    return text


def straddle_warning(window: WindowInfo, change: Change, reference: datetime | None = None) -> str:
    """The window mixes two regimes of the gate's metric."""
    size = f"{window.runs}-run window" if window.kind == "last" else "window"
    return (
        f"the {size} straddles the regime change of {fmt_date(change.at, reference)}: "
        "the limit mixes two regimes; consider --window regime"
    )


def short_window_warning(window: WindowInfo, wanted: int) -> str:
    """The window holds fewer runs than asked for."""
    return f"only {_runs(window.runs)} in the window ({wanted} wanted)"
