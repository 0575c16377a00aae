"""Command-line options several commands share, declared once (the same names and help)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

HistoryOption = Annotated[Path | None, typer.Option(help="Run history: a .jsonl or .csv file.")]
WandbOption = Annotated[
    str | None,
    typer.Option(help="Read the history from W&B instead: ENTITY/PROJECT (WANDB_* settings)."),
]
ConfigOption = Annotated[
    Path | None, typer.Option(help="Repository config (.github/threshold-bot.yml).")
]
WindowOption = Annotated[
    str | None, typer.Option(help="Runs the rule looks at: N, 'regime' or since:YYYY-MM-DD.")
]
AllowanceOption = Annotated[
    str | None, typer.Option(help="Allowance of the limit rule: 5% or 0.05 (default 5%).")
]
