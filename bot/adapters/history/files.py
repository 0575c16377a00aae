"""History files read from disk (the CLI) or through a reader (the App, from the repository).

``read_history`` reads a path; ``FileSource`` is the ``HistorySource`` for
``SourceSpec(kind="file")`` over any text reader.  Parsing is ``bot.core.history.formats``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bot.core.history.formats import parse_history, select_runs
from bot.core.history.sources import BadHistory, HistoryNotFound, HistoryUnavailable
from bot.core.models import History, SourceSpec


def read_history(path: Path, *, skip_bad_lines: bool = False) -> History:
    """Read a history file from disk; ``HistoryNotFound`` when it does not exist."""
    name = str(path)
    parse_history("", name)  # reject an unknown extension before touching the disk
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HistoryNotFound(f"{name}: no such file") from None
    except IsADirectoryError:
        raise BadHistory(f"{name}: is a directory, not a history file") from None
    except UnicodeDecodeError as exc:
        raise BadHistory(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise HistoryUnavailable(f"{name}: cannot be read: {exc.strerror or exc}") from None
    return parse_history(text, name, skip_bad_lines=skip_bad_lines)


class FileSource:
    """``HistorySource`` for ``SourceSpec(kind="file")``: a history file in the repository."""

    def __init__(self, read_text: Callable[[str], str], *, skip_bad_lines: bool = False) -> None:
        """``read_text(path)`` returns the file's text or raises ``FileNotFoundError``."""
        self._read_text = read_text
        self._skip_bad_lines = skip_bad_lines

    def fetch(self, spec: SourceSpec) -> History:
        """Read, parse and filter the history file named by ``spec.path``."""
        if spec.kind != "file" or not spec.path:
            raise BadHistory(
                f"{spec.describe()}: not a history file source (needs kind: file, path)"
            )
        parse_history("", spec.path)  # unknown extension: fail before reading
        try:
            text = self._read_text(spec.path)
        except FileNotFoundError:
            raise HistoryNotFound(f"{spec.path}: no such history file") from None
        except UnicodeDecodeError as exc:
            raise BadHistory(f"{spec.path}: not UTF-8 text ({exc.reason})") from None
        history = parse_history(text, spec.path, skip_bad_lines=self._skip_bad_lines)
        return select_runs(history, spec).model_copy(update={"source": spec.describe()})
