"""The dashboard's checkboxes: instructions a maintainer gives by ticking them (pure).

A box is a task-list line of the body, ``- [ ] <!-- threshold-bot:box KEY --> words`` (as
Renovate's Dependency Dashboard does): ``KEY`` is 16 hex characters of a SHA-256 over the
box's action, file and gate, so no outside string (a path, a gate name) ever sits in the
HTML comment.  :func:`boxes_of` lists every box a view's body shows: one ``rebaseline-gate``
per drifting gate, one ``rebaseline-file`` per file with two or more drifting gates (with
one, the gate's box does the same), and one ``check``.

:func:`ticked` reads which boxes an edited body ticks; :func:`untick` clears some.  The body
is parsed as CommonMark's blocks (markdown-it-py, nesting at most 20 deep, no inline
rules; about a second of CPU for the worst 64 KiB measured, 16,384 one-word list items;
a body with nothing like a ticked box is not parsed at all): a box counts only as the
first thing of a list item's paragraph (any list marker GitHub accepts: ``-``, ``*``, ``+``,
``1.``, ``1)``; in a quote or nested list too), ticked ``[x]`` or ``[X]``; one in a code
block or an HTML block (a comment) is text, not a box.  Only the first ``BODY_LIMIT``
characters are read; :func:`untick` leaves the rest as it is.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection, Iterator
from functools import cache
from typing import Literal

from markdown_it import MarkdownIt

from bot.core.dashboard.view import BODY_LIMIT, RepoView
from bot.core.models import Frozen

__all__ = ["BOX_PREFIX", "Box", "BoxAction", "boxes_of", "ticked", "untick"]

BoxAction = Literal["rebaseline-gate", "rebaseline-file", "check"]
BOX_PREFIX = "<!-- threshold-bot:box "
_BOX = re.compile(r"\[([ xX])\][ \t]+<!-- threshold-bot:box ([0-9a-f]{16}) -->")
_TICKED = re.compile(r"\[[xX]\][ \t]+<!-- threshold-bot:box [0-9a-f]{16} -->")
_LINES = re.compile(r"\r\n|\r|\n")  # the line breaks markdown-it counts lines by


class Box(Frozen):
    """One checkbox: what ticking it asks for."""

    action: BoxAction
    file: str = ""  # the threshold file (rebaseline-gate, rebaseline-file)
    gate: str = ""  # the gate's name (rebaseline-gate)

    @property
    def key(self) -> str:
        """16 hex characters of a SHA-256 over the action, file and gate (JSON-encoded, so no
        two boxes share the hashed text)."""
        text = json.dumps([self.action, self.file, self.gate], ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    @property
    def marker(self) -> str:
        """The hidden comment naming the box on its line: ``<!-- threshold-bot:box KEY -->``."""
        return f"{BOX_PREFIX}{self.key} -->"


def boxes_of(view: RepoView) -> tuple[Box, ...]:
    """Every box ``view``'s body shows, in its order: per file (in the view's order) its
    drifting gates' boxes, then the file's box when two or more drift; ``check`` last."""
    found: list[Box] = []
    for file in view.files:
        drifting = file.report.drifting if file.report is not None else ()
        found += [Box(action="rebaseline-gate", file=file.path, gate=d.gate.name) for d in drifting]
        if len(drifting) >= 2:
            found.append(Box(action="rebaseline-file", file=file.path))
    found.append(Box(action="check"))
    return tuple(dict.fromkeys(found))


@cache
def _parser() -> MarkdownIt:
    """CommonMark's block structure only: a box is found by its list item and paragraph,
    never by the inline rules (links, emphasis: their worst cases are not linear)."""
    return MarkdownIt("commonmark", {"maxNesting": 20}).disable("inline")


def _boxes(text: str) -> Iterator[tuple[int, str, bool]]:
    """Each box of ``text`` (the first ``BODY_LIMIT`` characters of a body): the line it
    starts on, its key, and whether it is ticked."""
    tokens = _parser().parse(text)
    for i in range(1, len(tokens) - 1):
        opened, inline = tokens[i], tokens[i + 1]
        if opened.type != "paragraph_open" or tokens[i - 1].type != "list_item_open":
            continue
        found = _BOX.match(inline.content)
        if found is not None and opened.map:
            yield opened.map[0], found.group(2), found.group(1) != " "


def ticked(body: str) -> frozenset[str]:
    """The keys of the boxes ``body`` ticks (its first ``BODY_LIMIT`` characters)."""
    if not _TICKED.search(body, 0, BODY_LIMIT):
        return frozenset()  # nothing like a ticked box: not parsed
    return frozenset(key for _, key, on in _boxes(body[:BODY_LIMIT]) if on)


def untick(body: str, keys: Collection[str]) -> str:
    """``body`` with its ticked boxes of ``keys`` unticked, nothing else changed (line
    breaks kept; past ``BODY_LIMIT`` characters nothing is read nor changed)."""
    if not _TICKED.search(body, 0, BODY_LIMIT):
        return body
    head, rest = body[:BODY_LIMIT], body[BODY_LIMIT:]
    lines = {line for line, key, on in _boxes(head) if on and key in keys}
    if not lines:
        return body
    parts = _LINES.split(head)
    breaks = _LINES.findall(head)
    for line in lines:
        parts[line] = _BOX.sub(_cleared(keys), parts[line], count=1)
    joined = "".join(p + b for p, b in zip(parts, [*breaks, ""], strict=True))
    return joined + rest


def _cleared(keys: Collection[str]) -> Callable[[re.Match[str]], str]:
    def clear(found: re.Match[str]) -> str:
        if found.group(2) not in keys:
            return found.group(0)
        return "[ ]" + found.group(0)[3:]

    return clear
