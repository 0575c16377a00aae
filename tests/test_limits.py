"""The limit rule (contract section 3): decimals, decimal-safe rounding, zero and strict cases."""

from __future__ import annotations

import math
from decimal import Context, Decimal, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.analysis.limits import (
    decimals_of,
    limit_decimals,
    looser_by,
    looser_than_rule,
    recompute_limit,
    rounding_step,
)
from bot.core.models import Op, RuleSettings, passes

RULE = RuleSettings()
OPS: tuple[Op, ...] = (">=", ">", "<=", "<")


@pytest.mark.parametrize(
    ("literal", "decimals"),
    [
        ("0.56", 2),
        ("283", 0),
        ("1e-3", 3),
        ("1.5e-3", 4),
        ("2e3", 0),
        ("-0.25", 2),
        (".5", 1),
        ("5.", 0),
        ("0.040", 3),
        (" 7.10 ", 2),
    ],
)
def test_decimals_of(literal: str, decimals: int) -> None:
    assert decimals_of(literal) == decimals


@pytest.mark.parametrize("literal", ["abc", "", "nan", "inf", "0x10"])
def test_decimals_of_rejects_non_numbers(literal: str) -> None:
    with pytest.raises(ValueError, match="literal"):
        decimals_of(literal)


def test_limit_decimals_takes_the_larger_of_literal_and_significant_digits() -> None:
    assert limit_decimals(0.50274, "0.56") == 2
    assert limit_decimals(282.03, "283") == 0  # 2 significant digits need none
    assert limit_decimals(0.0189, "0.040") == 3
    assert limit_decimals(0.0189, "0.1") == 3
    assert limit_decimals(0.50274, "0.56", significant_digits=3) == 3
    assert limit_decimals(0.0, "0.5") == 1
    assert limit_decimals(-0.00123, "0") == 4


def test_rounding_is_decimal_safe() -> None:
    # binary 0.29 is 0.28999999999999998...; 0.29 * 100 is 28.999999999999996
    assert math.floor(0.29 * 100) / 100 == 0.28  # the artefact being avoided
    exact = RuleSettings(allowance=0)  # the limit is the extreme value, rounded
    assert recompute_limit([0.29, 0.4], ">=", "0.00", exact) == (0.29, 2)
    assert recompute_limit([0.57, 0.4], "<=", "0.00", exact) == (0.57, 2)
    assert recompute_limit([0.50000000001], ">=", "0.00", exact) == (0.5, 2)
    assert recompute_limit([0.0189], "<=", "0.000", exact) == (0.019, 3)
    assert recompute_limit([282.03], "<=", "0", exact) == (283.0, 0)
    assert recompute_limit([-1.001], ">=", "0.00", exact) == (-1.01, 2)  # down: away from 0
    assert recompute_limit([-1.009], "<=", "0.00", exact) == (-1.0, 2)  # up: toward 0
    zero = recompute_limit([-0.0], ">=", "0", RULE)
    assert zero == (0.0, 0) and math.copysign(1.0, zero[0]) == 1.0  # no negative zero


def test_rounding_step() -> None:
    assert rounding_step(2) == 0.01
    assert rounding_step(0) == 1.0
    assert rounding_step(3) == 0.001


def test_contract_examples() -> None:
    # min 0.5292 → 0.5292 - 0.05·0.5292 = 0.50274 → down at 2 decimals
    assert recompute_limit([0.61, 0.5292, 0.58], ">=", "0.56", RULE) == (0.50, 2)
    # max 268.6 → 282.03 → up at 0 decimals
    assert recompute_limit([250.0, 268.6, 262.4], "<=", "283", RULE) == (283.0, 0)
    # max 0.0180 → 0.0189 → up at 3 decimals (literal 3, two significant digits 3)
    assert recompute_limit([0.0180, 0.0123], "<=", "0.040", RULE) == (0.019, 3)


def test_empty_window_has_no_limit() -> None:
    assert recompute_limit([], ">=", "0.5", RULE) is None
    assert recompute_limit([], "<", "0.5", RULE) is None


def test_negative_values() -> None:
    losses = [-2.0, -1.5, -1.8]
    # upper: max -1.5 + 0.05·1.5 = -1.425 → up at 1 decimal
    assert recompute_limit(losses, "<=", "-1", RULE) == (-1.4, 1)
    # lower: min -2.0 - 0.05·2.0 = -2.1 → already on the grid
    assert recompute_limit(losses, ">=", "-1", RULE) == (-2.1, 1)


def test_zero_minimum_takes_the_allowance_from_the_spread() -> None:
    values = [0.0, 0.4, 0.2]
    # spread 0.4 → allowance 0.05·0.4 = 0.02 below 0, shown to 2 significant digits
    for op in (">=", ">"):
        limit = recompute_limit(values, op, "0", RULE)
        assert limit == (-0.02, 3)
        assert all(passes(v, op, limit[0]) for v in values)


def test_zero_maximum_takes_the_allowance_from_the_spread() -> None:
    values = [-3.0, 0.0, -1.0]
    assert recompute_limit(values, "<=", "0", RULE) == (0.15, 2)


