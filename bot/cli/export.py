"""``threshold-bot export``: a W&B project's, an MLflow experiment's or a GitHub workflow's
runs as a history file.

``--actions OWNER/REPO --workflow FILE --artifact NAME [--file PATH]`` reads the workflow's
runs on the default branch and each run's artifact (``GITHUB_TOKEN``; it needs ``actions:
read``); runs whose artifact cannot be read are left out, counted on stderr by reason.

Writes every run of the source (all states) in the JSON Lines form of
docs/history-format.md, which ``review --history`` and a ``kind: file`` source read.  The
run filters and ``summary_keys`` of the config's default source apply, as for ``review
--wandb``; ``--since`` narrows the runs by creation time on the server.  ``--append FILE``
keeps a history file current: it reads the runs created since the file's newest one and
those the file has as still running, and merges them in by id.  Progress and the final
count go to stderr; stdout carries only JSON lines.  See docs/cli.md.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Annotated, NamedTuple

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bot.adapters.history.actions_source import ActionsSource
from bot.adapters.history.files import read_history
from bot.adapters.history.mlflow_source import MlflowSource
from bot.adapters.history.wandb_source import WandbSource
from bot.adapters.settings import Settings, SettingsError
from bot.cli.errors import UsageProblem, fail
from bot.cli.histories import LocalHistories
from bot.cli.review import read_config
from bot.core.history.export import history_text, merge, running_ids
from bot.core.history.formats import JSONL_SUFFIXES
from bot.core.history.runs import make_history
from bot.core.history.series import attach, newest_finished, requested
from bot.core.history.sources import (
    HistoryError,
    HistoryNotFound,
    HistoryUnavailable,
    SourceRefused,
)
from bot.core.models import History, SourceSpec, as_utc

Source = WandbSource | MlflowSource | ActionsSource
# failures no retry mends: exit 2, like a missing key
_NOT_AN_OUTAGE = ("rejected the API key", "access denied")


def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return as_utc(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise UsageProblem(f"--since {text!r}: expected a date, YYYY-MM-DD") from None


class Actions(NamedTuple):
    """``--actions OWNER/REPO`` and the options naming its workflow, artifact and file."""

    repo: str | None
    workflow: str | None
    artifact: str | None
    file: str | None


def _target(
    wandb: str | None,
    mlflow: str | None,
    tracking_uri: str | None,
    config: Path | None,
    since: datetime | None,
    series: list[str],
    actions: Actions = Actions(None, None, None, None),
) -> tuple[SourceSpec, Source]:
    """The spec to read (the config's default source's filters and summary keys, the
    project, experiment or workflow named here) and the source reading it."""
    named = [x for x in (wandb, mlflow, actions.repo) if x is not None]
    if len(named) != 1:
        raise UsageProblem(
            "give exactly one of --wandb ENTITY/PROJECT, --mlflow EXPERIMENT and "
            "--actions OWNER/REPO"
        )
    if actions.repo is None and (actions.workflow or actions.artifact or actions.file):
        raise UsageProblem("--workflow, --artifact and --file go with --actions OWNER/REPO")
    if actions.repo is not None:
        return _actions_target(actions, config, since, series)
    base = read_config(config).source(None) or SourceSpec()
    histories = LocalHistories(Path.cwd())
    settings = histories.settings()
    update: dict[str, object] = {"series": tuple(series)}
    if since is not None:
        floor = as_utc(base.created_after) if base.created_after else since
        update["created_after"] = max(since, floor)
    if wandb is not None:
        if tracking_uri is not None:
            raise UsageProblem("--tracking-uri goes with --mlflow, not --wandb")
        target = histories.wandb_spec(wandb, None)
        update |= {"kind": "wandb", "entity": target.entity, "project": target.project}
    else:
        if series:
            raise UsageProblem("--series: MLflow sources have no per-step series to read")
        if not (mlflow or "").strip():
            raise UsageProblem("--mlflow: give the experiment's name")
        update |= {"kind": "mlflow", "experiment": mlflow, "tracking_uri": None}
        histories = LocalHistories(Path.cwd(), settings=_with_uri(settings, tracking_uri))
    spec = base.model_copy(update=update)
    return spec, histories.remote(spec)


def _actions_target(
    actions: Actions, config: Path | None, since: datetime | None, series: list[str]
) -> tuple[SourceSpec, Source]:
    if repo_problem(actions.repo or ""):
        raise UsageProblem(f"--actions {actions.repo!r}: expected OWNER/REPO")
    if not actions.workflow or not actions.artifact:
        raise UsageProblem("--actions needs --workflow FILE (or id) and --artifact NAME")
    base = read_config(config).source(None)
    keep = base.model_dump() if base is not None and base.kind == "actions" else {}
    update: dict[str, object] = {
        **keep,
        "kind": "actions",
        "repo": actions.repo,
        "workflow": actions.workflow,
        "artifact": actions.artifact,
        "file": actions.file or keep.get("file"),
        "series": tuple(series),
    }
    if since is not None:
        update["created_after"] = since
    spec = SourceSpec.model_validate(update)
    return spec, LocalHistories(Path.cwd()).remote(spec)


def repo_problem(repo: str) -> bool:
    """Whether ``repo`` is not of the form OWNER/REPO."""
    return repo.count("/") != 1 or not all(repo.split("/"))


def _with_uri(settings: Settings, tracking_uri: str | None) -> Settings:
    """The settings with ``--tracking-uri`` as the MLflow server (else MLFLOW_TRACKING_URI)."""
    uri = tracking_uri or settings.mlflow_tracking_uri
    if not uri:
        raise UsageProblem("no MLflow server: give --tracking-uri or set MLFLOW_TRACKING_URI")
    return settings.model_copy(update={"mlflow_tracking_uri": uri})


def _read(
    source: Source,
    spec: SourceSpec,
    after: History | None,
    err: Console,
) -> History:
    """The runs of ``spec`` (all, or those new or still running since ``after``), sorted,
    with the series ``spec`` asks for, under a progress bar on a terminal."""
    newest = after.runs[-1].created_at if after is not None and after.runs else None
    running = running_ids(after) if after is not None else []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task(f"{spec.describe()}: runs", total=None)
        runs = source.fetch_runs(
            spec,
            created_since=newest,
            run_ids=running,
            progress=lambda read, total: bar.update(task, completed=read, total=total),
        )
        history = make_history(runs, spec.describe())
        if isinstance(source, WandbSource) and requested(spec):
            targets = newest_finished(history.runs, source.series_runs)
            step = bar.add_task(f"{spec.describe()}: per-step series", total=len(targets))
            read = {}
            for run_id, series in source.fetch_series(
                spec, dict.fromkeys(targets, requested(spec))
            ):
                read[run_id] = series
                bar.advance(step)
            history = attach(history, read)
    return history


def _existing(path: Path) -> tuple[str, History] | None:
    """The history file ``--append`` brings up to date (None: it does not exist yet)."""
    if path.suffix.lower() not in JSONL_SUFFIXES:
        raise UsageProblem(f"--append {path}: expected a .jsonl file")
    if not path.exists():
        return None
    try:
        history = read_history(path)
        return path.read_text(encoding="utf-8"), history
    except (HistoryError, OSError) as exc:
        raise UsageProblem(f"--append: {exc}") from None


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file, then a rename)."""
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as file:
                file.write(text)
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UsageProblem(f"{path}: cannot be written ({exc.strerror})") from None


