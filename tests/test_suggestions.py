"""Suggestion blocks: every hunk, applied as GitHub applies a suggestion, gives the new text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.features.rebaseline.suggestions import (
    Hunk,
    commentable,
    hunks,
    placeable,
    suggestion,
    unified,
)

OLD = "a\n# threshold-bot: old\n#   rule: x\nV=0.56\nb\nc\nd\ne\nf\ng\nW=283\n"


def apply(old: str, found: list[Hunk]) -> str:
    """Replace each hunk's lines as GitHub's "Commit suggestion" does."""
    lines = old.splitlines()
    for h in sorted(found, key=lambda h: h.start, reverse=True):
        lines[h.start - 1 : h.end] = list(h.lines)
    return "".join(f"{line}\n" for line in lines)


def test_a_replaced_provenance_block_is_one_multi_line_hunk() -> None:
    new = OLD.replace(
        "# threshold-bot: old\n#   rule: x\n", "# threshold-bot: new\n#   rule: y\n#   z\n"
    )
    new = new.replace("V=0.56", "V=0.50").replace("W=283", "W=290")

    found = hunks(OLD, new)

    assert found[0].start == 2 and found[0].end == 4 and found[0].lines[-1] == "V=0.50"
    assert found[-1] == Hunk(11, 11, ("W=290",))
    assert apply(OLD, found) == new


def test_an_insertion_is_anchored_on_the_next_line_and_keeps_it() -> None:
    new = OLD.replace("b\n", "# note\nb\n")
    assert hunks(OLD, new) == [Hunk(5, 5, ("# note", "b"))]
    assert apply(OLD, hunks(OLD, new)) == new


@given(
    st.lists(st.sampled_from(["x", "y", "V=1", "# c", ""]), max_size=12),
    st.lists(st.sampled_from(["x", "y", "V=2", "# d", ""]), max_size=12),
)
def test_hunks_always_rebuild_the_new_text(old_lines: list[str], new_lines: list[str]) -> None:
    old = "".join(f"{line}\n" for line in old_lines)
    new = "".join(f"{line}\n" for line in new_lines)
    if old_lines:  # GitHub cannot comment on an empty file
        assert apply(old, hunks(old, new)) == new


def test_commentable_lines_are_the_diff_hunks_with_context() -> None:
    base = "".join(f"l{i}\n" for i in range(1, 21))
    head = base.replace("l10\n", "L10\n")

    ranges = commentable(base, head)

    assert ranges == [range(7, 14)]  # line 10 and three lines either side
    assert placeable(Hunk(8, 10, ()), ranges) and not placeable(Hunk(2, 2, ()), ranges)
    assert commentable(None, head) == [range(1, 21)]


def test_suggestion_fences_outlast_backticks_in_the_content() -> None:
    assert suggestion(["V=1"]) == "```suggestion\nV=1\n```"
    assert suggestion([]) == "```suggestion\n```"
    assert suggestion(["echo ````"]).startswith("`````suggestion\n")
    block = unified("ci/x.sh", "V=1\n", "V=2\n")
    assert block.startswith("```diff\n") and "-V=1\n+V=2" in block
