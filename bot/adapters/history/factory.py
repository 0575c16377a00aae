"""The App's history sources: ``SourceSpec`` -> ``HistorySource``.

W&B and MLflow specs are read through the run cache in the App's store, so a
review costs one small request when nothing is new.  The wandb and MLflow
clients are heavy to import and start, so they are built on first use.
``file`` specs never come here: the review reads those from the repository.
"""

from __future__ import annotations

import threading

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.settings import Settings
from bot.core.history.sources import HistoryFactory, HistorySource
from bot.core.models import SourceSpec


def source_factory(
    settings: Settings, sessions: sessionmaker[Session] | None = None
) -> HistoryFactory:
    """A factory handing out one shared cached source for every remote spec."""
    built: list[HistorySource] = []
    lock = threading.Lock()

    def factory(spec: SourceSpec) -> HistorySource:
        if spec.kind == "file":
            raise ValueError(f"{spec.describe()}: file sources are read from the repository")
        with lock:
            if not built:
                from bot.adapters.history.sync import cached_source

                built.append(cached_source(settings, sessions))
        return built[0]

    return factory
