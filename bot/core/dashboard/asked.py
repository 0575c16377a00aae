"""What was asked through the dashboard's checkboxes, and the note line saying so (pure).

An ``Asked`` is one ticked box acted on: who ticked it, the box (None: its key matches no
box of the repository's current gates), and what was done.  ``note`` is its plain text, as
the store keeps it (``@alice asked to rebaseline TRAIN_ACC_MIN_VALUE in tests/ci/x.sh: opened
#12``); ``line`` is the same as a Markdown quote line of the body, every outside string
(login, gate, path, reason) escaped, only the App's own number left as a reference.

``noted(body, lines)`` puts such lines into a dashboard body right after its intro paragraph
(before the notes already there: newest first); a body that would grow past ``BODY_LIMIT``
characters is left as it is (the notes stay in the store and show at the next rewrite).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.core.dashboard.boxes import Box
from bot.core.dashboard.view import BODY_LIMIT
from bot.core.render.markdown import Markdown, escape

NO_SUCH_GATE = "no such gate any more"


@dataclass(frozen=True)
class Asked:
    """One box acted on: ``done`` says what happened (``opened``, ``failed: …``), ``number``
    the issue or PR it wrote, if any."""

    user: str
    box: Box | None
    done: str
    number: int | None = None

    def _parts(self) -> tuple[str, ...]:
        """The note's outside strings and the words around them, in order (even: words)."""
        box = self.box
        if box is None:
            return ("", f"@{self.user}", " ticked a box: ", self.done)
        if box.action == "rebaseline-gate":
            return ("", f"@{self.user}", " asked to rebaseline ", box.gate, " in ", box.file)
        if box.action == "rebaseline-file":
            return ("", f"@{self.user}", " asked to rebaseline every failing gate of ", box.file)
        return ("", f"@{self.user}", " asked to check again now")

    def _outcome(self) -> str:
        if self.box is None:
            return ""
        return f": {self.done}" + (f" #{self.number}" if self.number is not None else "")

    @property
    def note(self) -> str:
        """The plain text the store keeps."""
        return "".join(self._parts()) + self._outcome()

    @property
    def line(self) -> Markdown:
        """The body's quote line: outside strings escaped, the App's number a reference."""
        parts = self._parts()
        text = "".join(p if i % 2 == 0 else escape(p, 300) for i, p in enumerate(parts))
        if self.box is not None:
            text += f": {escape(self.done, 300)}"
            text += f" #{self.number}" if self.number is not None else ""
        return Markdown(f"> {text}")


def noted(body: str, lines: Sequence[str], marker: str) -> str:
    """``body`` with ``lines`` (newest first) after the paragraph that follows ``marker``'s
    line, before any quote lines there (older notes); at the top without ``marker``.
    Unchanged when the result would be longer than ``BODY_LIMIT`` characters."""
    if not lines:
        return body
    rows = body.split("\n")
    at = next((i for i, row in enumerate(rows) if row.strip() == marker), None)
    if at is None:
        new = [*lines, "", *rows]
    else:
        blank = next((i for i in range(at + 1, len(rows)) if not rows[i].strip()), len(rows))
        after = next((i for i in range(blank, len(rows)) if rows[i].strip()), len(rows))
        if blank == len(rows):
            new = [*rows, "", *lines]
        elif after < len(rows) and rows[after].startswith(">"):  # older notes: before them
            new = [*rows[:after], *lines, *rows[after:]]
        else:
            new = [*rows[: blank + 1], *lines, "", *rows[blank + 1 :]]
    result = "\n".join(new)
    return body if len(result) > BODY_LIMIT else result
