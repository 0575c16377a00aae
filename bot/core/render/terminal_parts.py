"""The building blocks of the terminal review: plain text that wraps (never cut), list
items with a hanging indent, indented blocks and section headings.

Every piece of outside text goes through ``plain`` (no terminal control reaches the
screen) and into a ``rich.text.Text`` (no Rich markup is interpreted).
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

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
