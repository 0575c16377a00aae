"""The dashboard's body (``bot.core.dashboard.body``): its sections in order, each gate in
its section with its links, item and last rebaseline; outside strings escaped; the size
bound (thousands of gates: under the limit, *Needs attention* kept, what was cut said)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from bot.core.dashboard.body import (
    BODY_LIMIT,
    DASHBOARD_MARKER,
    NOTES_SHOWN,
    dashboard_body,
    dashboard_fingerprint,
)
from bot.core.dashboard.boxes import Box, boxes_of, ticked
from bot.core.dashboard.view import FileView, ItemLink, Rebaselined, RepoView
from bot.core.models import UnboundVariable
from tests.builders import limit_gate
from tests.dashboard_views import SHA, STEP_RUNS, URL, Kinds, drifting_values, file_view, kinds

HOSTILE_PATH = "ci/<b>x</b> @org/team #9 -->\n- [x] <!-- threshold-bot:box 0123456789abcdef -->.sh"
HOSTILE_METRIC = "acc|<img src=x onerror=alert(1)>@someone"
REPORT = "https://bot.example.com/report/octo/repo"


@pytest.fixture(scope="module")
def made() -> Kinds:
    return kinds()


def _section(body: str, heading: str) -> str:
    """The text from ``heading`` to the next heading or collapsed block."""
    start = body.index(heading)
    ends = [body.find(m, start + len(heading)) for m in ("\n## ", "\n<details>")]
    return body[start : min([e for e in ends if e >= 0], default=len(body))]


def test_sections_in_order_each_gate_in_its_own(made: Kinds) -> None:
    body = dashboard_body(made.view())
    assert body.splitlines()[0] == DASHBOARD_MARKER
    order = [
        "## Needs attention",
        "## Flaky",
        "## Looser than the history supports",
        "<summary>Healthy (1)</summary>",
        "## Detected threshold files",
        Box(action="check").marker,
    ]
    positions = [body.index(h) for h in order]
    assert positions == sorted(positions)
    attention = _section(body, "## Needs attention")
    assert [n for n in ("TRAIN", "SLIDE", "GONE") if f"<code>{n}</code>" in attention] == [
        "TRAIN",
        "SLIDE",
        "GONE",
    ]
    assert attention.index("TRAIN") < attention.index("SLIDE") < attention.index("GONE")
    assert "<code>EVAL</code>" in _section(body, "## Flaky")
    looser = _section(body, "## Looser than the history supports")
    (place,) = [b for b in looser.splitlines() if "<code>LOOSE</code>" in b]
    tighten = made.looser.report.gates[0].gate.tighten_to if made.looser.report else None
    assert f"The rule gives **{tighten:.2f}**" in place
    assert "The backtest prefers <code>zscore k=3</code>" in place
    healthy = body[body.index("<details>") : body.index("</details>")]
    assert "<code>FINE</code>" in healthy
    assert dashboard_body(made.view()) == body  # deterministic


def test_each_gate_links_its_file_and_line_at_the_head(made: Kinds) -> None:
    body = dashboard_body(made.view())
    blob = f"{URL}/blob/{SHA}"
    for f in (made.drifting, made.flaky, made.healthy):
        gate = f.gates[0]
        assert f"[<code>{gate.name}</code>]({blob}/{f.path}#L{gate.line})" in body
        assert f"[<code>{f.path}</code>]({blob}/{f.path})" in body
    unlinked = dashboard_body(made.view(url=""))
    assert "](" not in unlinked and "http" not in unlinked


def test_a_gate_line_holds_its_numbers_item_and_rebaseline(made: Kinds) -> None:
    merged = datetime(2026, 6, 2, 9, tzinfo=UTC)
    drifting = made.drifting.model_copy(
        update={"item": ItemLink(number=12), "rebaselined": Rebaselined(pull=10, at=merged)}
    )
    flaky = made.flaky.model_copy(update={"item": ItemLink(number=13, is_pull=True)})
    view = made.view().model_copy(update={"files": (drifting, flaky)})
    body = dashboard_body(view)
    (train,) = [
        line for line in body.splitlines() if "<code>TRAIN</code>" in line and "[ ]" in line
    ]
    box = Box(action="rebaseline-gate", file="ci/train.sh", gate="TRAIN")
    assert train.startswith(f"- [ ] {box.marker} Rebaseline ")
    assert f": {STEP_RUNS} of the last 30 runs failed, the last {STEP_RUNS} in a row." in train
    assert re.search(r" Newest runs: [▁▂▃▄▅▆▇█]{20}\.", train)
    # escaped (a zero-width space after #): the dashboard adds nothing to the items' timelines
    assert f"[drift issue #&#8203;12]({URL}/issues/12)" in train
    assert f"Last rebaselined 2 Jun 2026 in [\\#&#8203;10]({URL}/pull/10)" in train
    assert f"[drift PR #&#8203;13]({URL}/pull/13)" in body


def test_notes_hints_and_files_not_evaluated(made: Kinds) -> None:
    notes = tuple(f"note {i}: @someone ticked it" for i in range(NOTES_SHOWN + 2))
    hint = UnboundVariable(
        name="MIN_F1",
        file="ci/train.sh",
        line=9,
        literal="0.8",
        reason="no metric named like it",
        config="files:\n  - path: ci/train.sh\n    gates: [MIN_F1]",
    )
    broken = FileView(path="ci/broken.sh", problem="file:runs.jsonl: not found")
    train = made.drifting.model_copy(update={"hints": (hint,)})
    view = made.view(broken, notes=notes).model_copy(
        update={"files": (*made.view().files[:-1], train, broken)}
    )
    body = dashboard_body(view)
    shown = [n for n in notes if n.replace("@", "@&#8203;") in body]
    assert shown == list(notes[:NOTES_SHOWN])  # the newest first, a few
    attention = _section(body, "## Needs attention")
    assert (
        "[<code>ci/broken.sh</code>]" in attention
        and "not evaluated: file:runs.jsonl: not found" in attention
    )
    detected = _section(body, "## Detected threshold files")
    assert "ci/broken.sh" in detected and "reading file:runs.jsonl" in detected
    hints = body[body.index("<summary>Literals not bound") :]
    label = f"[<code>MIN\\_F1</code>]({URL}/blob/{SHA}/ci/train.sh#L9)"
    assert f"{label} = <code>0.8</code> (ci/train.sh line 9): no metric named like it." in hints
    assert "  ```yaml\n  files:\n    - path: ci/train.sh\n      gates: [MIN_F1]\n  ```" in hints


def test_hostile_names_stay_text(made: Kinds) -> None:
    gate = limit_gate(HOSTILE_METRIC, ">=", "0.75", name="X*_[y](javascript:1)")
    evil = file_view(HOSTILE_PATH, [gate], drifting_values(), metric=HOSTILE_METRIC)
    view = made.view(evil, notes=("<script>@admin</script>",))
    body = dashboard_body(view)
    html = MarkdownIt("commonmark").render(body)
    for tag in ("<img", "<b>", "<script", 'href="javascript'):
        assert tag not in html
    assert "@someone" not in body and "@org" not in body and "@admin" not in body
    assert "#9" not in body
    real = {b.key for b in boxes_of(view)}
    assert len(real) == 3  # TRAIN's, the hostile file's gate's and "check again"
    assert ticked(body.replace("- [ ] ", "- [x] ")) == real  # the path's fake box is no box


def _many(made: Kinds, healthy: int, drifting: int) -> RepoView:
    files = [made.healthy.model_copy(update={"path": f"ci/fine{i}.sh"}) for i in range(healthy)]
    files += [made.drifting.model_copy(update={"path": f"ci/train{i}.sh"}) for i in range(drifting)]
    hint = UnboundVariable(name="H", file="ci/fine0.sh", line=1, literal="1", reason="r" * 200)
    files[0] = files[0].model_copy(update={"hints": (hint,) * 50})
    return RepoView(
        repo="octo/repo", branch="main", sha=SHA, url=URL, files=tuple(files), report_url=REPORT
    )


def test_thousands_of_gates_fit_with_attention_kept(made: Kinds) -> None:
    view = _many(made, healthy=3000, drifting=5)
    body = dashboard_body(view)
    assert len(body) <= BODY_LIMIT
    for box in boxes_of(view):
        assert box.marker in body  # every box of attention kept
    assert body.count("<code>TRAIN</code>") == 5
    assert (
        "*Left out to fit GitHub's size limit: the literals not bound, Healthy, Detected"
        f" threshold files. [The whole dashboard]({REPORT}).*"
    ) in body
    assert "<code>FINE</code>" not in body and "## Detected" not in body
    assert body.rstrip().endswith(Box(action="check").marker + " Check again now")


def test_attention_alone_too_long_is_cut_last(made: Kinds) -> None:
    view = _many(made, healthy=10, drifting=2000)
    body = dashboard_body(view)
    assert len(body) <= BODY_LIMIT
    assert "## Needs attention" in body and "\n- …\n" in body
    assert "part of Needs attention" in body
    assert body.rstrip().endswith(Box(action="check").marker + " Check again now")
    kept = ticked(body.replace("- [ ] ", "- [x] "))
    assert Box(action="check").key in kept and len(kept) > 10  # whole lines: their boxes read


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 40_000))
def test_the_body_never_exceeds_its_limit(healthy: int, drifting: int, limit: int) -> None:
    made = _KINDS
    body = dashboard_body(_many(made, healthy + 1, drifting), limit=limit)
    assert len(body) <= limit


def test_the_fingerprint_ignores_ticks_only(made: Kinds) -> None:
    body = dashboard_body(made.view())
    assert dashboard_fingerprint(body) == dashboard_fingerprint(body.replace("- [ ] ", "- [x] "))
    other = dashboard_body(made.view(notes=("asked",)))
    assert dashboard_fingerprint(other) != dashboard_fingerprint(body)


_KINDS = kinds()


def test_detected_files_list_every_gate_read(made: Kinds) -> None:
    placeholder = limit_gate("acc", ">=", "0.5", name="LATER", line=7).model_copy(
        update={"ignored": "a TODO placeholder"}
    )
    train = made.drifting.model_copy(update={"gates": (*made.drifting.gates, placeholder)})
    body = dashboard_body(made.view().model_copy(update={"files": (train,)}))
    detected = _section(body, "## Detected threshold files")
    blob = f"{URL}/blob/{SHA}/ci/train.sh"
    assert f"- [<code>ci/train.sh</code>]({blob}), reading file:runs.jsonl\n" in detected
    assert f"  - [<code>TRAIN</code>]({blob}#L3): <code>acc \\>= 0.75</code>\n" in detected
    assert (
        f"  - [<code>LATER</code>]({blob}#L7): <code>acc \\>= 0.5</code>"
        " (not judged: a TODO placeholder)"
    ) in detected