def test_all_zero_window() -> None:
    zeros = [0.0, 0.0, 0.0]
    assert recompute_limit(zeros, ">=", "0", RULE) == (0.0, 0)
    assert recompute_limit(zeros, "<=", "0.5", RULE) == (0.0, 1)
    # strict gates move one step (at the literal's decimals) to let a run at 0 pass
    assert recompute_limit(zeros, ">", "0", RULE) == (-1.0, 0)
    assert recompute_limit(zeros, ">", "0.5", RULE) == (-0.1, 1)
    assert recompute_limit(zeros, "<", "0.05", RULE) == (0.01, 2)


def test_strict_gate_exactly_on_the_extreme_moves_one_step() -> None:
    exact = RuleSettings(allowance=0)
    # two significant digits of 0.5 / 0.7 are 2 decimals: one step is 0.01
    assert recompute_limit([0.5, 0.7], ">=", "0.5", exact) == (0.5, 2)
    assert recompute_limit([0.5, 0.7], ">", "0.5", exact) == (0.49, 2)
    assert recompute_limit([0.5, 0.7], "<=", "0.5", exact) == (0.7, 2)
    assert recompute_limit([0.5, 0.7], "<", "0.5", exact) == (0.71, 2)


def test_looser_than_rule_is_exact_at_one_step() -> None:
    assert 0.50 - 0.49 > 0.01  # float subtraction would call one step "more than one"
    assert not looser_than_rule(0.49, 0.50, 2, ">=")
    assert looser_than_rule(0.48, 0.50, 2, ">=")
    assert not looser_than_rule(0.55, 0.50, 2, ">=")  # stricter is never looser
    assert not looser_than_rule(284, 283, 0, "<")
    assert looser_than_rule(285, 283, 0, "<=")
    assert looser_by(0.48, 0.50, ">=") == 0.02
    assert looser_by(280, 283, "<=") == -3


# --------------------------------------------------------------------------- properties

# subnormal metric values do not occur; near them a float cannot hold the rounding grid
finite = st.floats(
    min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False, allow_subnormal=False
)
values_strategy = st.lists(
    st.one_of(
        finite, st.just(0.0), st.floats(min_value=-1e-6, max_value=1e-6, allow_subnormal=False)
    ),
    min_size=1,
    max_size=30,
)
literal_strategy = st.builds(
    lambda number, decimals: f"{number:.{decimals}f}",
    st.floats(min_value=-1000, max_value=1000),
    st.integers(min_value=0, max_value=6),
)
rule_strategy = st.builds(
    RuleSettings,
    max_allowance=st.just(0.5),  # over the default cap of 25%, as a config may allow
    allowance=st.floats(min_value=0, max_value=0.5),
    significant_digits=st.integers(min_value=1, max_value=4),
)


@settings(max_examples=400, deadline=None)
@given(values_strategy, st.sampled_from(OPS), literal_strategy, rule_strategy)
def test_recomputed_limit_never_fails_its_own_window(
    values: list[float], op: Op, literal: str, rule: RuleSettings
) -> None:
    result = recompute_limit(values, op, literal, rule)
    assert result is not None
    limit, decimals = result
    assert decimals >= decimals_of(literal)
    assert all(passes(v, op, limit) for v in values), (values, op, literal, limit)


def unrounded_rule(values: list[float], op: Op, allowance: float) -> float:
    """The rule before rounding, computed exactly: ``min - allowance·|min|`` for a lower bound,
    ``max + allowance·|max|`` for an upper one; at 0 the allowance is taken of the spread."""
    with localcontext(Context(prec=2000)):
        low, high = Decimal(repr(min(values))), Decimal(repr(max(values)))
        a = Decimal(repr(allowance))
        if op in (">=", ">"):
            return float(low - a * (abs(low) if low != 0 else high - low)) + 0.0
        return float(high + a * (abs(high) if high != 0 else high - low)) + 0.0


def test_unrounded_rule_of_the_contract_examples() -> None:
    assert unrounded_rule([0.61, 0.5292, 0.58], ">=", 0.05) == 0.50274
    assert unrounded_rule([250.0, 268.6, 262.4], "<=", 0.05) == 282.03
    assert unrounded_rule([0.0, 0.4, 0.2], ">=", 0.05) == -0.02


@settings(max_examples=400, deadline=None)
@given(values_strategy, st.sampled_from(OPS), literal_strategy, rule_strategy)
def test_rounding_never_tightens(
    values: list[float], op: Op, literal: str, rule: RuleSettings
) -> None:
    result = recompute_limit(values, op, literal, rule)
    unrounded = unrounded_rule(values, op, rule.allowance)
    assert result is not None
    limit, decimals = result
    # at most one rounding step, plus one more for a strict gate landing on the extreme
    reach = Decimal(2) * Decimal(1).scaleb(-decimals)
    if op in (">=", ">"):
        assert limit <= unrounded
        assert Decimal(repr(unrounded)) - Decimal(repr(limit)) <= reach
    else:
        assert limit >= unrounded
        assert Decimal(repr(limit)) - Decimal(repr(unrounded)) <= reach


def test_non_finite_values_are_ignored() -> None:
    assert recompute_limit([0.6, float("nan"), float("-inf")], ">=", "0.5", RULE) == (0.57, 2)
    assert recompute_limit([float("nan")], ">=", "0.5", RULE) is None
