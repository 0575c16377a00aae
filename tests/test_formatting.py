"""Every number and date format the bot writes for people, with the expected text written out."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from bot.core.formatting import (
    at_decimals,
    day_month,
    day_month_year,
    decimals_range,
    iso_date,
    iso_date_time,
    move,
    percent,
    plural,
    significant,
    significant_g,
    significant_no_exponent,
)

T0 = datetime(2026, 6, 30, 8, 5, 9, tzinfo=UTC)

# --------------------------------------------------------------------------- dates


def test_day_month_year() -> None:
    assert day_month_year(T0) == "30 Jun 2026"
    assert day_month_year(date(2026, 1, 2)) == "2 Jan 2026"  # no leading zero
    assert day_month_year(None) == "—"


def test_day_month_names_the_year_only_when_it_differs() -> None:
    assert day_month(T0) == "30 Jun"
    assert day_month(T0, datetime(2026, 12, 31, tzinfo=UTC)) == "30 Jun"
    assert day_month(T0, datetime(2027, 1, 2, tzinfo=UTC)) == "30 Jun 2026"
    assert day_month(datetime(2026, 3, 5, tzinfo=UTC)) == "5 Mar"


def test_iso_dates() -> None:
    assert iso_date(T0) == "2026-06-30"
    assert iso_date(date(2026, 1, 2)) == "2026-01-02"
    assert iso_date_time(T0) == "2026-06-30 08:05:09"


# --------------------------------------------------------------------------- counts


@pytest.mark.parametrize(
    ("count", "text"), [(0, "0 runs"), (1, "1 run"), (2, "2 runs"), (30, "30 runs")]
)
def test_plural(count: int, text: str) -> None:
    assert plural(count, "run") == text


def test_plural_of_a_phrase() -> None:
    assert plural(1, "finished run") == "1 finished run"
    assert plural(3, "gate") == "3 gates"


@pytest.mark.parametrize(("count", "text"), [(0, "0 entries"), (1, "1 entry"), (2, "2 entries")])
def test_plural_with_its_own_plural_form(count: int, text: str) -> None:
    assert plural(count, "entry", "entries") == text


@pytest.mark.parametrize(
    ("fraction", "text"), [(0.05, "5%"), (0.025, "2.5%"), (0.0, "0%"), (1.0, "100%")]
)
def test_percent(fraction: float, text: str) -> None:
    assert percent(fraction) == text


# --------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("value", "decimals", "text"),
    [
        (0.5, 2, "0.50"),  # the literal's decimals
        (283.0, 0, "283"),
        (1e-05, 2, "0.00001"),  # more decimals to show the value exactly
        (0.01764, 3, "0.01764"),
        (-0.25, 1, "-0.25"),
        (None, 2, "—"),
    ],
)
def test_at_decimals(value: float | None, decimals: int, text: str) -> None:
    assert at_decimals(value, decimals) == text


def test_at_decimals_caps_the_extra_decimals() -> None:
    assert at_decimals(0.123456, 2, extra=2) == "0.1235"
    assert at_decimals(0.1 + 0.2, 2) == "0.30000000000000"  # repr 0.30000000000000004: capped


def test_decimals_range_shares_one_number_of_decimals() -> None:
    assert decimals_range(0.0123, 0.018, 3) == "0.0123 – 0.0180"
    assert decimals_range(291.5, 302.0, 0) == "291.5 – 302.0"
    assert decimals_range(0.52894, 0.55351, 2) == "0.5289 – 0.5535"  # at most 2 more
    assert decimals_range(1.0, 2.0, 0) == "1 – 2"


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (0.28512, 3, "0.285"),
        (268.6, 3, "269"),
        (12345.0, 3, "12345"),  # integer part written out, not 1.23e+04
        (-0.0012345, 3, "-0.00123"),
        (0.0, 3, "0"),
        (0.28512, 6, "0.28512"),
        (1.5e-05, 3, "1.5e-05"),  # below 1e-4: exponent
        (12345678.0, 3, "1.23e+07"),  # from 10**6: exponent
    ],
)
def test_significant(value: float, digits: int, text: str) -> None:
    assert significant(value, digits) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.54321, "0.5432"),
        (1853.2, "1853"),
        (123456.0, "123456"),
        (12345678.0, "12345678"),
        (0.0, "0"),
        (1.5e-05, "0.00001500"),
        (-0.0103, "-0.0103"),
    ],
)
def test_significant_no_exponent(value: float, text: str) -> None:
    assert significant_no_exponent(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.58812, "0.588"), (264.3, "264"), (12345.0, "1.23e+04"), (0.0, "0"), (-0.5, "-0.5")],
)
def test_significant_g(value: float, text: str) -> None:
    assert significant_g(value) == text


def test_move_shows_digits_until_the_values_differ() -> None:
    assert move(0.285, 0.238) == "0.285 → 0.238"
    assert move(0.28512, 0.28498) == "0.2851 → 0.285"
    assert move(264.0, 297.0) == "264 → 297"
    assert move(1.0, 1.0) == "1 → 1"  # equal at 6 digits: given up there
