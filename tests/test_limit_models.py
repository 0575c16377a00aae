"""The threshold models' arithmetic (docs/limit-rule.md#models): for every model and every
operator, the limit passes every run of its window, the vectorized limits are the scalar
ones, rounding only loosens, and the absolute bounds hold; examples computed with numpy and
scipy from the test's own windows."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from bot.core.analysis.limit_models import model_limits
from bot.core.analysis.limits import recompute_limit, recompute_limits
from bot.core.limit_model import LimitModel, parse_model
from bot.core.models import LOWER_BOUND_OPS, Op, RuleSettings, passes

OPS: tuple[Op, ...] = (">=", ">", "<=", "<")
MODELS = tuple(
    parse_model(text)
    for text in (
        "minmax",
        "percentile p=5",
        "percentile p=25",
        "zscore k=3",
        "zscore k=3 sigma=std",
        "zscore k=0.5",
        "prediction confidence=99%",
        "prediction confidence=60%",
        "iqr k=1.5",
        "iqr k=0",
    )
)
PROPERTY = settings(deadline=None, max_examples=200)

# values as runs log them (0.613, 283) and arbitrary floats, both signs, zero included
logged = st.integers(-(10**6), 10**6).map(lambda i: i / 1000)
floats = st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=False)
values = st.one_of(logged, floats, st.sampled_from([0.0, 1.0, -1.0]))
windows = st.lists(values, min_size=1, max_size=30)
literals = st.sampled_from(["0.5", "3", "0.001", "120", "1e-3", "0.25"])
allowances = st.sampled_from([0.0, 0.05, 0.2])


def lower(op: Op) -> bool:
    return op in LOWER_BOUND_OPS


def rule_of(model: LimitModel, allowance: float = 0.05) -> RuleSettings:
    return RuleSettings(model=model, allowance=allowance)


def beyond(limit: float, unrounded: float, op: Op) -> bool:
    """Whether ``limit`` is at or beyond ``unrounded`` on the permissive side."""
    return limit <= unrounded if lower(op) else limit >= unrounded


def decimal_percentile(window: list[float], q: float) -> Decimal:
    """The ``q``-th percentile of the runs as written, linear between runs, in decimals."""
    xs = sorted(Decimal(repr(v)) for v in window)
    at = (len(xs) - 1) * Decimal(repr(q)) / 100
    below = int(at)
    above = min(below + 1, len(xs) - 1)
    return xs[below] + (xs[above] - xs[below]) * (at - below)


def unrounded(window: list[float], op: Op, rule: RuleSettings) -> float:
    """The model's limit before rounding: minmax, percentile and iqr in exact decimals, as the
    rule states them (docs/limit-rule.md#rounding); zscore and prediction in floats, moved a
    billionth of the window's scale toward the strict side (their float error)."""
    model, low = rule.model, lower(op)
    with localcontext(Context(prec=2000)):
        spread = Decimal(repr(max(window))) - Decimal(repr(min(window)))
        if model.name in ("minmax", "percentile"):
            p = model.p if model.name == "percentile" else 0.0
            level = decimal_percentile(window, p if low else 100 - p)
            margin = Decimal(repr(rule.allowance)) * (abs(level) if level != 0 else spread)
            return float(level - margin if low else level + margin)
        if model.name == "iqr":
            q1, q3 = decimal_percentile(window, 25), decimal_percentile(window, 75)
            k = Decimal(repr(model.spread))
            return float(q1 - k * (q3 - q1) if low else q3 + k * (q3 - q1))
    array = np.array([window], dtype=np.float64)
    raw = float(model_limits(array, model, low, rule.allowance)[0])
    slack = 1e-9 * max(abs(raw), *(abs(v) for v in window))
    return raw + slack if low else raw - slack


@PROPERTY
@given(
    window=windows,
    model=st.sampled_from(MODELS),
    op=st.sampled_from(OPS),
    literal=literals,
    allowance=allowances,
)
def test_every_model_passes_every_run_of_its_window(
    window: list[float], model: LimitModel, op: Op, literal: str, allowance: float
) -> None:
    rule = rule_of(model, allowance)
    found = recompute_limit(window, op, literal, rule)
    assert found is not None
    limit, _ = found
    assert all(passes(v, op, limit) for v in window), (window, limit)
    assert beyond(limit, unrounded(window, op, rule), op)


@st.composite
def bounds(draw: st.DrawFn) -> tuple[float | None, float | None]:
    low, high = draw(st.one_of(st.none(), values)), draw(st.one_of(st.none(), values))
    if low is not None and high is not None and low > high:
        low, high = high, low
    return low, high


@PROPERTY
@given(
    rows=st.integers(1, 6).flatmap(
        lambda n: st.lists(st.lists(values, min_size=n, max_size=n), min_size=1, max_size=6)
    ),
    model=st.sampled_from(MODELS),
    op=st.sampled_from(OPS),
    literal=literals,
    allowance=allowances,
    limits=bounds(),
)
def test_the_vectorized_limits_are_the_scalar_ones_row_by_row(
    rows: list[list[float]],
    model: LimitModel,
    op: Op,
    literal: str,
    allowance: float,
    limits: tuple[float | None, float | None],
) -> None:
    low, high = limits
    rule = rule_of(model.model_copy(update={"min_limit": low, "max_limit": high}), allowance)
    got, decimals = recompute_limits(np.array(rows, dtype=np.float64), op, literal, rule)
    for row, limit, places in zip(rows, got, decimals, strict=True):
        assert (float(limit), int(places)) == recompute_limit(row, op, literal, rule), row


@PROPERTY
@given(
    series=st.lists(values, min_size=2, max_size=40),
    length=st.integers(1, 12),
    model=st.sampled_from(MODELS),
    op=st.sampled_from(OPS),
    literal=literals,
)
def test_the_vectorized_limits_of_sliding_windows_are_the_scalar_ones(
    series: list[float], length: int, model: LimitModel, op: Op, literal: str
) -> None:
    # the backtest's windows: strided views of one series, not copies
    length = min(length, len(series))
    views = np.lib.stride_tricks.sliding_window_view(np.array(series), length)
    got, decimals = recompute_limits(views, op, literal, rule_of(model))
    for start, (limit, places) in enumerate(zip(got, decimals, strict=True)):
        row = series[start : start + length]
        assert (float(limit), int(places)) == recompute_limit(row, op, literal, rule_of(model))


@PROPERTY
@given(
    window=windows,
    model=st.sampled_from(MODELS),
    op=st.sampled_from(OPS),
    literal=literals,
    limits=bounds(),
)
def test_a_limit_stays_within_its_absolute_bounds(
    window: list[float],
    model: LimitModel,
    op: Op,
    literal: str,
    limits: tuple[float | None, float | None],
) -> None:
    low, high = limits
    rule = rule_of(LimitModel(name=model.name, min_limit=low, max_limit=high))
    found = recompute_limit(window, op, literal, rule)
    assert found is not None
    limit = found[0]
    assert low is None or limit >= low
    assert high is None or limit <= high
    within = all(passes(v, op, limit) for v in window)
    bound = low if lower(op) else high
    # clipped only toward a bound: a limit that fails a run is the bound on the gate's side
    assert within or limit == bound


@PROPERTY
@given(
    window=windows,
    op=st.sampled_from(OPS),
    literal=literals,
    limits=bounds().filter(lambda b: b != (None, None)),
)
def test_absolute_alone_is_the_bound_on_the_gates_side(
    window: list[float], op: Op, literal: str, limits: tuple[float | None, float | None]
) -> None:
    low, high = limits
    rule = rule_of(LimitModel(name="absolute", min_limit=low, max_limit=high))
    found = recompute_limit(window, op, literal, rule)
    assert found is not None
    limit = found[0]
    bound = low if lower(op) else high
    if bound is not None:
        assert limit == bound
    else:  # no bound on this side: the window's extreme, rounded permissively, then bounded
        other = high if lower(op) else low
        extreme_rule = rule_of(LimitModel(), allowance=0.0)
        plain = recompute_limit(window, op, literal, extreme_rule)
        assert plain is not None
        expected = (
            plain[0]
            if other is None
            else (min(plain[0], other) if lower(op) else max(plain[0], other))
        )
        assert limit == expected
        assert all(passes(v, op, limit) for v in window)


# ------------------------------------------------------------------ examples, by hand

WINDOW = [0.62, 0.64, 0.63, 0.61, 0.65, 0.63, 0.62, 0.64, 0.66, 0.63, 0.62, 0.60]
NOISY = [*WINDOW, 0.45]  # one bad run


def floor_at(value: float, places: int) -> float:
    return float(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), ROUND_FLOOR))


