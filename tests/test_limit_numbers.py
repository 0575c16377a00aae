"""Numbers the same for every model (docs/limit-rule.md#rounding): every model computes on
the shortest decimal form of each run's value, so a statistic that is an order statistic or a
linear combination of the runs lands exactly where decimal arithmetic puts it, and is rounded
toward the permissive side at the literal's decimals as ``minmax``'s is.

``percentile p=0`` takes the window's extreme on the failing side (the 0th percentile of a
lower bound, the 100th of an upper bound), so it must give ``minmax``'s limit, whatever the
allowance; the exact references here are computed with ``fractions`` from the test's data."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.analysis.limits import recompute_limit, recompute_limits
from bot.core.limit_model import parse_model
from bot.core.models import LOWER_BOUND_OPS, Op, RuleSettings

OPS: tuple[Op, ...] = (">=", ">", "<=", "<")
PROPERTY = settings(deadline=None, max_examples=300)


def rule(model: str, allowance: float) -> RuleSettings:
    return RuleSettings(model=parse_model(model), allowance=allowance)


# ------------------------------------------------------------------ the seed's case


def test_percentile_p0_gives_minmaxs_limit_on_a_hundredths_window() -> None:
    """max 0.80 + 5% is 0.84 exactly; in binary floating point 0.8400000000000001, which
    rounded up at two decimals was 0.85."""
    window = [0.78, 0.8, 0.79, 0.77, 0.8, 0.76]
    assert 0.8 + 0.05 * 0.8 > 0.84  # the binary sum the percentile model used to round
    minmax = recompute_limit(window, "<=", "0.90", rule("minmax", 0.05))
    percentile = recompute_limit(window, "<=", "0.90", rule("percentile p=0", 0.05))
    assert minmax == (0.84, 2)
    assert percentile == minmax
    rows = np.array([window, window[::-1]])
    limits, decimals = recompute_limits(rows, "<=", "0.90", rule("percentile p=0", 0.05))
    assert limits.tolist() == [0.84, 0.84] and decimals.tolist() == [2, 2]


def test_iqr_lands_on_the_decimal_grid_as_written() -> None:
    """Q1 0.6, Q3 0.7 (every other run): Q3 + 1.5·IQR is 0.85 exactly, not one step above."""
    window = [0.6, 0.7] * 4 + [0.6, 0.7, 0.65, 0.65]
    q1, q3 = (Fraction(repr(float(q))) for q in np.percentile(window, [25, 75]))
    exact = q3 + Fraction(3, 2) * (q3 - q1)
    assert exact == Fraction(85, 100)
    assert recompute_limit(window, "<=", "0.90", rule("iqr k=1.5", 0.0)) == (0.85, 2)


def test_zscore_of_a_constant_window_is_the_value_itself() -> None:
    """σ = 0: mean ± k·σ is the mean, 0.1 exactly (a binary mean may not be)."""
    window = [0.1] * 10
    for model in ("zscore k=3", "zscore k=3 sigma=std", "prediction", "iqr k=1.5"):
        assert recompute_limit(window, ">=", "0.05", rule(model, 0.0)) == (0.1, 2), model
        assert recompute_limit(window, "<=", "0.05", rule(model, 0.0)) == (0.1, 2), model


# ------------------------------------------------------------------ properties


def grid(decimals: int, low: int, high: int) -> st.SearchStrategy[float]:
    """Values on a decimal grid, as runs log them: ``k / 10**decimals``."""
    return st.integers(low, high).map(lambda k: float(Fraction(k, 10**decimals)))


hundredths = grid(2, 0, 100)
thousandths = grid(3, -2000, 2000)
integers = grid(0, -500, 5000)
mixed = st.one_of(grid(4, -(10**4), 10**4), grid(2, 0, 10**6), grid(1, -1000, 1000), integers)
WINDOWS = st.one_of(
    *(st.lists(values, min_size=1, max_size=25) for values in (hundredths, thousandths, integers)),
    st.lists(mixed, min_size=1, max_size=25),
)
ALLOWANCES = st.sampled_from([0.0, 0.05, 0.1, 0.03, 0.2, 0.25])
LITERALS = st.sampled_from(["0.90", "0.5", "3", "120", "0.001", "1e-2"])


@PROPERTY
@given(window=WINDOWS, op=st.sampled_from(OPS), allowance=ALLOWANCES, literal=LITERALS)
def test_percentile_p0_is_minmax(
    window: list[float], op: Op, allowance: float, literal: str
) -> None:
    """A lower gate's 0th percentile is the window's minimum, an upper gate's 100th its
    maximum: the same limit and decimals as ``minmax``, scalar and vectorized."""
    minmax = recompute_limit(window, op, literal, rule("minmax", allowance))
    percentile = recompute_limit(window, op, literal, rule("percentile p=0", allowance))
    assert percentile == minmax
    rows = np.array([window])
    limits, decimals = recompute_limits(rows, op, literal, rule("percentile p=0", allowance))
    assert minmax is not None
    assert (float(limits[0]), int(decimals[0])) == minmax


def percentile(window: list[float], q: Fraction) -> Fraction:
    """The ``q``-th percentile (linear between runs, numpy's default) of the shortest
    decimal forms, exactly."""
    xs = sorted(Fraction(repr(v)) for v in window)
    at = (len(xs) - 1) * q / 100
    below = math.floor(at)
    above = min(below + 1, len(xs) - 1)
    return xs[below] + (xs[above] - xs[below]) * (at - below)


def permissive(value: Fraction, decimals: int, lower: bool) -> Fraction:
    """``value`` rounded toward the permissive side at ``decimals`` decimals."""
    scale = 10**decimals
    steps = math.floor(value * scale) if lower else math.ceil(value * scale)
    return Fraction(steps, scale)


@PROPERTY
@given(
    window=WINDOWS,
    op=st.sampled_from([">=", "<="]),
    allowance=ALLOWANCES,
    model=st.sampled_from(["percentile p=5", "percentile p=25", "iqr k=1.5", "iqr k=0.5"]),
    literal=LITERALS,
)
def test_order_statistic_models_round_their_exact_value(
    window: list[float], op: Op, allowance: float, model: str, literal: str
) -> None:
    """``percentile`` and ``iqr`` are linear combinations of order statistics: their limit is
    the exact one (never stricter than the extreme) rounded permissively at the decimals
    returned, scalar and vectorized alike."""
    lower = op in LOWER_BOUND_OPS
    settings_ = rule(model, allowance)
    lm = settings_.model
    if lm.name == "percentile":
        level = percentile(window, Fraction(repr(lm.p if lower else 100 - lm.p)))
        spread = Fraction(repr(max(window))) - Fraction(repr(min(window)))
        margin = Fraction(repr(allowance)) * (abs(level) if level != 0 else spread)
        exact = level - margin if lower else level + margin
    else:
        q1, q3 = percentile(window, Fraction(25)), percentile(window, Fraction(75))
        k = Fraction(repr(lm.spread))
        exact = q1 - k * (q3 - q1) if lower else q3 + k * (q3 - q1)
    extreme = Fraction(repr(min(window) if lower else max(window)))
    exact = min(exact, extreme) if lower else max(exact, extreme)
    found = recompute_limit(window, op, literal, settings_)
    assert found is not None
    limit, decimals = found
    assert Fraction(repr(limit)) == permissive(exact, decimals, lower)
    limits, places = recompute_limits(np.array([window]), op, literal, settings_)
    assert (float(limits[0]), int(places[0])) == found


@pytest.mark.parametrize("model", ["zscore k=3", "zscore k=2 sigma=std", "prediction", "iqr"])
@PROPERTY
@given(window=WINDOWS, op=st.sampled_from(OPS), literal=LITERALS)
def test_every_model_vectorized_is_the_decimal_scalar(
    model: str, window: list[float], op: Op, literal: str
) -> None:
    """The backtest's vectorized limits are the decimal ones of the review, row by row."""
    settings_ = rule(model, 0.05)
    rows = np.array([window, window[::-1]])
    limits, places = recompute_limits(rows, op, literal, settings_)
    for row, limit, place in zip(rows, limits, places, strict=True):
        assert (float(limit), int(place)) == recompute_limit(row, op, literal, settings_)


@pytest.mark.parametrize("model", ["minmax", "percentile p=0"])
def test_the_review_recomputes_the_same_limit_with_either_model(tmp_path: Path, model: str) -> None:
    """Through ``threshold-bot review --format json``: a loss whose window's max is 0.80."""
    window = [0.78, 0.8, 0.79, 0.77, 0.8, 0.76] * 4
    history = tmp_path / "runs.jsonl"
    history.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"r{i}",
                    "created_at": f"2026-05-{i + 1:02d}T03:00:00Z",
                    "summary": {"train/loss": v},
                }
            )
            + "\n"
            for i, v in enumerate(window)
        ),
        encoding="utf-8",
    )
    script = tmp_path / "check.sh"
    script.write_text('LOSS_MAX=0.90\ncheck "train/loss <= $LOSS_MAX"\n', encoding="utf-8")
    config = tmp_path / "threshold-bot.yml"
    config.write_text(f"rule:\n  model: {model}\n", encoding="utf-8")
    args = ["review", "--file", script, "--history", history, "--config", config]
    result = CliRunner().invoke(app, [*map(str, args), "--format", "json"])
    assert result.exit_code == 0, result.output
    (gate,) = json.loads(result.stdout)["gates"]
    assert gate["window_max"] == 0.8
    assert gate["recomputed"] == 0.84
