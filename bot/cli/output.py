"""Where a command's result goes: standard output, or the file of ``--output``; a table at
the terminal's width in colour, or at ``COLUMNS`` (80) without colour in a file or a pipe."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from rich.console import Console, RenderableType

from bot.cli.errors import UsageProblem

__all__ = ["write_output", "write_table"]

DEFAULT_COLUMNS = 80  # the table's width outside a terminal, without COLUMNS


def _columns() -> int:
    """The width of a table written to a file or a pipe: ``COLUMNS``, else 80."""
    value = os.environ.get("COLUMNS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_COLUMNS


def write_table(table: RenderableType, output: Path | None) -> None:
    """Print ``table`` on the terminal at its width (in colour); to ``output`` or a pipe
    at :func:`_columns`, without colour. Never cropped: lines to copy (config lines) are
    printed whole even when wider than the terminal."""
    if output is None and sys.stdout.isatty():
        Console().print(table, crop=False)
        return
    buffer = io.StringIO()
    console = Console(file=buffer, width=_columns(), color_system=None, force_terminal=False)
    console.print(table, crop=False)
    write_output("".join(f"{line.rstrip()}\n" for line in buffer.getvalue().splitlines()), output)


def write_output(text: str, output: Path | None) -> None:
    """``text`` to standard output, or to ``output``; ``UsageProblem`` when it cannot be."""
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageProblem(f"--output {output}: cannot be written ({exc.strerror})") from None
