"""``threshold-bot sync``: fetch W&B / MLflow runs into the run cache, with a progress bar."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.exc import SQLAlchemyError

from bot.adapters.history.sync import REMOTE_KINDS, cached_source, parse_wandb_path, sync_sources
from bot.adapters.settings import SettingsError, load_settings
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.schema import SchemaError
from bot.cli.errors import fail
from bot.core.config import ConfigError, parse_config
from bot.core.models import SourceSpec


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
    except (ValueError, ConfigError, SettingsError, SchemaError, SQLAlchemyError) as exc:
        # SQLAlchemyError: a malformed or unreachable database URL
        where = "the run cache: " if isinstance(exc, SQLAlchemyError) else ""
        fail(f"{where}{str(exc).splitlines()[0]}")
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
