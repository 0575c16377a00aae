"""The history source interface and its typed errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from bot.core.history.runs import RunFetcher
from bot.core.models import History, SourceSpec


class HistoryError(Exception):
    """Base class of every history failure; ``str(err)`` is shown to users."""


class HistoryUnavailable(HistoryError):
    """The source could not be reached or refused us (auth, timeout, 429/5xx, outage)."""


class HistoryNotFound(HistoryError):
    """The source answered, but the project / experiment / file does not exist."""


class BadHistory(HistoryError):
    """The history data is malformed (e.g. a bad line in a history file)."""


class SourceRefused(HistoryError):
    """The operator does not let this installation read the source; it was never requested
    (docs/security.md).  Not retried: only a change of settings or config mends it."""


class HistorySource(Protocol):
    """Anything that turns a ``SourceSpec`` into a ``History``."""

    def fetch(self, spec: SourceSpec) -> History:
        """Return the runs of ``spec``; raise a ``HistoryError`` subclass on failure."""
        ...


@runtime_checkable
class Rebindable(Protocol):
    """A history source that can read the same store through another run fetcher (the run
    cache: an ``actions`` source's fetcher is the installation's GitHub client), with the
    largest artifact such a fetcher may download (the server's ``MAX_ARTIFACT_BYTES``)."""

    max_artifact_bytes: int

    def over(self, upstream: RunFetcher) -> HistorySource:
        """This source, its runs read from ``upstream``."""
        ...


HistoryFactory = Callable[[SourceSpec], HistorySource]
"""Source spec -> the history source that reads it (the App's is the run cache)."""
