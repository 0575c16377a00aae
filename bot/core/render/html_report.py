"""The HTML report: one self-contained page with the review and its interactive charts.

``html_report`` writes the same review as the PR comment (``render_comment``'s Markdown,
rendered to HTML by markdown-it-py), then a "Charts" section: one canvas per gate with chart
data and one per regime-relevant metric (``report_charts``), drawn by Chart.js.  Everything
is in the file: Chart.js (vendored in ``templates/static/``, see its README) and the page's
script are inlined, the charts' data is JSON in a ``<script type="application/json">``
element (read with ``JSON.parse``, never part of script source), and a
Content-Security-Policy lets the page load nothing and run only its inline scripts and
styles.  Without JavaScript the review is all there; the charts are not.

Outside text cannot escape its place: the Jinja template autoescapes; the JSON has ``<``,
``>`` and ``&`` as ``\\u`` escapes, so no ``</script>`` can appear in it; the comment's
Markdown is our own renderer's (outside strings in it already escaped for Markdown), and the
raw HTML it holds on purpose passes only as an allow-list of bare tags (``<details>``,
``<summary>``, ``<code>``…), everything else in an HTML block shown as text.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markupsafe import Markup

from bot.core.models import Review
from bot.core.render.loader import html_environment, static_text
from bot.core.render.report_charts import ChartSpec, chart_caption, chart_specs, chart_styles
from bot.core.render.review import render_comment

__all__ = ["CHARTJS_VERSION", "CSP", "comment_html", "html_report", "script_json"]

CHARTJS_VERSION = "4.6.1"  # templates/static/chart.umd.min.js (its README.md)
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)
TITLE_LIMIT = 200
_MAP_COMMENT = re.compile(r"\n//# sourceMappingURL=\S*\s*$")
# a comment, or a tag: what an HTML token of the comment may hold
_PIECE = re.compile(r"<!--.*?-->|<[^<>]*>", re.DOTALL)
_ALLOWED_TAG = re.compile(r"</?(?:details|summary|code|sub|sup|br|b|strong|em|i|kbd|p)\s*/?>")
_OPEN_DETAILS = re.compile(r"<details\s+open\s*>")
_CHAR_REF = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_SEPARATOR = re.compile(r"([/_])(?=[^/_])")  # where a cell's text may wrap: after / and _
_JSON_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028"}


# --------------------------------------------------------------------------- the comment


def _text(fragment: str) -> str:
    """Text of an HTML token as inert HTML: markup characters escaped, character
    references (such as the zero-width spaces of ``escape``) kept."""
    out, pos = [], 0
    for ref in _CHAR_REF.finditer(fragment):
        out += [html.escape(fragment[pos : ref.start()]), ref.group(0)]
        pos = ref.end()
    out.append(html.escape(fragment[pos:]))
    return "".join(out)


def _allowed_html(fragment: str) -> str:
    """An HTML token of the comment with only the allow-listed bare tags left as markup;
    comments (the hidden marker) dropped; any other tag shown as text."""
    out, pos = [], 0
    for piece in _PIECE.finditer(fragment):
        out.append(_text(fragment[pos : piece.start()]))
        tag = piece.group(0)
        if _ALLOWED_TAG.fullmatch(tag.lower()) or _OPEN_DETAILS.fullmatch(tag.lower()):
            out.append(tag.lower())
        elif not tag.startswith("<!--"):
            out.append(html.escape(tag))
        pos = piece.end()
    out.append(_text(fragment[pos:]))
    return "".join(out)


def _html_token(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return _allowed_html(tokens[idx].content)


def _fence(self: RendererHTML, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    if tokens[idx].info.strip().split()[:1] == ["mermaid"]:
        return '<p class="note">Drawn interactively under <a href="#charts">Charts</a>.</p>\n'
    return RendererHTML.fence(self, tokens, idx, options, env)


def _cell(self: RendererHTML, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """A table cell's tag; notes in ``env`` whether the text that follows is in a cell."""
    env["cell"] = tokens[idx].nesting == 1
    return self.renderToken(tokens, idx, options, env)


def _breakable(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: Any, env: Any
) -> str:
    """Text, escaped; in a table cell with a break opportunity (``<wbr>``, no character)
    after each ``/`` and ``_``: a long metric name wraps at its separators, so a wide table
    (the regimes') fits the page rather than running past it."""
    text = RendererHTML.text(self, tokens, idx, options, env)
    return _SEPARATOR.sub(r"\1<wbr>", text) if env.get("cell") else text


@cache
def _markdown() -> MarkdownIt:
    """CommonMark with GitHub's tables and strikethrough; raw HTML through the allow-list;
    Mermaid blocks replaced by a pointer to the report's own charts; table cells' text
    breakable at ``/`` and ``_``."""
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.add_render_rule("html_block", _html_token)
    md.add_render_rule("html_inline", _html_token)
    md.add_render_rule("fence", _fence)
    for cell in ("th_open", "th_close", "td_open", "td_close"):
        md.add_render_rule(cell, _cell)
    md.add_render_rule("text", _breakable)
    return md


def comment_html(markdown: str) -> Markup:
    """The review comment's Markdown (as ``render_comment`` writes it, and only that) as HTML."""
    return Markup(_markdown().render(markdown))


# --------------------------------------------------------------------------- the page


def script_json(data: object) -> Markup:
    """``data`` as JSON that can sit inside a ``<script>`` element: no ``<``, ``>`` or ``&``
    (written as ``\\u`` escapes, which JSON reads back as the same characters)."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Markup(re.sub("[<>&\u2028]", lambda m: _JSON_UNSAFE[m.group(0)], text))


def _inline_script(name: str) -> Markup:
    """A script of ``templates/static/`` for an inline ``<script>``: without its source-map
    comment (nothing to fetch); one that could end the element is a packaging error."""
    text = _MAP_COMMENT.sub("\n", static_text(name))
    if re.search(r"</script|<!--", text, re.IGNORECASE):
        raise RuntimeError(f"static/{name} cannot be inlined in a <script> element")
    return Markup(text)


@cache
def _scripts() -> tuple[Markup, Markup]:
    return _inline_script("chart.umd.min.js"), _inline_script("report.js")


def html_report(
    review: Review,
    *,
    title: str,
    repo_url: str | None = None,
    app_mode: bool = False,
    approved: str | None = None,
    cli_options: str = "--history FILE",
) -> str:
    """The self-contained HTML report of ``review``, titled ``title`` (outside text: escaped,
    shortened beyond 200 characters).  The review part is ``render_comment``'s with the
    same ``repo_url``, ``app_mode``, ``approved`` and ``cli_options``, without its Mermaid
    charts; the charts are ``report_charts.chart_specs``'s."""
    title = " ".join(title.split())
    if len(title) > TITLE_LIMIT:
        title = title[: TITLE_LIMIT - 1] + "…"
    markdown = render_comment(
        review,
        repo_url=repo_url,
        app_mode=app_mode,
        approved=approved,
        cli_options=cli_options,
        charts=False,
    )
    specs: list[ChartSpec] = chart_specs(review)
    chartjs, script = _scripts()
    return (
        html_environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            csp=CSP,
            comment=comment_html(markdown),
            charts=specs,
            caption=chart_caption(specs),
            data=script_json({"charts": specs, "styles": chart_styles()}),
            chartjs=chartjs,
            chartjs_version=CHARTJS_VERSION,
            script=script,
        )
    )
