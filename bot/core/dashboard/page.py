"""A repository's whole threshold dashboard as one HTML page (pure, no clock).

The issue's body is cut to fit GitHub's limit (``bot.core.dashboard.body``); this page holds
all of it, nothing left out, and the App serves it under ``REPORT_BASE_URL`` (the report
pages' route, ``bot.app.reports``).  It is rendered from the same view and the same
template blocks as the body (``templates/dashboard.md.j2`` with ``page`` on: no hidden
comment, no checkbox, no raw HTML), each block's Markdown turned into HTML by markdown-it-py
with raw HTML **off** (any ``<`` of the text is shown as text, link targets are checked by
markdown-it's own rules).  The one tag the body writes itself, ``<code>`` (``code()``: the
escaped text of a name inside it), is read by an inline rule that accepts exactly
``<code>`` and ``</code>`` and makes them markdown-it tokens: outside text cannot write one,
since ``escape`` writes its every ``<`` as ``\\<``, which markdown-it reads as text first.
The HTML goes inside ``templates/dashboard.html.j2`` (autoescaped, the report
page's style, no script; Healthy and the literals not bound collapsed).

Work and size are linear in the view: about 800 bytes of HTML per gate (a gate's line and
its line under *Detected threshold files*); 2,000 gates, 1.6 MB in about 1.2 s, most of it
markdown-it's parsing (``bench/bench_dashboard_page.py``).
"""

from __future__ import annotations

from functools import cache
from typing import Literal, cast

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markupsafe import Markup

from bot.core.dashboard.body import DASHBOARD_TITLE, context
from bot.core.dashboard.view import RepoView
from bot.core.render.html_report import CSP
from bot.core.render.loader import html_environment, render_blocks

__all__ = ["dashboard_page"]

_COLLAPSED = {"healthy": "Healthy", "hints": "Literals not bound to a gate"}
_LEFT_OUT = ("check",)  # the "check again now" box: the only


_CODE_TAGS: tuple[tuple[str, str, Literal[1, -1]], ...] = (
    ("<code>", "code_open", 1),
    ("</code>", "code_close", -1),
)


def _code_tag(state: StateInline, silent: bool) -> bool:
    """The body's own ``<code>`` / ``</code>`` (unescaped: never outside text) as tokens."""
    for tag, kind, nesting in _CODE_TAGS:
        if state.src.startswith(tag, state.pos):
            if not silent:
                state.push(kind, "code", nesting)
            state.pos += len(tag)
            return True
    return False


@cache
def _markdown() -> MarkdownIt:
    """CommonMark with raw HTML off (every other tag of the text is shown as text) and the
    body's ``<code>`` read as tokens."""
    md = MarkdownIt("commonmark", {"html": False})
    md.inline.ruler.before("html_inline", "code_tag", _code_tag)
    return md


def dashboard_page(view: RepoView) -> str:
    """The page of ``view``'s whole dashboard (this module's docstring); the same view always
    gives the same page."""
    values = context(view, page=True)
    counts = {name: len(cast(list[object], values[name])) for name in _COLLAPSED}
    parts = [
        {
            "name": name,
            "summary": f"{_COLLAPSED[name]} ({counts[name]})" if name in _COLLAPSED else "",
            "html": Markup(_markdown().render(text)),
        }
        for name, text in render_blocks("dashboard.md.j2", values)
        if text.strip() and name not in _LEFT_OUT
    ]
    return (
        html_environment()
        .get_template("dashboard.html.j2")
        .render(
            title=f"{DASHBOARD_TITLE} of {view.repo}",
            csp=CSP,
            parts=parts,
            repo=view.repo,
            sha=view.sha[:12],
        )
    )
