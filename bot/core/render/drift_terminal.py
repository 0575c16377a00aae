"""The drift report on a terminal (``threshold-bot drift --format table``): the sections of
the drift issue's body (``bot.core.render.drift``), worded for the command line and laid out
for any width down to 80 columns; the regime table is the terminal review's.

Text is wrapped, never cut, printed plain (``unmark``: no Markdown marks, no terminal
controls from outside text).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rich.console import Group, RenderableType
from rich.text import Text

from bot.core.analysis.drift import DriftReport
from bot.core.render.drift import cli_instruction, drift_sections
from bot.core.render.terminal import regime_section
from bot.core.render.terminal_parts import Command, heading, item, text
from bot.core.render.terminal_text import for_cli, unmark

__all__ = ["drift_table"]


_TICKS = re.compile(r"(?<!\\)`")  # our own code spans' backticks, not escaped outside text


def _plain(markdown: str) -> str:
    return unmark(_TICKS.sub("", markdown))


def _lines(lines: list[str]) -> Iterator[RenderableType]:
    """Markdown lines as terminal text: ``####`` a heading, ``-`` a list item."""
    for line in lines:
        if line.startswith("#### "):
            yield heading(_plain(line.removeprefix("#### ")))
        elif line.startswith("- "):
            yield item(_plain(line.removeprefix("- ")))
        elif line:
            yield text(_plain(line))


def _instruction(report: DriftReport, cli_options: str) -> list[RenderableType]:
    """What to do: which gates the commands rewrite, then each command on lines of its own
    (continued with a backslash at the terminal's width: pasted, it runs as one)."""
    found = cli_instruction(report, cli_options)
    if found is None:
        return []
    return [
        heading("What to do"),
        item(_plain(found.words)),
        *(Command(argv) for argv in found.commands),
    ]


def drift_table(report: DriftReport, *, cli_options: str) -> Group:
    """``report`` for a terminal: the headline, each drifting gate, the regimes, what to do
    (``threshold-bot rebaseline`` with ``cli_options``), the flaky gates, the rest and the
    drift settings that fell back."""
    report = report.model_copy(update={"review": for_cli(report.review)})
    parts: list[RenderableType] = []
    for name, lines in drift_sections(report, mode="issue", repo_url=None, cli_options=cli_options):
        if name == "headline":
            parts.append(text(_plain(lines[0]), "bold"))
        elif name == "regimes":
            parts += regime_section(report.review)
        elif name == "instruction":
            parts += _instruction(report, cli_options)
        else:
            parts += [] if lines[0].startswith("#### ") else [Text("")]  # a heading has one
            parts += _lines(lines)
    return Group(*parts)
