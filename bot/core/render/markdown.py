"""Safe GitHub-flavoured Markdown: escaping of outside text and a few trusted builders.

Every value that comes from outside (metric, file, run and gate names, commit messages,
PR titles, user names) goes through ``escape``, which makes it inert text: it cannot break
a table row or a line, open an HTML tag, start a link, image, emphasis or math span,
@-mention a user or team, reference an issue or PR (``#12``, ``owner/repo#12``, ``GH-12``:
GitHub would link it and add a backlink to that issue), or become an autolink.  A
zero-width space after ``@``, ``#`` or ``GH-`` breaks GitHub's patterns and shows the same
text (a backslash before ``#`` does not: GitHub still links it).  ``Markdown`` marks text that is
already safe, such as the bot's own links to the PRs it attributes; the builders below
return it and escape what they are given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, urlsplit

ZWSP = "&#8203;"  # a zero-width space, written as a character reference


class Markdown(str):
    """Text that is already safe Markdown (built here or by a template), never re-escaped."""

    __slots__ = ()


# line and paragraph breakers, other control characters, bidi overrides
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")
# ASCII punctuation that means something inline in GFM, HTML or GitHub math ("(" and "!"
# only matter after "]" / before "[", which are escaped)
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&$])")
# ... and what means something only at the start of a line (lists, headings, setext)
_LEADING = re.compile(r"^([-+=#]|\d{1,9}[.)](?=\s|$))")
_MENTION = re.compile(r"@")
_REFERENCE = re.compile(r"(?i)(#|\bGH-)(?=\d)")  # #12, owner/repo#12, GH-12
_AUTOLINK = re.compile(r"(?i)(://|www\.)")
# what a fenced block must not hold: control characters but newline and tab, bidi overrides
_FENCE_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_BACKTICK_RUN = re.compile(r"`+")
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def escape(value: object, limit: int = 1000) -> Markdown:
    """Make ``value`` (turned into text) inert inside a Markdown line or table cell.

    Text longer than ``limit`` characters is shortened with an ellipsis.
    """
    if isinstance(value, Markdown):
        return value
    text = _BREAKS.sub(" ", str(value)).strip()
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = _SPECIAL.sub(r"\\\1", text)
    text = _LEADING.sub(lambda m: m.group(0)[:-1] + "\\" + m.group(0)[-1], text)
    text = _REFERENCE.sub(lambda m: m.group(1) + ZWSP, text)  # before any ZWSP is written
    text = _MENTION.sub("@" + ZWSP, text)
    text = _AUTOLINK.sub(lambda m: m.group(0)[0] + ZWSP + m.group(0)[1:], text)
    return Markdown(text)


def code(value: object) -> Markdown:
    """Outside text shown in a code font: ``<code>`` with the escaped text inside."""
    return Markdown(f"<code>{escape(value)}</code>")


def join(items: Iterable[object], separator: str = ", ") -> Markdown:
    """Items joined by ``separator`` (itself trusted); items not yet Markdown are escaped."""
    return Markdown(separator.join(escape(item) for item in items))


def safe_url(url: str) -> str | None:
    """``url`` percent-encoded for a Markdown link target, or None unless http(s)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return quote(url.strip(), safe=":/?#=&%~+,;@-._")


def link(text: object, url: str | None) -> Markdown:
    """``[text](url)`` with the text escaped; plain escaped text when the URL is unusable."""
    target = safe_url(url) if url else None
    label = escape(text)
    if target is None:
        return label
    return Markdown(f"[{label}]({target})")


def fenced(text: str, info: str = "", limit: int = 4000) -> Markdown:
    """Outside text as a fenced code block, shown exactly as written (nothing in it is
    interpreted): the fence is longer than any backtick run in the text, so no line of it
    can close the block; control characters other than newline and tab, and bidi
    overrides, are removed; text longer than ``limit`` characters is shortened.  ``info``
    (the language) is the bot's own."""
    body = _FENCE_UNSAFE.sub("", text.replace("\r\n", "\n"))
    if len(body) > limit:
        body = body[: limit - 1] + "…"
    longest = max((len(run) for run in _BACKTICK_RUN.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return Markdown(f"{fence}{info}\n{body.rstrip(chr(10))}\n{fence}")


def _split_code(lines: Iterable[str]) -> tuple[list[str], str | None]:
    """The lines outside fenced code blocks (fences excluded), and the fence of a block
    still open at the end, or None (CommonMark: a fence line of at least as many of the same
    character, with nothing after it, closes the block)."""
    outside: list[str] = []
    fence: str | None = None
    for line in lines:
        match = _FENCE_LINE.match(line)
        run, rest = match.groups() if match else ("", "")
        if match and run[0] == "`" and "`" in rest:
            match = None  # a backtick fence's info string holds no backtick: not a fence
        if fence is None:
            if match:
                fence = run
            else:
                outside.append(line)
        elif match and run[0] == fence[0] and len(run) >= len(fence) and not rest.strip():
            fence = None
    return outside, fence


def _tags(lines: Iterable[str], tag: str) -> int:
    """How many lines start with ``tag`` (the templates write ``<details>`` and
    ``</details>`` at the start of a line)."""
    return sum(line.startswith(tag) for line in lines)


def truncate(text: str, limit: int, notice: str) -> str:
    """``text`` cut at a line boundary to fit ``limit`` characters, ending with ``notice``.

    A code block left open is closed, then the open ``<details>`` blocks.  Escaped outside
    text never contains a raw ``<`` and fenced outside text is not counted, so every tag
    counted here comes from the templates.
    """
    if len(text) <= limit:
        return text
    closer = "\n</details>\n"
    budget = limit - len(notice) - 2
    kept = text[:budget]
    while True:
        kept = kept[: max(0, kept.rfind("\n"))]
        outside, fence = _split_code(kept.split("\n"))
        depth = _tags(outside, "<details>") - _tags(outside, "</details>")
        tail = (f"{fence}\n" if fence else "") + closer * max(0, depth)
        if len(kept) + len(tail) <= budget or not kept:
            break
    return f"{kept}\n{tail}\n{notice}"
