"""The building blocks of the terminal review: plain text that wraps (never cut), list
items with a hanging indent, indented blocks, section headings, shell commands and config
lines to copy.

Every piece of outside text goes through ``plain`` (no terminal control reaches the
screen) and into a ``rich.text.Text`` (no Rich markup is interpreted).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from bot.core.render.shell import continued
from bot.core.render.terminal_text import plain


def text(words: str, style: str = "") -> Text:
    """``words`` as plain text, wrapped at spaces; a word wider than the line is folded."""
    return Text(plain(words), style=style, overflow="fold")


def item(words: str, bullet: str = "-", style: str = "") -> Table:
    """A list item: the bullet, and the text wrapped beside it (a hanging indent)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(Text(bullet), text(words, style))
    return grid


def indent(renderable: RenderableType, columns: int = 2) -> Padding:
    """``renderable`` indented by ``columns`` (no trailing padding)."""
    return Padding(renderable, (0, 0, 0, columns), expand=False)


def heading(title: str) -> Text:
    """A section heading, after a blank line."""
    return Text(f"\n{title}", style="bold underline")


class Command:
    """A shell command to copy, on lines of its own at the width it is printed at
    (``shell.continued``: each line but the last ends with a backslash), indented by
    ``indent``; pasted, it runs as one command.  Its lines are never padded: a space after
    the backslash would end the continuation."""

    def __init__(self, argv: Sequence[str], indent: int = 4) -> None:
        self.argv = tuple(plain(word) for word in argv)
        self.indent = indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in continued(self.argv, options.max_width, self.indent):
            yield Segment(line)
            yield Segment.line()


class Verbatim:
    """Lines to copy as written (config lines), indented by ``indent`` and styled ``style``:
    never wrapped, folded or padded, so that pasted they are the lines the review means (a
    terminal may show a long one on two rows; it copies as one)."""

    def __init__(self, block: str, indent: int = 4, style: str = "") -> None:
        self.lines = tuple(plain(line) for line in block.rstrip("\n").splitlines())
        self.indent = indent
        self.style = Style.parse(style) if style else None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines:
            yield Segment(" " * self.indent)
            yield Segment(line, self.style)
            yield Segment.line()