def ceil_at(value: float, places: int) -> float:
    return float(Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), ROUND_CEILING))


def limit_of(window: list[float], op: Op, text: str, allowance: float = 0.05) -> float:
    found = recompute_limit(window, op, "0.56", rule_of(parse_model(text), allowance))
    assert found is not None
    return found[0]


def mad_sigma(window: list[float]) -> float:
    x = np.array(window)
    return 1.4826 * float(np.median(np.abs(x - np.median(x))))


def test_zscore_is_the_mean_less_k_robust_sigmas_rounded_down() -> None:
    x = np.array(WINDOW)
    expected = float(x.mean()) - 3 * mad_sigma(WINDOW)
    assert expected < x.min()  # the statistic itself, not the clamp, sets this limit
    assert limit_of(WINDOW, ">=", "zscore") == floor_at(expected, 2)
    upper = float(x.mean()) + 3 * mad_sigma(WINDOW)
    assert limit_of(WINDOW, "<=", "zscore k=3") == ceil_at(upper, 2)


def test_zscore_with_the_sample_deviation() -> None:
    x = np.array(WINDOW)
    expected = float(x.mean()) - 2 * float(x.std(ddof=1))
    assert limit_of(WINDOW, ">=", "zscore k=2 sigma=std") == floor_at(min(expected, x.min()), 2)


