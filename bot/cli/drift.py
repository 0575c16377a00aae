"""``threshold-bot drift``: the drift watch of one threshold file, offline (docs/drift.md).

Reads the config (its ``drift:`` settings: ``min_failures``, ``window``), the threshold file
as the default branch has it and the runs (a history file, a W&B project, or the source the
file or the config names, as ``review`` reads them); reviews every gate at its literal over the
drift window and prints what the App's drift issue would say, worded for the command line:
a terminal table (the default on a terminal), Markdown (the default in a pipe or a file) or
the JSON report.  The report's conclusion is ``action_required`` when a gate drifts,
``neutral`` when none does but a gate has no data or is flaky, else ``success``: exit status
1 when it is ``--fail-on`` (default ``action_required``) or worse, or when the runs cannot be
read now (an outage), 0 otherwise, 2 for bad input.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from bot.cli.errors import UsageProblem, fail
from bot.cli.options import ConfigOption, HistoryOption, WandbOption
from bot.cli.output import write_output, write_table
from bot.cli.review import SEVERITY, FailOn, nothing_bound, read_config, review_history
from bot.core.analysis.drift import drift_report
from bot.core.models import ThresholdFile
from bot.core.render.drift import drift_json, item_body
from bot.core.render.drift_terminal import drift_table
from bot.core.render.review import cli_wording, rebaseline_options


class DriftFormat(StrEnum):
    """What ``drift`` prints."""

    table = "table"
    markdown = "markdown"
    json = "json"


def drift_command(
    file: Annotated[Path, typer.Option(help="The threshold file, as the default branch has it.")],
    history: HistoryOption = None,
    wandb: WandbOption = None,
    config: ConfigOption = None,
    output_format: Annotated[
        DriftFormat | None,
        typer.Option(
            "--format",
            help="table (for reading), markdown (the drift issue's body) or json."
            " Default: table on a terminal, else markdown.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[Path | None, typer.Option(help="Write the report to this file.")] = None,
    fail_on: Annotated[
        FailOn,
        typer.Option(
            help="Exit 1 when the report's conclusion is this or worse: action_required (a"
            " gate drifts) or neutral (also no data to judge, or a flaky gate)."
        ),
    ] = FailOn.action_required,
) -> None:
    """Report the gates that keep failing their newest runs; exit 1 when one drifts."""
    try:
        repo_config = read_config(config)
        settings = repo_config.drift
        rule = repo_config.rule.model_copy(update={"window": settings.window})
        review = review_history(history, wandb, file, None, repo_config, rule)
        if review.error:  # an outage: no gate could be checked, which is no "no drift"
            fail(f"the run history could not be read: {cli_wording(review.error)}", 1)
        if not review.gates and review.hints:  # said, as backtest and rebaseline say it
            found = ThresholdFile(path=file.as_posix(), unbound=tuple(review.hints))
            print(nothing_bound(found, "nothing to watch"), file=sys.stderr)
        report = drift_report(file.as_posix(), review, settings)
        fmt = output_format or (
            DriftFormat.table if output is None and sys.stdout.isatty() else DriftFormat.markdown
        )
        options = rebaseline_options(history, wandb, config, str(settings.window), None)
        if fmt is DriftFormat.table:
            write_table(drift_table(report, cli_options=options), output)
        elif fmt is DriftFormat.json:
            write_output(drift_json([report]), output)
        else:
            write_output(
                item_body(report, mode="issue", repo_url=None, cli_options=options), output
            )
    except UsageProblem as exc:
        fail(str(exc), details=exc.details)
    if SEVERITY[report.conclusion] >= SEVERITY[fail_on.value]:
        raise typer.Exit(1)
