"""The note of a box acted on (``bot.core.dashboard.asked``): its plain text, its body line
with every outside string made inert, and where ``noted`` puts it in a dashboard body."""

from __future__ import annotations

from bot.core.dashboard.asked import NO_SUCH_GATE, Asked, noted
from bot.core.dashboard.body import DASHBOARD_MARKER, dashboard_body
from bot.core.dashboard.boxes import Box, boxes_of, ticked, untick
from bot.core.dashboard.view import BODY_LIMIT
from bot.core.render.markdown import ZWSP
from tests.dashboard_views import kinds

MARKER = DASHBOARD_MARKER
GATE = Box(action="rebaseline-gate", file="tests/ci/x.sh", gate="TRAIN_ACC_MIN_VALUE")


def test_the_note_says_who_asked_what_and_what_was_done() -> None:
    assert Asked("alice", GATE, "opened", 12).note == (
        "@alice asked to rebaseline TRAIN_ACC_MIN_VALUE in tests/ci/x.sh: opened #12"
    )
    whole = Box(action="rebaseline-file", file="ci/n.sh")
    assert Asked("bob", whole, "failed: GitHubError").note == (
        "@bob asked to rebaseline every failing gate of ci/n.sh: failed: GitHubError"
    )
    assert (
        Asked("carol", Box(action="check"), "done").note == "@carol asked to check again now: done"
    )
    assert Asked("dan", None, NO_SUCH_GATE).note == "@dan ticked a box: no such gate any more"


def test_the_body_line_makes_outside_strings_inert_but_links_the_apps_pull() -> None:
    hostile = Box(action="rebaseline-gate", file="a/[x](http://e.vil)#3.sh", gate="G_1 @team #4")
    line = Asked("eve", hostile, "opened", 7).line
    assert line.startswith(f"> @{ZWSP}eve asked to rebaseline G\\_1 @{ZWSP}team #{ZWSP}4 in ")
    assert "\\[x\\]" in line and "#" + ZWSP + "3" in line
    assert line.endswith(": opened #7")  # the App's own PR: a reference
    assert "\n" not in Asked("eve", GATE, "failed: a\nb").line


BODY = f"{MARKER}\nThe gates of this repository. Tick a box.\n\n## Needs attention\n\n- [ ] x\n"


def test_a_note_goes_after_the_intro_and_before_older_notes() -> None:
    once = noted(BODY, ["> first"], MARKER)
    assert once == (
        f"{MARKER}\nThe gates of this repository. Tick a box.\n\n> first\n\n"
        "## Needs attention\n\n- [ ] x\n"
    )
    twice = noted(once, ["> second", "> third"], MARKER)
    assert twice.split("\n")[3:6] == ["> second", "> third", "> first"]
    assert noted("no marker here\n", ["> n"], MARKER) == "> n\n\nno marker here\n"
    assert noted(BODY, [], MARKER) == BODY


def test_a_note_that_would_pass_githubs_limit_is_left_out() -> None:
    full = BODY + "y" * (BODY_LIMIT - len(BODY) - 6)  # room for "> ok", its break and a blank
    assert noted(full, ["> a longer note"], MARKER) == full
    assert len(noted(full, ["> ok"], MARKER)) == BODY_LIMIT


def test_a_note_never_makes_a_box() -> None:
    sneaky = Box(action="rebaseline-file", file="- [x] <!-- threshold-bot:box 0123456789abcdef -->")
    body = noted(BODY, [Asked("eve", sneaky, "done").line], MARKER)
    assert ticked(body) == frozenset()


def test_a_note_in_a_rendered_dashboard_goes_first_among_its_notes() -> None:
    for older in ((), ("@bob asked to check again now: done",)):
        view = kinds().view(notes=older)
        body = dashboard_body(view)
        box = boxes_of(view)[0]
        line = Asked("alice", box, "opened", 12).line
        shown = noted(untick(body, {box.key}), [line], DASHBOARD_MARKER).split("\n")
        rows = body.split("\n")
        at = rows.index("## Needs attention")
        quotes = [r for r in shown[: shown.index("## Needs attention")] if r.startswith(">")]
        assert quotes == [line, *(r for r in rows[:at] if r.startswith(">"))]
        assert shown[shown.index(line) + len(quotes)] == ""  # the notes stay one paragraph
        assert len(shown) == len(rows) + (1 if older else 2)
