"""The dashboard's checkboxes (``bot.core.dashboard.boxes``): stable, distinct keys that
never hold an outside string; which boxes an edited body ticks; unticking changes nothing
else; hostile bodies (huge, boxes in code blocks and comments, keys not 16 hex)."""

from __future__ import annotations

import hashlib
import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.dashboard.body import BODY_LIMIT, dashboard_body
from bot.core.dashboard.boxes import Box, boxes_of, ticked, untick
from bot.core.dashboard.view import FileView
from tests.builders import limit_gate
from tests.dashboard_views import drifting_values, file_view, kinds

HOSTILE = "ci/a -->\n<!-- threshold-bot:box 0123456789abcdef --> `x`"
CHECK = Box(action="check")


def _line(box: Box, mark: str = " ", marker: str = "-") -> str:
    return f"{marker} [{mark}] {box.marker} words"


def test_keys_are_16_hex_of_a_sha256_over_action_file_gate() -> None:
    box = Box(action="rebaseline-gate", file="ci/train.sh", gate="TRAIN")
    text = json.dumps(["rebaseline-gate", "ci/train.sh", "TRAIN"])
    assert box.key == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert box.key == Box(action="rebaseline-gate", file="ci/train.sh", gate="TRAIN").key
    assert box.marker == f"<!-- threshold-bot:box {box.key} -->"


def test_keys_are_distinct_where_joined_strings_would_collide() -> None:
    boxes = [
        Box(action="rebaseline-gate", file="a", gate="bc"),
        Box(action="rebaseline-gate", file="ab", gate="c"),
        Box(action="rebaseline-gate", file="a\x00b", gate="c"),
        Box(action="rebaseline-file", file="a"),
        Box(action="rebaseline-gate", file="a"),
        CHECK,
    ]
    assert len({b.key for b in boxes}) == len(boxes)


def test_a_hostile_path_never_reaches_the_comment() -> None:
    box = Box(action="rebaseline-file", file=HOSTILE)
    assert re.fullmatch(r"<!-- threshold-bot:box [0-9a-f]{16} -->", box.marker)


def test_the_boxes_of_a_view() -> None:
    made = kinds()
    two = file_view(
        "ci/two.sh",
        [
            limit_gate("acc", ">=", "0.75", name="A", line=3),
            limit_gate("acc", ">=", "0.76", name="B", line=4),
        ],
        drifting_values(),
    )
    view = made.view(two, FileView(path="ci/broken.sh", problem="gone"))
    assert boxes_of(view) == (
        Box(action="rebaseline-gate", file="ci/train.sh", gate="TRAIN"),
        Box(action="rebaseline-gate", file="ci/two.sh", gate="A"),
        Box(action="rebaseline-gate", file="ci/two.sh", gate="B"),
        Box(action="rebaseline-file", file="ci/two.sh"),
        CHECK,
    )
    body = dashboard_body(view)
    assert all(body.count(b.marker) == 1 for b in boxes_of(view))  # each shown once
    assert ticked(body) == frozenset()  # none ticked as written


def test_ticked_any_list_marker_and_case() -> None:
    boxes = [Box(action="rebaseline-gate", file="f", gate=str(i)) for i in range(7)]
    body = "\n".join(
        [
            _line(boxes[0], "x"),
            _line(boxes[1], "X", "*"),
            _line(boxes[2], "x", "+"),
            _line(boxes[3], "x", "1."),
            _line(boxes[4], "x", "2)"),
            "  " + _line(boxes[5], "x"),  # nested, or indented under nothing
            _line(boxes[6], " "),
        ]
    )
    assert ticked(body) == {b.key for b in boxes[:6]}
    assert ticked(body.replace("\n", "\r\n")) == {b.key for b in boxes[:6]}


def test_not_a_box() -> None:
    box = Box(action="rebaseline-gate", file="f", gate="g")
    other = Box(action="check")
    body = "\n".join(
        [
            "    " + _line(box, "x"),  # an indented code block
            "",
            "```",
            _line(box, "x"),  # in a fenced code block
            "```",
            "",
            "<!--",
            _line(other, "x"),  # in an HTML comment
            "-->",
            "",
            f"[x] {box.marker} not in a list",
            "- [x] <!-- threshold-bot:box 0123456789ABCDEF --> upper-case hex",
            "- [x] <!-- threshold-bot:box 0123456789abcde --> 15 hex",
            "- [x] <!-- threshold-bot:box 0123456789abcdef0 --> 17 hex",
            f"- words first [x] {box.marker}",
        ]
    )
    assert ticked(body) == frozenset()
    assert untick(body, [box.key, other.key]) == body


def test_untick_changes_only_those_boxes() -> None:
    a, b = Box(action="check"), Box(action="rebaseline-file", file="f")
    body = f"# Title\r\n\r\n{_line(a, 'x')}\r\n> quoted\n{_line(b, 'X', '*')}\n\ntail [x]"
    assert untick(body, [a.key]) == body.replace(_line(a, "x"), _line(a, " "))
    both = untick(body, [a.key, b.key])
    assert both == body.replace(_line(a, "x"), _line(a)).replace(
        _line(b, "X", "*"), _line(b, " ", "*")
    )
    assert ticked(both) == frozenset()


def test_a_huge_body_is_not_read_past_the_limit() -> None:
    early, late = Box(action="check"), Box(action="rebaseline-file", file="f")
    filler = ("- [x] nothing to see\n" * (BODY_LIMIT // 20 + 10))[:BODY_LIMIT]
    body = _line(early, "x") + "\n" + filler + "\n" + _line(late, "x") + "\n" + "> " * 100_000
    assert ticked(body) == {early.key}
    out = untick(body, [early.key, late.key])
    assert out == body.replace(_line(early, "x"), _line(early), 1)
    deep = "> " * 50_000 + "- " * 50_000 + _line(early, "x")
    assert ticked(deep) == frozenset()  # past the nesting bound or the limit: not a box


lines = st.lists(
    st.one_of(
        st.sampled_from(["```", "~~~", "<!--", "-->", "", "    code", "> quote", "1. item"]),
        st.builds(
            _line,
            st.builds(Box, action=st.just("rebaseline-gate"), file=st.text(max_size=5)),
            st.sampled_from([" ", "x", "X"]),
            st.sampled_from(["-", "*", "+", "1.", "3)", "  -", "> -"]),
        ),
        st.text(max_size=30),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(lines, st.sampled_from(["\n", "\r\n", "\r"]))
def test_untick_of_ticked_leaves_none_ticked(body_lines: list[str], newline: str) -> None:
    body = newline.join(body_lines)
    keys = ticked(body)
    out = untick(body, keys)
    assert ticked(out) == frozenset()
    assert len(out) == len(body)  # "[x]" and "[X]" become "[ ]": nothing else moves
    changed = [i for i, (x, y) in enumerate(zip(body, out, strict=True)) if x != y]
    assert all(body[i] in "xX" and out[i] == " " for i in changed)
    assert untick(out, keys) == out