def test_a_bad_run_keeps_its_limit_below_it_whatever_the_model() -> None:
    # the guarantee: no model fails a run of its own window, so the outlier sets the limit
    for text in ("zscore", "iqr", "prediction"):
        assert limit_of(NOISY, ">=", text) <= 0.45
    assert limit_of(NOISY, ">=", "zscore") == floor_at(0.45, 2)


def test_percentile_takes_the_pth_percentile_on_the_failing_side_with_the_allowance() -> None:
    q05, q95 = np.percentile(NOISY, [5, 95])
    assert limit_of(NOISY, ">=", "percentile p=5") == floor_at(min(q05 * 0.95, 0.45), 2)
    assert limit_of(NOISY, "<=", "percentile p=5") == ceil_at(q95 * 1.05, 2)
    q20 = float(np.percentile(WINDOW, 20))
    expected = floor_at(min(q20 * (1 - 0.01), min(WINDOW)), 2)
    assert limit_of(WINDOW, ">=", "percentile p=20", allowance=0.01) == expected


def test_prediction_is_the_one_sided_t_interval_for_the_next_run() -> None:
    x, n = np.array(WINDOW), len(WINDOW)
    half = stats.t.ppf(0.95, n - 1) * x.std(ddof=1) * np.sqrt(1 + 1 / n)
    assert limit_of(WINDOW, ">=", "prediction confidence=95%") == floor_at(
        min(float(x.mean() - half), x.min()), 2
    )
    assert limit_of(WINDOW, "<", "prediction confidence=0.95") == ceil_at(
        max(float(x.mean() + half), x.max()), 2
    )


def test_iqr_is_k_interquartile_ranges_beyond_the_quartile() -> None:
    # in decimal, as the runs are written: Q3 + 3·IQR is 0.70, where binary gives 0.70…01
    q1, q3 = (Decimal(repr(float(q))) for q in np.percentile(WINDOW, [25, 75]))
    low, high = q1 - Decimal("1.5") * (q3 - q1), q3 + 3 * (q3 - q1)
    assert high == Decimal("0.70")
    assert limit_of(WINDOW, ">=", "iqr") == floor_at(min(float(low), 0.60), 2)
    assert limit_of(WINDOW, "<=", "iqr k=3") == ceil_at(max(float(high), 0.66), 2)


def test_minmax_is_unchanged() -> None:
    assert limit_of(WINDOW, ">=", "minmax") == floor_at(0.60 * 0.95, 2)
    assert limit_of(WINDOW, "<=", "minmax") == ceil_at(0.66 * 1.05, 2)


def test_a_constant_window_of_a_strict_gate_moves_one_step() -> None:
    for text in ("zscore", "iqr", "prediction", "percentile p=5"):
        assert limit_of([0.6] * 8, ">", text, allowance=0.0) == 0.59
        assert limit_of([0.6] * 8, "<", text, allowance=0.0) == 0.61


@pytest.mark.parametrize(
    ("text", "op", "expected"),
    [
        ("absolute min_limit=0.5", ">=", 0.5),
        ("absolute min_limit=0.5", "<=", ceil_at(0.66, 2)),  # no ceiling: the window's max
        ("absolute max_limit=0.7", "<", 0.7),
        ("minmax max_limit=0.5", ">=", 0.5),  # 0.57 by minmax, clipped down: more permissive
        ("minmax min_limit=0.61", ">=", 0.61),  # stricter: fails the run at 0.60, as written
        ("zscore min_limit=0.1", ">=", None),  # within bounds: the model's own
    ],
)
def test_absolute_bounds(text: str, op: Op, expected: float | None) -> None:
    limit = limit_of(WINDOW, op, text)
    own = limit_of(WINDOW, op, text.split()[0] if text.startswith("zscore") else "minmax")
    assert limit == (own if expected is None else expected)


def test_a_bound_keeps_the_decimals_it_is_written_with() -> None:
    window = [290.0, 300.0, 295.0]
    rule = rule_of(parse_model("minmax max_limit=300"))
    assert recompute_limit(window, "<=", "283", rule) == (300.0, 0)
    rule = rule_of(parse_model("minmax max_limit=300.5"))
    assert recompute_limit(window, "<=", "283", rule) == (300.5, 1)