def _print(text: str) -> None:
    """Write ``text`` to stdout; a reader that stopped early (``| head``) ends the command."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error
        raise typer.Exit(1) from None


def _count(history: History) -> str:
    runs = len(history.runs)
    text = f"{runs} run{'' if runs == 1 else 's'} ({history.stats.finished} finished)"
    skipped = history.stats.skipped_runs
    if skipped:
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
        text += f"; skipped {sum(skipped.values())} unreadable ({reasons})"
    return text


_WORDS = (
    (" on the server", ""),
    (" (details in the App's log)", ""),
)


def _wording(message: str) -> str:
    """A source's error in the command line's words (the App's speak of its server, log)."""
    for app, cli in _WORDS:
        message = message.replace(app, cli)
    return message


def _quiet_logs() -> None:
    """Keep the sources' log records (the upstream's own error text) off stderr: the
    command's failure is its one line.  A handler set up by the caller still gets them."""
    logger = logging.getLogger("bot")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


def export_command(
    wandb: Annotated[
        str | None,
        typer.Option(metavar="ENTITY/PROJECT", help="Export this W&B project (WANDB_* settings)."),
    ] = None,
    mlflow: Annotated[
        str | None,
        typer.Option(metavar="EXPERIMENT", help="Export this MLflow experiment (by name)."),
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option(
            metavar="URI",
            help="The MLflow server (default MLFLOW_TRACKING_URI).",
            show_default=False,
        ),
    ] = None,
    actions: Annotated[
        str | None,
        typer.Option(
            metavar="OWNER/REPO",
            help="Export this repository's workflow runs, read from an artifact (GITHUB_TOKEN).",
        ),
    ] = None,
    workflow: Annotated[
        str | None,
        typer.Option(metavar="FILE", help="With --actions: the workflow's file name or id."),
    ] = None,
    artifact: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="With --actions: the artifact's name (or a glob)."),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option(
            metavar="PATH", help="With --actions: the file in the artifact (default: found)."
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="Repository config: its default source's filters and summary keys."
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(metavar="YYYY-MM-DD", help="Only runs created on or after this date (UTC)."),
    ] = None,
    series: Annotated[
        list[str] | None,
        typer.Option(
            "--series",
            metavar="METRIC",
            help="Also read this metric's per-step values (W&B; repeatable).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Write the history to this file (default: stdout)."),
    ] = None,
    append: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Bring this .jsonl history up to date: add the runs newer than its newest, "
            "update those it has as running.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Export a W&B project's, an MLflow experiment's or a workflow's runs as JSON Lines."""
    err = Console(stderr=True)
    _quiet_logs()
    try:
        if output is not None and append is not None:
            raise UsageProblem("give --output FILE or --append FILE, not both")
        spec, source = _target(
            wandb,
            mlflow,
            tracking_uri,
            config,
            _since(since),
            series or [],
            Actions(actions, workflow, artifact, file),
        )
        existing = _existing(append) if append is not None else None
        history = _read(source, spec, existing[1] if existing else None, err)
        if append is not None:
            merged = merge(*existing, history.runs) if existing else None
            _replace(append, merged.text if merged else history_text(history.runs))
            now = read_history(append)
            added, updated = (merged.added, merged.updated) if merged else (len(history.runs), 0)
            print(
                f"appended {added} new run{'' if added == 1 else 's'}, updated {updated}, "
                f"from {spec.describe()}: {append} has {_count(now)}",
                file=sys.stderr,
            )
            return
        text = history_text(history.runs)
        if output is None:
            _print(text)
        else:
            _replace(output, text)
        print(f"exported {_count(history)} from {spec.describe()}", file=sys.stderr)
    except UsageProblem as exc:
        fail(str(exc), details=exc.details)
    except (SettingsError, HistoryNotFound) as exc:
        fail(_wording(str(exc)))
    except (SourceRefused, HistoryUnavailable) as exc:
        refused = isinstance(exc, SourceRefused) or any(m in str(exc) for m in _NOT_AN_OUTAGE)
        fail(_wording(str(exc)), 2 if refused else 1)
    except HistoryError as exc:
        fail(_wording(str(exc)), 1)
