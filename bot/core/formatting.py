"""Every number and date as the bot writes them for people: one function per format.

Pure and locale-independent (English month names, ``.`` as decimal point).  Threshold
literals written into files are not display text: ``bot.core.thresholds.edit.format_literal``.
"""

from __future__ import annotations

from datetime import date, datetime

__all__ = [
    "at_decimals",
    "day_month",
    "day_month_year",
    "decimals_range",
    "iso_date",
    "iso_date_time",
    "move",
    "per_run",
    "percent",
    "plural",
    "significant",
    "significant_g",
    "significant_no_exponent",
]

DASH = "—"  # what a missing value is shown as

# --------------------------------------------------------------------------- dates


def day_month_year(moment: date | None) -> str:
    """Day, month and year for tables and phrases: ``30 Jun 2026``; ``—`` for None."""
    return DASH if moment is None else f"{moment.day} {moment:%b %Y}"


def day_month(moment: datetime, reference: datetime | None = None) -> str:
    """Day and month for short sentences: ``30 Jun``; ``30 Jun 2026`` when the year
    differs from ``reference``'s (no reference: never the year)."""
    text = f"{moment.day} {moment:%b}"
    if reference is not None and reference.year != moment.year:
        text += f" {moment.year}"
    return text


def iso_date(moment: date) -> str:
    """The ISO calendar date, for text that machines may read back: ``2026-06-30``."""
    return f"{moment:%Y-%m-%d}"


def iso_date_time(moment: datetime) -> str:
    """Date and time to the second, as given (no time zone shown): ``2026-06-30 08:05:00``."""
    return f"{moment:%Y-%m-%d %H:%M:%S}"


# --------------------------------------------------------------------------- counts


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word``, with an ``s`` unless it is 1: ``1 run``, ``0 runs``, ``2 runs``;
    ``many`` is the plural when it is not ``word`` + ``s`` (``1 entry``, ``2 entries``)."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def percent(fraction: float) -> str:
    """A fraction as people write the percentage: ``0.05`` → ``5%``, ``0.025`` → ``2.5%``."""
    return f"{fraction * 100:g}%"


# --------------------------------------------------------------------------- numbers


def _repr_decimals(value: float) -> int:
    """Decimals of the shortest text that reads back as ``value``: ``0.01764`` → 5,
    ``283.0`` → 0, ``1e-05`` → 5."""
    text = repr(float(value))
    if "e" in text or "E" in text:
        mantissa, exponent = text.lower().split("e")
        digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return max(0, digits - int(exponent))
    return len(text.split(".")[1].rstrip("0")) if "." in text else 0


def at_decimals(value: float | None, decimals: int, *, extra: int = 12) -> str:
    """``value`` with at least ``decimals`` decimals, and up to ``extra`` more when needed to
    show it exactly: ``at_decimals(0.5, 2) == "0.50"``, ``at_decimals(0.01764, 3) ==
    "0.01764"``, ``at_decimals(283.0, 0) == "283"``; ``—`` for None."""
    if value is None:
        return DASH
    places = min(max(decimals, _repr_decimals(value)), decimals + extra)
    return f"{value:.{places}f}"


def decimals_range(low: float, high: float, decimals: int, *, extra: int = 2) -> str:
    """``low – high`` at one shared number of decimals: at least ``decimals``, up to ``extra``
    more to show both exactly: ``decimals_range(0.0123, 0.018, 3) == "0.0123 – 0.0180"``."""
    places = min(max(decimals, _repr_decimals(low), _repr_decimals(high)), decimals + extra)
    return f"{low:.{places}f} – {high:.{places}f}"


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits for sentences: no exponent from 1e-4 up to
    ``10 ** max(digits, 6)`` (integer part written out), exponent beyond:
    ``significant(0.28512) == "0.285"``, ``significant(12345.0) == "12345"``,
    ``significant(1.5e-05) == "1.5e-05"``; ``0`` for zero."""
    if value == 0:
        return "0"
    if 1e-4 <= abs(value) < 10 ** max(digits, 6):
        text = f"{value:.{digits}g}"
        if "e" in text:  # e.g. 1.23e+04: write the integer part out
            return f"{value:.0f}"
        return text
    return f"{value:.{digits}g}"


def significant_no_exponent(value: float, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits for table cells, never with an exponent:
    ``significant_no_exponent(0.54321) == "0.5432"``, ``(123456.0) == "123456"``,
    ``(1.5e-05) == "0.00001500"``; ``0`` for zero."""
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    if "e" in text:
        magnitude = abs(value)
        places = 0 if magnitude >= 1 else digits - 1 - int(f"{magnitude:e}".split("e")[1])
        text = f"{value:.{places}f}"
    return text


def significant_g(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits in Python's ``g`` format (exponent below
    1e-4 and from ``10 ** digits``): ``significant_g(0.58812) == "0.588"``,
    ``significant_g(12345.0) == "1.23e+04"``."""
    return f"{value:.{digits}g}"


def move(before: float, after: float) -> str:
    """``before → after`` in :func:`significant`, with as many digits (3 to 6) as it takes to
    tell them apart: ``move(0.28512, 0.28498) == "0.2851 → 0.285"``."""
    for digits in range(3, 7):
        left, right = significant(before, digits), significant(after, digits)
        if left != right:
            break
    return f"{left} → {right}"


def per_run(slope: float, relative: float | None) -> str:
    """A trend's rate, signed, to 2 significant digits: as a percentage when ``relative``
    (the slope over the level) is known, ``−0.2% per run``; else in the metric's units,
    ``+0.0012 per run``."""
    rate = slope if relative is None else relative * 100
    sign = "−" if rate < 0 else "+"
    unit = "" if relative is None else "%"
    return f"{sign}{significant(abs(rate), 2)}{unit} per run"
