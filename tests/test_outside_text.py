"""Every outside string is hostile: what the App posts references no issue, PR or user
(GitHub would link them and add backlinks), and what ``threshold-bot audit`` prints carries
no terminal escape sequence.

The rendered Markdown is parsed (markdown-it, as GitHub's CommonMark does) and GitHub's
reference patterns are searched in the text it shows outside links.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from rich.console import Console
from typer.testing import CliRunner

from bot.adapters.store import audit
from bot.adapters.store.db import init_db, make_engine
from bot.cli.main import app
from bot.core.render.terminal import plain, review_table
from bot.features.comments import on_comment
from bot.features.review.pull import review_pull
from tests.fakes.recording_github import RecordingGitHub
from tests.test_comments_handler import comment_payload, context
from tests.test_render import gate, review
from tests.test_review_pr import (
    CONFIG,
    FILE_SOURCE,
    RUNS,
    SCRIPT,
    SHIFT_AT,
    history_jsonl,
    scores,
    script,
)

MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
# GitHub's issue / PR references and mentions (docs: "Autolinked references and URLs")
REFERENCE = re.compile(r"#\d|(?i:\bGH-\d)|@[A-Za-z0-9]")
HOSTILE = "Fixes #1, owner/other#42 and GH-12, thanks @octocat"
ZWSP = "\u200b"


def shown_outside_links(markdown: str) -> tuple[str, list[str]]:
    """The text GitHub would show outside links (ZWSP kept), and every link target."""
    text: list[str] = []
    targets: list[str] = []
    for block in MD.parse(markdown):
        depth = 0
        for token in block.children or []:
            if token.type == "link_open":
                depth += 1
                targets.append(str(token.attrs["href"]))
            elif token.type == "link_close":
                depth -= 1
            elif token.type in ("text", "code_inline") and depth == 0:
                text.append(token.content)
        text.append("\n")
    return "".join(text), targets


@pytest.fixture
def history_repo() -> RecordingGitHub:
    """Main: the script, a file source and 40 runs; merged PR #12 with a hostile title made
    the step at run ``SHIFT_AT``."""
    gh = RecordingGitHub()
    gh.commit({SCRIPT: script("0.56"), CONFIG: FILE_SOURCE})
    for _ in range(RUNS - 1):
        gh.commit({})
    gh.commit({"ci/history.jsonl": history_jsonl(gh.commits, scores())})
    gh.merged_pull(12, HOSTILE, gh.commits[SHIFT_AT])
    return gh


def test_a_pr_title_links_nothing_but_the_bots_own_link_to_that_pr_works(
    history_repo: RecordingGitHub,
) -> None:
    history_repo.open_pull(9, {SCRIPT: script("0.50")}, title="Tune, see #3 and @bob")

    outcome = review_pull(history_repo, history_repo.repo, 9)

    assert outcome.review is not None and outcome.review.pulls[12].title == HOSTILE
    body = history_repo.comments[9].body
    shown, targets = shown_outside_links(body)
    assert REFERENCE.findall(shown) == []
    assert HOSTILE in shown.replace(ZWSP, "")  # the same text, once the ZWSPs are dropped
    assert targets == [f"https://github.com/{history_repo.repo}/pull/12"]
    assert f"[#12]({targets[0]})" in body  # the attribution's own reference still links


def test_an_error_text_from_outside_links_nothing(history_repo: RecordingGitHub) -> None:
    missing = "ci/see #7 GH-8 @ops.jsonl"
    history_repo.commit({CONFIG: FILE_SOURCE.replace("ci/history.jsonl", f'"{missing}"')})
    history_repo.open_pull(10, {SCRIPT: script("0.50")})

    outcome = review_pull(history_repo, history_repo.repo, 10)

    assert outcome.review is not None and missing in (outcome.review.error or "")
    shown, _ = shown_outside_links(history_repo.comments[10].body)
    assert missing in shown.replace(ZWSP, "") and REFERENCE.findall(shown) == []


def test_a_quoted_command_in_a_reply_links_nothing(tmp_path: Path) -> None:
    gh = RecordingGitHub()
    gh.commit({SCRIPT: script("0.56")})
    gh.open_pull(7, {SCRIPT: script("0.58")})
    line = "/rebaseline --force owner/repo#42 GH-12 #1 @octocat"

    on_comment(context(tmp_path, gh, "issue_comment"), comment_payload(line))

    (body,) = gh.replies.values()
    shown, targets = shown_outside_links(body)
    assert line in shown.replace(ZWSP, "")  # quoted in full
    assert REFERENCE.findall(shown) == [] and targets == []


# --------------------------------------------------------------------------- terminal

CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\x1b]0;pwned\x07b", "ab"),  # OSC: set the window title, ended by BEL
        ("a\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),  # OSC 8, ST
        ("\x9d0;pwned\x9cok", "ok"),  # the 8-bit OSC and ST
        ("x\x1b[2Jy\x1b[1A\x1b[2Kz", "xyz"),  # clear screen, cursor up, erase line
        ("c\x9b31md", "cd"),  # the 8-bit CSI
        ("\x1bPq#0;2;0;0;0\x1b\\after", "after"),  # DCS (sixel) up to ST
        ("\x1bcreset\x1b7", "reset"),  # two-character escapes
        ("bell\x07 back\x08 del\x7f nul\x00", "bell back del nul"),
        ("\u202eevil\u202c", "evil"),  # bidi overrides
        ("tab\tand\nnewline, é 中 ✅", "tab\tand\nnewline, é 中 ✅"),  # kept
    ],
)
def test_plain_drops_escape_sequences_and_control_characters(text: str, shown: str) -> None:
    assert plain(text) == shown


def test_audit_prints_no_escape_sequence_from_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    engine = make_engine(url)
    with init_db(engine).begin() as session:
        audit.add(
            session,
            repo="owner/repo",
            pr_number=7,
            actor="mallory\x1b[1A\x1b[2K",
            action="rebaseline",
            outcome="refused\x9b2J",
            message="/rebaseline \x1b]0;pwned\x07EVAL\x1b[2J_MIN\x9b31m",
            detail={"problem": "\x1b]8;;https://evil.example\x07x"},
        )
    engine.dispose()

    result = CliRunner().invoke(
        app, ["audit", "--repo", "owner/repo", "--database-url", url], env={"COLUMNS": "300"}
    )

    assert result.exit_code == 0, result.output
    assert CONTROLS.findall(result.output) == []
    (row,) = [line for line in result.output.splitlines() if "#7" in line]
    assert "mallory" in row and "refused" in row and "/rebaseline EVAL_MIN" in row
    assert "pwned" not in result.output
    assert result.output.splitlines()[0].rstrip() == "audit log of owner/repo: 1 entry"


def test_the_review_table_prints_no_escape_sequence() -> None:
    hostile = gate(name="EVAL\x1b]0;pwned\x07_MIN", metric="eval/\x1b[2Jscore\x9b1m")
    out = io.StringIO()

    Console(file=out, width=300, force_terminal=False).print(review_table(review(gates=(hostile,))))

    assert CONTROLS.findall(out.getvalue()) == []
    assert "EVAL_MIN" in out.getvalue() and "eval/score" in out.getvalue()
