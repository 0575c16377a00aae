"""Syncing remote sources into the run cache: for the App's re-check and the CLI.

``sync_sources`` syncs many sources and reports per source what changed (the
re-check re-reviews PRs whose sources report ``changed``); ``sync_command`` is
``threshold-bot sync``; ``wandb_history`` serves ``review --wandb ENTITY/PROJECT``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.history.cache import CachedSource, SyncResult
from bot.adapters.history.mlflow_source import MlflowSource
from bot.adapters.history.wandb_source import WandbSource, with_entity
from bot.adapters.settings import Settings, SettingsError, load_settings
from bot.adapters.store.db import init_db, make_engine
from bot.core.config import ConfigError, parse_config
from bot.core.history.runs import Progress as ProgressCallback
from bot.core.history.runs import SourceRun
from bot.core.history.sources import HistoryError
from bot.core.models import History, SourceSpec

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


def wandb_source(settings: Settings) -> WandbSource:
    """The W&B source configured by the server settings (``WANDB_*``)."""
    key = settings.wandb_api_key.get_secret_value() if settings.wandb_api_key else None
    return WandbSource(
        api_key=key, base_url=settings.wandb_base_url, default_entity=settings.wandb_entity
    )


def cached_source(
    settings: Settings, sessions: sessionmaker[Session] | None = None
) -> CachedSource:
    """A cached W&B + MLflow source over the store of ``settings`` (or ``sessions``).

    W&B specs without an entity are cached under ``WANDB_ENTITY``'s, so that changing
    it never mixes two projects' runs, and reviews name the project they read.
    """
    if sessions is None:
        sessions = init_db(make_engine(settings.database_url))
    upstream = RemoteSources(wandb_source(settings), MlflowSource())
    return CachedSource(sessions, upstream, lambda spec: with_entity(spec, settings.wandb_entity))


def sync_sources(
    source: CachedSource,
    specs: Iterable[SourceSpec],
    *,
    full: bool = False,
    progress: SpecProgress | None = None,
) -> dict[str, SyncResult]:
    """Sync every distinct remote source; keyed by ``spec.key()``.

    File sources are skipped.  A source that fails gets a result with ``error``
    set (and ``changed`` False) instead of stopping the others.
    """
    results: dict[str, SyncResult] = {}
    for spec in specs:
        key = spec.key()
        if spec.kind not in REMOTE_KINDS or key in results:
            continue
        report = None if progress is None else _bind(progress, spec)
        try:
            results[key] = source.sync(spec, full=full, progress=report)
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
    raise ValueError(f"invalid W&B project {path!r}: expected ENTITY/PROJECT")


def wandb_history(
    path: str,
    *,
    spec: SourceSpec | None = None,
    settings: Settings | None = None,
    cache: bool = False,
) -> History:
    """The history of W&B project ``path`` for ``review --wandb ENTITY/PROJECT``.

    Credentials come from ``WANDB_API_KEY`` / ``WANDB_BASE_URL`` / ``WANDB_ENTITY``
    (environment or ``.env``).  ``spec`` supplies filters and summary keys; with
    ``cache`` the run cache at ``DATABASE_URL`` is used and updated.  Raises
    ``ValueError`` for a malformed path and ``HistoryError`` when W&B fails.
    """
    settings = settings or load_settings()
    target = parse_wandb_path(path, settings.wandb_entity)
    if spec is not None:
        target = spec.model_copy(
            update={"kind": "wandb", "entity": target.entity, "project": target.project}
        )
    if cache:
        return cached_source(settings).fetch(target)
    return wandb_source(settings).fetch(target)


def _specs_from(target: str | None, config: Path | None, entity: str | None) -> list[SourceSpec]:
    specs: list[SourceSpec] = []
    if target:
        specs.append(parse_wandb_path(target, entity))
    if config is not None:
        try:
            text = config.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read {config}: {exc.strerror}") from None
        repo = parse_config(text, str(config))
        specs += [s for s in repo.sources.values() if s.kind in REMOTE_KINDS]
    if not specs:
        raise ValueError("nothing to sync: give ENTITY/PROJECT or --config with W&B/MLflow sources")
    return specs


def sync_command(
    target: Annotated[
        str | None, typer.Argument(help="W&B project as ENTITY/PROJECT.", show_default=False)
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Sync every source of this repository config."),
    ] = None,
    full: Annotated[
        bool, typer.Option("--full", help="Re-read every run (after changing filters).")
    ] = False,
    database_url: Annotated[
        str | None, typer.Option("--database-url", help="SQLAlchemy URL (default DATABASE_URL).")
    ] = None,
) -> None:
    """Sync W&B / MLflow run histories into the local run cache."""
    err = Console(stderr=True)
    try:
        settings = load_settings()
        specs = _specs_from(target, config, settings.wandb_entity)
        url = database_url or settings.database_url
        source = cached_source(settings, init_db(make_engine(url)))
    except (ValueError, ConfigError, SettingsError, SQLAlchemyError) as exc:
        # SQLAlchemyError: a malformed or unreachable database URL
        where = "the run cache: " if isinstance(exc, SQLAlchemyError) else ""
        print(f"error: {where}{str(exc).splitlines()[0]}", file=sys.stderr)
        raise typer.Exit(2) from None
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as bar:
        tasks = {s.key(): bar.add_task(s.describe(), total=None) for s in specs}

        def advance(spec: SourceSpec, read: int, total: int | None) -> None:
            bar.update(tasks[spec.key()], completed=read, total=total)

        results = sync_sources(source, specs, full=full, progress=advance)
        for key, result in results.items():
            bar.update(tasks[key], total=result.total, completed=result.total)
    failed = False
    for result in results.values():
        if result.error is not None:
            failed = True
            print(f"{result.source}: FAILED: {result.error}", file=sys.stderr)
        else:
            print(
                f"{result.source}: {result.new} new, {result.updated} updated, "
                f"{result.removed} removed, {result.total} cached"
            )
    if failed:
        raise typer.Exit(1)
