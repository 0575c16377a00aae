"""``threshold-bot backtest``: which threshold model suits each gate of a file, judged on the
run history (docs/backtest.md).

An imperative shell: read the config, the threshold file and the runs (a history file, a W&B
project, or the one source the file or the config names), detect the history's regimes,
replay each model over each gate (``bot.core.analysis.backtest``) and print the result as a
terminal table, Markdown or JSON (``bot.core.render.backtest``).
Exit 0 with a result, or with nothing to backtest (a file with hints and no gate: the hints
on stderr); 1 when the runs cannot be read now (an outage); 2 for bad input (one
line on stderr).
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bot.cli.errors import UsageProblem, fail
from bot.cli.histories import read_runs
from bot.cli.options import (
    AllowanceOption,
    ConfigOption,
    HistoryOption,
    WandbOption,
    WindowOption,
)
from bot.cli.output import write_output, write_table
from bot.cli.review import nothing_bound, read_config, read_gate_changes, rule_settings
from bot.core.analysis.backtest import DEFAULT_MODELS, backtest_history
from bot.core.history.sources import HistoryError
from bot.core.limit_model import LimitModel, parse_models
from bot.core.render.backtest import (
    BacktestRun,
    backtest_json,
    backtest_markdown,
    backtest_table,
)
from bot.core.render.review import cli_wording

DEFAULT_MODELS_TEXT = ",".join(m.describe() for m in DEFAULT_MODELS)


class BacktestFormat(StrEnum):
    """What ``backtest`` prints."""

    table = "table"
    markdown = "markdown"
    json = "json"


def _models(text: str | None) -> tuple[LimitModel, ...]:
    """``--models`` as models (none given: the defaults); a usage error in plain words."""
    if text is None:
        return DEFAULT_MODELS
    try:
        return parse_models(text)
    except ValueError as exc:
        raise UsageProblem(f"--models {text[:80]!r}: {exc}") from None


def run_backtest(
    history_path: Path | None,
    wandb: str | None,
    file: Path,
    *,
    config: Path | None,
    window: str | None,
    allowance: str | None,
    models: tuple[LimitModel, ...],
) -> BacktestRun | None:
    """Read the inputs and backtest every gate of ``file``; ``UsageProblem`` on bad input,
    ``HistoryError`` when the runs cannot be read now. A file with hints and no gate: None,
    after saying so on stderr with its hints (nothing to backtest, no history read)."""
    repo_config = read_config(config)
    rule = rule_settings(repo_config, window, allowance)
    _, head = read_gate_changes(file, None, repo_config)
    if not head.gates:
        print(nothing_bound(head, "nothing to backtest"), file=sys.stderr)
        return None
    history = read_runs(history_path, wandb, head.gates, repo_config, head.path)
    gates, changes = backtest_history(head.gates, history, rule, repo_config.regimes, models)
    return BacktestRun(
        file=head.path, runs=len(history.finished), changes=len(changes), rule=rule, gates=gates
    )


def backtest_command(
    file: Annotated[Path, typer.Option(help="The threshold file whose gates to backtest.")],
    history: HistoryOption = None,
    wandb: WandbOption = None,
    models: Annotated[
        str | None,
        typer.Option(
            help="Models to compare, separated by commas: 'minmax,percentile p=1,zscore k=4'"
            f" (default: {DEFAULT_MODELS_TEXT}). The gate's current model is always included.",
            show_default=False,
        ),
    ] = None,
    config: ConfigOption = None,
    window: WindowOption = None,
    allowance: AllowanceOption = None,
    output_format: Annotated[
        BacktestFormat,
        typer.Option("--format", help="table (for reading), markdown or json."),
    ] = BacktestFormat.table,
    output: Annotated[Path | None, typer.Option(help="Write the result to this file.")] = None,
) -> None:
    """Replay threshold models over the history: false alarms, detection, recommendation."""
    try:
        result = run_backtest(
            history,
            wandb,
            file,
            config=config,
            window=window,
            allowance=allowance,
            models=_models(models),
        )
        if result is None:
            return
        if output_format is BacktestFormat.table:
            write_table(backtest_table(result), output)
        elif output_format is BacktestFormat.markdown:
            write_output(backtest_markdown(result), output)
        else:
            write_output(backtest_json(result), output)
    except UsageProblem as exc:
        fail(str(exc), details=exc.details)
    except HistoryError as exc:
        fail(f"the run history could not be read: {cli_wording(str(exc))}", 1)
