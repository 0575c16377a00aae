"""``threshold-bot drift``: the drift watch of one threshold file, offline (docs/drift.md).

Reads the config (its ``drift:`` settings: ``min_failures``, ``window``), the threshold file
as the default branch has it and a history file; reviews every gate at its literal over the
drift window and prints what the App's drift issue would say (``--format markdown``, worded
for the command line) or the JSON report.  Exit status 1 when a gate drifts, 0 otherwise
(flaky gates alone: 0), 2 for bad input.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bot.cli.errors import UsageProblem, fail
from bot.cli.options import ConfigOption
from bot.cli.review import read_config, review_files
from bot.core.analysis.drift import drift_report
from bot.core.render.drift import drift_json, item_body
from bot.core.render.review import rebaseline_options


class DriftFormat(StrEnum):
    """What ``drift`` prints."""

    markdown = "markdown"
    json = "json"


def drift_command(
    file: Annotated[Path, typer.Option(help="The threshold file, as the default branch has it.")],
    history: Annotated[Path, typer.Option(help="Run history: a .jsonl or .csv file.")],
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
        review = review_files(history, file, config=repo_config, rule=rule)
        report = drift_report(file.as_posix(), review, settings)
    except UsageProblem as exc:
        fail(str(exc), details=exc.details)
    if output_format is DriftFormat.json:
        text = drift_json([report])
    else:
        options = rebaseline_options(history, None, config, str(settings.window), None)
        text = item_body(report, mode="issue", repo_url=None, cli_options=options)
    sys.stdout.write(text)
    sys.stdout.flush()
    if report.drifting:
        raise typer.Exit(1)
