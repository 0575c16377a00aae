"""Escaping of outside text, checked by parsing the result with a CommonMark + GFM-tables
parser (markdown-it-py): whatever the input, it stays one plain-text cell or paragraph."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from bot.core.render.markdown import (
    Markdown,
    code,
    escape,
    fenced,
    join,
    link,
    safe_url,
    truncate,
)

MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")

ADVERSARIAL = [
    "eval/all/avg_score",
    "a | b | c",
    "line one\nline two\r\n| x | y |",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "<!-- hide the rest",
    "</td></tr></table><b>bold</b>",
    "@octocat and @github/security please look",
    "mail admin@example.com",
    "[click](https://evil.example/x)",
    "![pixel](https://evil.example/p.png)",
    "https://evil.example/path and www.evil.example",
    "<https://evil.example>",
    "**bold** _it_ ~~gone~~ `code`",
    "$x^2$ and $$y$$",
    "&amp; &lt;b&gt; &#64;octocat",
    "back\\slash at the end\\",
    "- a list item",
    "1. numbered",
    "7) numbered",
    "# heading",
    "> quote",
    "=====",
    "---",
    "    indented code",
    "```python",
    "[ref]: https://evil.example",
    "[^1] footnote",
    "\u202eevil\u202c reversed",
]


def _blocks(text: str) -> list[Token]:
    return MD.parse(text)


def _cell_children(value: str) -> list[Token]:
    tokens = _blocks(f"| {value} | tail |\n|---|---|\n| 1 | 2 |\n")
    assert [t.type for t in tokens][:3] == ["table_open", "thead_open", "tr_open"]
    cells = [t for t in tokens if t.type == "inline"]
    assert len(cells) == 4, f"table split by {value!r}"
    assert cells[1].content == "tail"
    return cells[0].children or []


def _plain(text: str) -> str:
    return BREAKS.sub(" ", text).strip().replace("\u200b", "")


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_escaped_text_is_one_plain_table_cell(text: str) -> None:
    children = _cell_children(escape(text))
    assert {c.type for c in children} <= {"text"}
    assert "".join(c.content for c in children).replace("\u200b", "") == _plain(text)


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_escaped_text_is_one_plain_paragraph(text: str) -> None:
    tokens = _blocks(escape(text) + "\n")
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    assert {c.type for c in tokens[1].children or []} <= {"text"}


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=60).filter(lambda s: _plain(s) != ""))
def test_any_text_stays_literal(text: str) -> None:
    children = _cell_children(escape(text))
    assert {c.type for c in children} <= {"text"}
    assert "".join(c.content for c in children).replace("\u200b", "") == _plain(text)


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_no_mention_or_autolink_survives(text: str) -> None:
    rendered = MD.renderInline(escape(text))
    assert not re.search(r"@\w", rendered)
    assert "://" not in rendered and "www." not in rendered.lower()
    assert "<" not in rendered.replace("&lt;", "")


def test_markdown_is_not_escaped_twice() -> None:
    once = escape("a_b")
    assert escape(once) == once == "a\\_b"
    assert code("x|y") == "<code>x\\|y</code>"
    assert join(["a_b", Markdown("**c**")]) == "a\\_b, **c**"


def test_escape_shortens_long_text() -> None:
    assert len(escape("x" * 5000, 100)) == 100
    assert escape("x" * 5000, 100).endswith("…")


def test_links_only_to_http_urls() -> None:
    assert link("PR <1>", "https://github.com/o/r/pull/1") == (
        "[PR \\<1\\>](https://github.com/o/r/pull/1)"
    )
    assert link("x", "javascript:alert(1)") == "x"
    assert safe_url("https://example.com/a b)c") == "https://example.com/a%20b%29c"
    assert safe_url("ftp://example.com") is None


def test_truncate_cuts_at_a_line_and_closes_details() -> None:
    body = "\n".join(f"| row {i} |" for i in range(1000))
    text = f"head\n<details><summary>many rows</summary>\n\n{body}\n\n</details>\ntail\n"
    cut = truncate(text, 2000, "*truncated*")
    assert len(cut) <= 2000
    assert cut.endswith("*truncated*")
    assert cut.count("<details>") == cut.count("</details>") == 1
    kept_rows = [line for line in cut.splitlines() if line.startswith("| row")]
    assert kept_rows and all(line.endswith(" |") for line in kept_rows)
    assert truncate("short", 2000, "*truncated*") == "short"


FENCE_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from("`~\n\r\t ab<>@#|*-_\\\u202e\u2028"), max_size=200))
def test_fenced_text_is_one_code_block_whatever_it_holds(text: str) -> None:
    block = fenced(text, "yaml")
    after = _blocks(f"{block}\n\nafter the block\n")
    assert [t.type for t in after][:2] == ["fence", "paragraph_open"]
    assert after[0].info == "yaml"
    # exactly the text, without the characters that could reorder or break lines
    assert after[0].content.rstrip("\n") == FENCE_UNSAFE.sub("", text.replace("\r\n", "\n")).rstrip(
        "\n"
    )
    assert after[2].content == "after the block"


def test_fence_is_longer_than_any_backtick_run() -> None:
    config = 'key: "````"\nother: ``` closing?\n```'
    block = fenced(config, "yaml")
    assert block.startswith("`````yaml\n") and block.endswith("\n`````")
    [fence] = [t for t in _blocks(block) if t.type == "fence"]
    assert fence.content == config + "\n"
    assert fenced("x" * 50, limit=10) == "```\nxxxxxxxxx…\n```"


def test_truncate_closes_an_open_code_block_then_details() -> None:
    config = "\n".join(f"key_{i}: {i}  # <details>" for i in range(400))
    text = f"<details><summary>hints</summary>\n\n{fenced(config, 'yaml')}\n\n</details>\n"
    cut = truncate(text, 3000, "*truncated*")
    assert len(cut) <= 3000 and cut.endswith("*truncated*")
    tokens = _blocks(cut)
    types = [t.type for t in tokens]
    assert types.count("fence") == 1
    # the notice is a paragraph after the closed block, and the details block is closed
    assert tokens[-2].content == "*truncated*" and tokens[-3].type == "paragraph_open"
    assert cut.count("<details>") - cut.count("# <details>") == 1
    assert "\n</details>\n" in cut.split("`" * 3)[-1]
