"""Syncing remote sources into the run cache: for the App's re-check and the CLI.

``sync_sources`` syncs many sources and reports per source what changed (the
re-check re-reviews PRs whose sources report ``changed``; ``threshold-bot sync`` shows
it); ``wandb_source`` and ``mlflow_source`` build the sources of the settings, which the
command line's commands read through ``bot.cli.histories``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from bot.adapters.history.actions_source import ActionsAPI, ActionsSource
from bot.adapters.history.mlflow_source import MlflowSource
from bot.adapters.history.wandb_source import WandbSource, with_entity
from bot.adapters.settings import Settings
from bot.core.history.runs import Progress as ProgressCallback
from bot.core.history.runs import SourceRun
from bot.core.history.series import RunSeries, SeriesFetcher
from bot.core.history.sources import HistoryError
from bot.core.models import SourceSpec

if TYPE_CHECKING:  # the run cache is the App's store (the app extra): imported where used
    from sqlalchemy.orm import Session, sessionmaker

    from bot.adapters.history.cache import CachedSource, SyncResult

SpecProgress = Callable[[SourceSpec, int, int | None], None]
"""Called as ``progress(spec, runs_read, runs_total_or_None)`` during a sync."""

REMOTE_KINDS = frozenset({"wandb", "mlflow"})


class RemoteSources:
    """A run fetcher that dispatches on ``spec.kind`` to the W&B or MLflow source."""

    def __init__(self, wandb: WandbSource, mlflow: MlflowSource) -> None:
        self.wandb = wandb
        self.mlflow = mlflow

    def fetch_runs(
        self,
        spec: SourceSpec,
        *,
        created_since: datetime | None = None,
        run_ids: Sequence[str] = (),
        progress: ProgressCallback | None = None,
    ) -> list[SourceRun]:
        """Runs of ``spec`` from the source of its kind (``ValueError`` for a file source)."""
        upstream: WandbSource | MlflowSource
        if spec.kind == "wandb":
            upstream = self.wandb
        elif spec.kind == "mlflow":
            upstream = self.mlflow
        else:
            raise ValueError(f"not a remote source: {spec.describe()}")
        return upstream.fetch_runs(
            spec, created_since=created_since, run_ids=run_ids, progress=progress
        )

    def fetch_series(
        self, spec: SourceSpec, wanted: Mapping[str, Sequence[str]]
    ) -> Iterator[tuple[str, RunSeries]]:
        """Per-step series from the source of ``spec``'s kind, if it reads them (W&B)."""
        upstream = {"wandb": self.wandb, "mlflow": self.mlflow}.get(spec.kind)
        if isinstance(upstream, SeriesFetcher):
            yield from upstream.fetch_series(spec, wanted)


def wandb_source(settings: Settings) -> WandbSource:
    """The W&B source configured by the server settings (``WANDB_*``)."""
    key = settings.wandb_api_key.get_secret_value() if settings.wandb_api_key else None
    return WandbSource(
        api_key=key, base_url=settings.wandb_base_url, default_entity=settings.wandb_entity
    )


def mlflow_source(settings: Settings) -> MlflowSource:
    """The MLflow source of the server settings: ``MLFLOW_TRACKING_URI`` (the only server
    given ``MLFLOW_TRACKING_TOKEN``) and the servers of ``MLFLOW_ALLOWED_URIS``."""
    token = settings.mlflow_tracking_token
    return MlflowSource(
        tracking_uri=settings.mlflow_tracking_uri,
        token=token.get_secret_value() if token else None,
        allowed=settings.source_policy().mlflow_uris,
    )


def cached_source(
    settings: Settings, sessions: sessionmaker[Session] | None = None
) -> CachedSource:
    """A cached W&B + MLflow source over the store of ``settings`` (or ``sessions``).

    W&B specs without an entity are cached under ``WANDB_ENTITY``'s, so that changing
    it never mixes two projects' runs, and reviews name the project they read.
    """
    from bot.adapters.history.cache import CachedSource
    from bot.adapters.store.db import init_db, make_engine

    if sessions is None:
        sessions = init_db(make_engine(settings.database_url))
    upstream = RemoteSources(wandb_source(settings), mlflow_source(settings))
    return CachedSource(
        sessions,
        upstream,
        lambda spec: with_entity(spec, settings.wandb_entity),
        max_artifact_bytes=settings.max_artifact_bytes,
    )


def sync_sources(
    source: CachedSource,
    specs: Iterable[SourceSpec],
    *,
    full: bool = False,
    progress: SpecProgress | None = None,
    clients: Mapping[str, ActionsAPI] | None = None,
) -> dict[str, SyncResult]:
    """Sync every distinct remote source; keyed by ``spec.key()``.

    An ``actions`` source (its ``repo`` set) is synced through ``source`` with the GitHub
    client ``clients`` maps its key to, its artifacts downloaded up to the cache's
    ``max_artifact_bytes``; one without a client is skipped, as file sources are.  A source
    that fails gets a result with ``error`` set (and ``changed`` False) instead of stopping
    the others.
    """
    from bot.adapters.history.cache import SyncResult

    results: dict[str, SyncResult] = {}
    for spec in specs:
        key = spec.key()
        client = (clients or {}).get(key) if spec.kind == "actions" else None
        if (spec.kind not in REMOTE_KINDS and client is None) or key in results:
            continue
        report = None if progress is None else _bind(progress, spec)
        reader = (
            source
            if client is None
            else source.over(ActionsSource(client, source.max_artifact_bytes))
        )
        try:
            results[key] = reader.sync(spec, full=full, progress=report)
        except HistoryError as exc:
            results[key] = SyncResult(spec.describe(), error=str(exc))
    return results


def _bind(progress: SpecProgress, spec: SourceSpec) -> ProgressCallback:
    return lambda read, total: progress(spec, read, total)


def parse_wandb_path(path: str, default_entity: str | None = None) -> SourceSpec:
    """``ENTITY/PROJECT`` (or ``PROJECT`` with a default entity) as a W&B source."""
    parts = path.strip().strip("/").split("/")
    if len(parts) == 2 and all(parts):
        return SourceSpec(kind="wandb", entity=parts[0], project=parts[1])
    if len(parts) == 1 and parts[0] and default_entity:
        return SourceSpec(kind="wandb", entity=default_entity, project=parts[0])
    raise ValueError(
        f"invalid W&B project {path[:100]!r}: give ENTITY/PROJECT, or PROJECT with WANDB_ENTITY set"
    )
