"""``threshold-bot drift``: the drift watch of one threshold file, offline (docs/drift.md).

Reads the config (its ``drift:`` settings: ``min_failures``, ``window``), the threshold file
as the default branch has it and the runs (a history file, a W&B project, or the source the
file or the config names, as ``review`` reads them); reviews every gate at its literal over the
drift window and prints what the App's drift issue would say (``--format markdown``, worded
for the command line) or the JSON report.  Exit status 1 when a gate drifts or the runs
cannot be read now (an outage), 0 otherwise (flaky gates alone: 0), 2 for bad input.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bot.cli.errors import UsageProblem, fail
from bot.cli.options import ConfigOption, HistoryOption, WandbOption
from bot.cli.review import read_config, review_history
from bot.core.analysis.drift import drift_report
from bot.core.render.drift import drift_json, item_body
from bot.core.render.review import cli_wording, rebaseline_options


class DriftFormat(StrEnum):
    """What ``drift`` prints."""

    markdown = "markdown"
    json = "json"


def drift_command(
    file: Annotated[Path, typer.Option(help="The threshold file, as the default branch has it.")],
    history: HistoryOption = None,
    wandb: WandbOption = None,
    config: ConfigOption = None,
    output_format: Annotated[
        DriftFormat,
        typer.Option("--format", help="markdown (the drift issue's body) or json."),
    ] = DriftFormat.markdown,
) -> None:
    """Report the gates that keep failing their newest runs; exit 1 when one drifts."""
    try:
        repo_config = read_config(config)
        settings = repo_config.drift
        rule = repo_config.rule.model_copy(update={"window": settings.window})
        review = review_history(history, wandb, file, None, repo_config, rule)
        report = drift_report(file.as_posix(), review, settings)
    except UsageProblem as exc:
        fail(str(exc), details=exc.details)
    if review.error:  # an outage: no gate could be checked, which is no "no drift"
        fail(f"the run history could not be read: {cli_wording(review.error)}", 1)
    if output_format is DriftFormat.json:
        text = drift_json([report])
    else:
        options = rebaseline_options(history, wandb, config, str(settings.window), None)
        text = item_body(report, mode="issue", repo_url=None, cli_options=options)
    sys.stdout.write(text)
    sys.stdout.flush()
    if report.drifting:
        raise typer.Exit(1)
