"""The PR comment, the check-run output and the JSON review, from hand-built Reviews."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from rich.console import Console

from bot.core.models import (
    Change,
    Failures,
    GateReview,
    HistoryStats,
    MetricShift,
    PullRef,
    Regime,
    Review,
    UnboundVariable,
    WindowInfo,
)
from bot.core.render.loader import markdown_environment
from bot.core.render.markdown import Markdown
from bot.core.render.review import (
    MARKER,
    render_check,
    render_comment,
    render_json,
)
from bot.core.render.terminal import review_table

MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
T0 = datetime(2026, 6, 30, 8, 5, tzinfo=UTC)
EVIL = "x|y <img src=a onerror=b> @octocat [l](https://e.example) **b**\nnext"


def gate(**kw: Any) -> GateReview:
    base: dict[str, Any] = {
        "name": "EVAL_ACC_MIN_VALUE",
        "file": "tests/ci/gsm8k.sh",
        "line": 38,
        "metric": "eval/all/avg_score",
        "op": ">=",
        "old": 0.56,
        "proposed": 0.5,
        "recomputed": 0.5,
        "window": WindowInfo(kind="last", runs=20, first=T0, last=T0 + timedelta(days=21)),
        "window_min": 0.5292,
        "window_max": 0.5959,
        "old_failures": Failures(failed=3, total=30),
        "proposed_failures": Failures(failed=0, total=20),
        "consecutive_failures": 3,
        "failing_since": T0 + timedelta(days=19),
        "verdict": "ok",
        "changed": True,
        "explanation": "failing every run since 19 Jul",
        "decimals": 2,
    }
    base.update(kw)
    return GateReview(**base)


def regimes(count: int, metric: str = "eval/all/avg_score") -> tuple[Regime, ...]:
    return tuple(
        Regime(
            start=T0 + timedelta(days=10 * i),
            end=T0 + timedelta(days=10 * i + 9),
            runs=10,
            medians={metric: 0.5 + i / 100, "timing/step_s": 100.0 - i},
        )
        for i in range(count)
    )


def changes(count: int, metric: str = "eval/all/avg_score") -> tuple[Change, ...]:
    return tuple(
        Change(
            at=T0 + timedelta(days=10 * i),
            before_commit=f"{i:040x}",
            after_commit=f"{i + 1:040x}",
            metrics={metric: MetricShift(before=0.5, after=0.6, sigma=5.0)},
            pulls=(1798 + i,),
        )
        for i in range(1, count)
    )


def review(**kw: Any) -> Review:
    base: dict[str, Any] = {
        "conclusion": "success",
        "gates": (gate(),),
        "regimes": regimes(2),
        "changes": changes(2),
        "history": HistoryStats(total=40, finished=37, by_state={"finished": 37, "crashed": 3}),
        "source": "wandb:org/gsm8k_fully_async_ci",
    }
    base.update(kw)
    return Review(**base)


def tables(text: str) -> list[list[list[Token]]]:
    """Each table as rows of cells (the inline token of each cell)."""
    found: list[list[list[Token]]] = []
    row: list[Token] = []
    inside = False
    for token in MD.parse(text):
        if token.type in ("table_open", "table_close"):
            inside = token.type == "table_open"
            found += [[]] if inside else []
        elif token.type == "tr_open":
            row = []
        elif token.type == "inline" and inside:
            row.append(token)
        elif token.type == "tr_close":
            found[-1].append(row)
    return found


def test_comment_sections_in_contract_order() -> None:
    text = render_comment(review())
    assert text.splitlines()[0] == MARKER
    verdict = text.index("No action needed")
    order = [verdict, text.index("| Gate |"), text.index("#### Regimes"), text.index("#### Method")]
    order.append(text.index("#### What to do"))
    assert order == sorted(order)


def test_gate_row_numbers_use_the_gate_decimals() -> None:
    g = gate(old=0.01764, proposed=0.019, recomputed=0.019, decimals=3, op="<=")
    g = g.model_copy(update={"window_min": 0.0123, "window_max": 0.018})
    [gates_table, _regimes] = tables(render_comment(review(gates=(g,))))
    cells = [c.content for c in gates_table[1]]
    assert cells[2] == "0.01764 → **0.019**"
    assert cells[3] == "0.019"
    assert cells[4] == "0.0123 – 0.0180"
    assert cells[5] == "**3**/30" and cells[6] == "0/20"
    plain = render_comment(review(gates=(gate(proposed=0.5, old=0.5, changed=False),)))
    assert "| 0.50 |" in plain  # 0.5 shown with the literal's two decimals


def test_regime_table_links_pulls_and_bolds_what_moved() -> None:
    pulls = {1799: PullRef(number=1799, title="Async | rollout @octocat", url="")}
    text = render_comment(review(pulls=pulls), repo_url="https://github.com/o/r")
    [_gates, regime_table] = tables(text)
    assert len(regime_table) == 3  # header + 2 regimes
    header = [c.content for c in regime_table[0]]
    assert header[:2] == ["Period", "Runs"] and header[-1] == "Started by"
    first, second = ([c.content for c in row] for row in regime_table[1:])
    assert first[0] == "30 Jun 2026 – 9 Jul 2026"
    assert second[2] == "**0.51**"  # eval moved at the change that started regime 2
    # (the cell splitter has already turned the escaped \| back into |)
    assert second[-1] == (
        "[#1799](https://github.com/o/r/pull/1799) Async | rollout @&#8203;octocat"
    )
    link_targets = [
        c.attrGet("href") for c in regime_table[2][-1].children or [] if c.type == "link_open"
    ]
    assert link_targets == ["https://github.com/o/r/pull/1799"]


def test_outside_strings_cannot_break_the_comment() -> None:
    g = gate(name=EVIL, metric=EVIL, file=EVIL, explanation=EVIL, warnings=(EVIL,))
    unbound = (UnboundVariable(name=EVIL, file=EVIL, line=3, literal="4", reason=EVIL),)
    pulls = {1799: PullRef(number=1799, title=EVIL, url="")}
    text = render_comment(
        review(gates=(g, gate()), hints=unbound, pulls=pulls, source=EVIL, warnings=(EVIL,)),
        repo_url="https://github.com/o/r",
    )
    gates_table, regime_table = tables(text)
    assert [len(row) for row in gates_table] == [8, 8, 8]
    assert [len(row) for row in regime_table] == [len(regime_table[0])] * 3
    tokens = MD.parse(text)
    inline = [c for t in tokens if t.type == "inline" for c in t.children or []]
    html = {c.content for c in inline if c.type == "html_inline"} | {
        t.content.strip() for t in tokens if t.type == "html_block"
    }
    assert html <= {"<code>", "</code>", MARKER}
    hrefs = {c.attrGet("href") for c in inline if c.type == "link_open"}
    assert hrefs == {"https://github.com/o/r/pull/1799"}
    assert not {c.type for c in inline} & {"image", "em_open", "strong_open"} - {"strong_open"}
    rendered = MD.render(text)
    assert "@octocat" not in rendered and "<img" not in rendered


def test_warnings_show_their_quoted_names_in_code_and_escape_them() -> None:
    metric = "eval/a_b*c"  # outside text: the name a warning quotes
    on_gate = f"no per-step series of `{metric}` in 2 of 5 runs in the window"
    on_review = f"runs.csv: column `{EVIL}` holds text, not numbers (3 cells): ignored"
    text = render_comment(review(gates=(gate(warnings=(on_gate,)),), warnings=(on_review,)))
    assert "\\`" not in text
    lines = [line for line in MD.render(text).splitlines() if "⚠️" in line]
    assert len(lines) == 2 and not any("`" in line for line in lines)
    assert f"<code>{metric}</code> in 2 of 5 runs" in lines[0]
    (shown,) = re.findall(r"<code>(.*?)</code>", lines[1])
    assert "<img" not in shown  # the name is text: ZWSPs break its mention and autolink
    assert html.unescape(shown).replace("\u200b", "") == " ".join(EVIL.split())


def test_action_wording_depends_on_mode() -> None:
    flagged = gate(verdict="too_tight", recomputed=0.5, proposed=0.55)
    tighter = gate(name="TRAIN_MIN", verdict="ok", recomputed=0.25, proposed=0.26)
    exact = gate(name="EXACT", verdict="ok", recomputed=0.3, proposed=0.3)
    bad = review(conclusion="action_required", gates=(flagged, tighter, exact))
    app = render_comment(bad, app_mode=True)
    cli = render_comment(bad)
    # /rebaseline names the flagged gate; the bare command would also change TRAIN_MIN
    assert "Comment <code>/rebaseline EVAL\\_ACC\\_MIN\\_VALUE</code>" in app
    assert (
        "or `/rebaseline` for every gate the rule would change "
        "(<code>EVAL\\_ACC\\_MIN\\_VALUE</code> = 0.50, <code>TRAIN\\_MIN</code> = 0.25)"
    ) in app
    assert "Approve thresholds" in app
    assert "/rebaseline" not in cli
    assert (
        "edit <code>EVAL\\_ACC\\_MIN\\_VALUE = 0.50</code> at <code>tests/ci/gsm8k.sh:38</code>"
        in cli
    )
    # the command in a block to copy, naming the flagged gate; the words say what it changes
    assert (
        "\n  ```sh\n  threshold-bot rebaseline --file tests/ci/gsm8k.sh --history FILE"
        " EVAL_ACC_MIN_VALUE\n  ```\n"
    ) in cli
    assert (
        "the rule's value of <code>EVAL\\_ACC\\_MIN\\_VALUE</code> in place, and no other gate's"
    ) in cli
    assert "without gate names it would also rewrite <code>TRAIN\\_MIN</code>, which" in cli
    assert "Action required" in cli.splitlines()[1]
    # the two differ only in the "what to do" part
    assert app.split("#### What to do")[0] == cli.split("#### What to do")[0]


def test_neutral_review_says_why() -> None:
    text = render_comment(review(conclusion="neutral", error="W&B answered 503 <retry>"))
    assert "Not reviewed" in text.splitlines()[1]
    assert "W\\&B answered 503 \\<retry\\>" in text


def test_long_tables_fold_into_details() -> None:
    many = tuple(gate(name=f"G{i}") for i in range(20))
    text = render_comment(review(gates=many, regimes=regimes(12), changes=changes(12)))
    assert text.count("<details>") == text.count("</details>") == 2
    assert "<details><summary>20 gates</summary>" in text
    assert "<details><summary>12 regimes" in text
    [gates_table, regime_table] = tables(text)
    assert len(gates_table) == 21 and len(regime_table) == 13
    short = render_comment(review())
    assert "<details>" not in short


def test_check_output_fits_github_limits() -> None:
    many = tuple(gate(name=f"GATE_{i}_" + "x" * 200, explanation="y" * 500) for i in range(400))
    out = render_check(review(conclusion="action_required", gates=many))
    assert len(out.title) <= 100
    assert len(out.summary) <= 65_535 and len(out.text) <= 65_535
    assert out.summary.rstrip().endswith("for the whole review.*")
    assert out.summary.count("<details>") == out.summary.count("</details>")
    comment = render_comment(review(gates=many))
    assert len(comment) <= 65_535 and comment.startswith(MARKER)
    small = render_check(review())
    assert small.title == "1 gate fits the recent runs"
    assert "| Gate |" in small.summary and "#### Regimes" in small.text


def test_json_has_the_contract_fields() -> None:
    data = json.loads(render_json(review(conclusion="action_required")))
    assert data["conclusion"] == "action_required"
    [g] = data["gates"]
    contract = {
        "name": "EVAL_ACC_MIN_VALUE",
        "file": "tests/ci/gsm8k.sh",
        "line": 38,
        "metric": "eval/all/avg_score",
        "op": ">=",
        "old": 0.56,
        "proposed": 0.5,
        "recomputed": 0.5,
        "window_min": 0.5292,
        "window_max": 0.5959,
        "old_failures": {"failed": 3, "total": 30},
        "proposed_failures": {"failed": 0, "total": 20},
        "consecutive_failures": 3,
        "failing_since": "2026-07-19T08:05:00Z",
        "verdict": "ok",
    }
    assert {k: g[k] for k in contract} == contract
    assert g["window"] == {
        "kind": "last",
        "runs": 20,
        "first": "2026-06-30T08:05:00Z",
        "last": "2026-07-21T08:05:00Z",
    }
    assert [set(r) >= {"start", "end", "runs", "medians"} for r in data["regimes"]] == [True] * 2
    [c] = data["changes"]
    assert c["at"] == "2026-07-10T08:05:00Z" and c["pulls"] == [1799]
    assert c["before_commit"] == f"{1:040x}" and c["after_commit"] == f"{2:040x}"
    assert c["metrics"]["eval/all/avg_score"]["before"] == 0.5
    assert c["metrics"]["eval/all/avg_score"]["after"] == 0.6


def test_templates_escape_by_default() -> None:
    env = markdown_environment()
    assert env.from_string("{{ x }}").render(x="<b>@a|") == "\\<b\\>@&#8203;a\\|"
    assert env.from_string("{{ x }}").render(x=Markdown("<b>ok</b>")) == "<b>ok</b>"
    assert env.from_string("{{ x }}").render(x=None) == "—"


def test_terminal_table_lists_every_gate() -> None:
    console = Console(width=200, record=True, color_system=None)
    gates = (gate(), gate(name="[red]OTHER[/red]", verdict="too_tight"))
    console.print(review_table(review(gates=gates)))
    text = console.export_text()
    assert "EVAL_ACC_MIN_VALUE" in text and "[red]OTHER[/red]" in text  # no markup
    assert "0.56 → 0.50" in text and "too tight" in text and "3/30" in text
