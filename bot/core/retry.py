"""Which failures are worth retrying, and how long to wait: pure functions.

Transient: GitHub 5xx, 429 and secondary rate limits, network errors, a history
source that is unavailable, or an explicit ``TransientError``.  Everything else is
permanent: retrying would fail the same way.
"""

from __future__ import annotations

import random

from bot.core.history.sources import HistoryUnavailable


class TransientError(Exception):
    """Raise from a handler to ask for a retry later (the cause is worth retrying)."""


class PermanentError(Exception):
    """Raise from a handler to fail the delivery at once, without retries."""


_RATE_LIMIT_WORDS = ("rate limit", "abuse detection")


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the work that raised ``exc`` may succeed."""
    if isinstance(exc, PermanentError):
        return False
    if isinstance(exc, TransientError | HistoryUnavailable | ConnectionError | TimeoutError):
        return True
    name = type(exc).__name__
    if name in ("RateLimitExceededException", "ConnectTimeout", "ReadTimeout", "Timeout"):
        return True
    if name in ("ConnectionError", "ChunkedEncodingError"):  # requests / urllib3
        return True
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        if status >= 500 or status == 429:
            return True
        if status == 403:
            return any(word in str(exc).lower() for word in _RATE_LIMIT_WORDS)
    return False


def backoff_delay(
    attempt: int, base: float, cap: float, jitter: float = 0.1, rng: random.Random | None = None
) -> float:
    """Seconds to wait before attempt ``attempt + 1``: ``base * 2**(attempt-1)``, capped.

    A random ``± jitter`` fraction spreads retries of many deliveries apart.
    """
    delay = min(cap, base * 2 ** max(attempt - 1, 0))
    spread: float = (rng or random).uniform(-jitter, jitter)
    return float(max(0.0, delay * (1 + spread)))
