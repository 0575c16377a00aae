"""The error raised when a threshold file cannot be read or edited as declared."""

from __future__ import annotations


class ThresholdFileError(ValueError):
    """A problem in one threshold file.

    ``str()`` is ``path:line: message``, or ``path: message`` when no line applies.
    """

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")
