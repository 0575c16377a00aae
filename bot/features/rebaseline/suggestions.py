"""GitHub suggestion blocks for a file edit, for PRs the App may not push to.

Pure.  ``hunks`` turns an old → new text change into line ranges of the old text with
their replacement lines; ``commentable`` is the set of head lines GitHub lets a review
comment on (the PR's diff hunks with their context); ``suggestion`` writes one
```` ```suggestion ```` block.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

DIFF_CONTEXT = 3  # lines of context around each hunk of a PR diff, as git shows it
_BACKTICKS = re.compile(r"`{3,}")


@dataclass(frozen=True)
class Hunk:
    """Replace lines ``start``..``end`` (1-based, inclusive) of the old text by ``lines``."""

    start: int
    end: int
    lines: tuple[str, ...]


def hunks(old: str, new: str) -> list[Hunk]:
    """The changed line ranges from ``old`` to ``new``.

    A pure insertion is anchored on the line below it (above it at the end of the file),
    which its suggestion repeats; ranges that share a line are merged into one.
    """
    before, after = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    regions: list[list[int]] = []  # [i1, i2, j1, j2]: before[i1:i2] -> after[j1:j2]
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i1 == i2:  # an insertion: take in the unchanged line next to it
            if i1 < len(before):
                i2, j2 = i1 + 1, j2 + 1
            elif before:
                i1, j1 = i1 - 1, j1 - 1
            else:
                continue
        if regions and i1 < regions[-1][1]:
            regions[-1][1], regions[-1][3] = max(regions[-1][1], i2), max(regions[-1][3], j2)
        else:
            regions.append([i1, i2, j1, j2])
    return [Hunk(i1 + 1, i2, tuple(after[j1:j2])) for i1, i2, j1, j2 in regions]


def commentable(base: str | None, head: str, context: int = DIFF_CONTEXT) -> list[range]:
    """Ranges of 1-based head lines inside the PR diff's hunks (all lines of a new file)."""
    after = head.splitlines()
    if base is None:
        return [range(1, len(after) + 1)]
    matcher = difflib.SequenceMatcher(None, base.splitlines(), after, autojunk=False)
    ranges: list[range] = []
    for group in matcher.get_grouped_opcodes(context):
        ranges.append(range(group[0][3] + 1, group[-1][4] + 1))
    return ranges


def placeable(hunk: Hunk, ranges: Sequence[range]) -> bool:
    """Whether every line of ``hunk`` lies in one diff hunk (GitHub's rule for comments)."""
    return any(hunk.start in r and hunk.end in r for r in ranges)


def suggestion(lines: Sequence[str]) -> str:
    """A suggestion block replacing the commented lines by ``lines`` (none: delete them)."""
    longest = max((len(m) for line in lines for m in _BACKTICKS.findall(line)), default=2)
    fence = "`" * max(3, longest + 1)
    body = "".join(f"{line}\n" for line in lines)
    return f"{fence}suggestion\n{body}{fence}"


def unified(path: str, old: str, new: str) -> str:
    """A ``diff`` code block of the change, for edits no suggestion can carry."""
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}", lineterm="", n=1
    )
    text = "\n".join(lines)
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}diff\n{text}\n{fence}"
