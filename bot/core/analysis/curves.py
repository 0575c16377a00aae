"""Golden curves (docs/limit-rule.md#golden-curves): a reference value per step, checked on
each run's values at the same steps (``Run.series``).

A run fails when it lies outside the gate at any checked step (a ``nan`` golden value is not
checked; a step the run did not log is not checked either). A run without a per-step series is
compared on its summary value against the last checked step, as the review then warns. The
rule recomputes each step's reference from the window, like a reference gate's
(:func:`recompute_points`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from bot.core.analysis.failures import gate_failing_mask
from bot.core.analysis.keys import gate_key, series_keys, summary_keys
from bot.core.analysis.references import band_of, recompute_reference
from bot.core.analysis.values import extract, extraction_of
from bot.core.analysis.windows import BoolArray, FloatArray, Series, run_times, window_start
from bot.core.formatting import plural
from bot.core.models import CurvePoint, Gate, RuleSettings, Run

__all__ = ["curve_failures", "curve_warnings", "recompute_points", "worst_step"]

SHOWN_STEPS = 5  # missing steps named in a warning at most


def _golden(gate: Gate) -> list[tuple[int, float]]:
    """``(step, reference)`` of the checked steps, in the order of ``Series.grid``'s columns."""
    return [(p.step, p.value) for p in gate.points if p.value is not None]


def curve_failures(gate: Gate, series: Series) -> BoolArray:
    """True for each run of ``series`` (extracted for ``gate``) that fails ``gate`` at some
    step it logged; a run without the series: its summary value against ``gate.value``."""
    if series.grid is None or series.stepped is None:
        return gate_failing_mask(gate, series.values, gate.value)
    fails = np.zeros(len(series), dtype=np.bool_)
    for column, (_, value) in zip(series.grid.T, _golden(gate), strict=True):
        fails |= np.isfinite(column) & gate_failing_mask(gate, column, value)
    summary = ~series.stepped
    fails[summary] = gate_failing_mask(gate, series.values[summary], gate.value)
    return fails


def _excess(gate: Gate, values: FloatArray, value: float) -> FloatArray:
    """How far beyond the gate at ``value`` each of ``values`` lies (negative: inside), in units
    of the band's margin (a limit, or a band without margin: of ``|value|``)."""
    if gate.kind == "reference":
        band = band_of(value, gate.tolerance, gate.sides).band
        margin = gate.tolerance.margin(value) if gate.tolerance is not None else 0.0
        scale = margin or abs(value) or 1.0
        below = band.band_low - values if band.band_low is not None else None
        above = values - band.band_high if band.band_high is not None else None
        sides = [side for side in (below, above) if side is not None]
        excess: FloatArray = np.maximum.reduce(sides) / scale
        return excess
    beyond = (value - values) if gate.is_lower_bound else (values - value)
    return beyond / (abs(value) or 1.0)


def worst_step(gate: Gate, window: Series) -> int | None:
    """The checked step where some run of ``window`` lies farthest outside the gate, relative to
    the step's margin (when every run passes: the step where one comes nearest); None when no
    run of the window has the per-step series."""
    if window.grid is None or not len(window):
        return None
    worst: tuple[float, int] | None = None
    for column, (step, value) in zip(window.grid.T, _golden(gate), strict=True):
        known = column[np.isfinite(column)]
        if known.size:
            excess = float(np.max(_excess(gate, known, value)))
            if worst is None or excess > worst[0]:
                worst = (excess, step)
    return None if worst is None else worst[1]


def curve_warnings(gate: Gate, window: Series) -> list[str]:
    """What the review could not check on ``window``: runs without the per-step series, and
    checked steps that no run of the window logged."""
    if window.grid is None or window.stepped is None or not len(window):
        return []
    warnings: list[str] = []
    bare = int((~window.stepped).sum())
    if bare:
        golden = _golden(gate)
        last = f" (step {golden[-1][0]})" if golden else ""
        warnings.append(
            f"no per-step series of `{window.metric}` in {bare} of {plural(len(window), 'run')}"
            f" in the window: their summary value is compared with the last step's reference{last}"
        )
    rows = window.grid[window.stepped]
    if rows.size:
        seen = np.asarray(np.isfinite(rows).any(axis=0), dtype=np.bool_)
        missing = [step for j, step in enumerate(_steps(gate)) if not seen[j]]
        if missing:
            shown = ", ".join(str(s) for s in missing[:SHOWN_STEPS])
            more = f" and {len(missing) - SHOWN_STEPS} more" if len(missing) > SHOWN_STEPS else ""
            warnings.append(
                f"no run in the window logged {plural(len(missing), 'step')} of the golden curve"
                f" ({shown}{more}): not checked"
            )
    return warnings


def _steps(gate: Gate) -> list[int]:
    return [step for step, _ in _golden(gate)]


def recompute_points(
    gate: Gate,
    runs: Sequence[Run],
    rule: RuleSettings,
    *,
    regime_start: datetime | None = None,
) -> list[tuple[CurvePoint, float | None]]:
    """The rule's reference for each step of ``gate``'s golden curve, for ``/rebaseline``.

    ``runs``: the finished runs, oldest first. The window is the gate's (``rule.window``;
    ``regime_start``: the start of the metric's current regime, for ``--window regime``).
    Each step gets the window's median (``rule.reference`` ``mean``: mean) of the runs' values
    at that step, rounded to the nearest at the decimals of the step's literal or more to show
    ``rule.significant_digits``: write it with ``format_literal(value,
    limit_decimals(value, point.span.literal, rule.significant_digits))``.  None for a ``nan``
    golden value (left as written) and for a step no run of the window logged.
    """
    key = gate_key(gate.metric, summary_keys(runs), lambda: series_keys(runs))
    series = extract(runs, extraction_of(gate, key), run_times(runs))
    window = series.tail(window_start(series, rule.window, regime_start=regime_start))
    columns = iter(window.grid.T if window.grid is not None else ())
    out: list[tuple[CurvePoint, float | None]] = []
    for point in gate.points:
        if point.value is None:
            out.append((point, None))
            continue
        found = recompute_reference(next(columns), point.span.literal, rule)
        out.append((point, None if found is None else found[0]))
    return out
