"""The dashboard issue's Markdown body, from a ``RepoView`` (pure, no clock).

Grouped like Renovate's Dependency Dashboard (``templates/dashboard.md.j2``): a hidden
marker line (:data:`DASHBOARD_MARKER`), one intro line, the newest notes of what was asked,
then *Needs attention*, *Flaky*, *Looser than the history supports*, *Healthy* (collapsed),
*Detected threshold files* and the literals not bound (collapsed), and the "check again"
box.  Where each gate goes is ``bot.core.dashboard.sections``; the boxes are
``bot.core.dashboard.boxes``.  Every outside string (paths, gate and metric names, hint
text, sources, notes) is escaped by the template's environment or the builders here.

Size: the body stays within ``limit`` characters.  When the whole does not fit, sections
are left out, least urgent first (:data:`CUT_ORDER`), and a last line names them and links
the report page (``view.report_url``) when set; if *Needs attention* alone is still too
long, it is cut at a line boundary (its checkboxes come first in each entry, so whole
entries are kept or dropped).  Each part is rendered once: work is linear in the view.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote

from bot.core.dashboard.boxes import Box
from bot.core.dashboard.sections import GatePlace, not_evaluated, place_gates
from bot.core.dashboard.view import BODY_LIMIT, FileView, RepoView
from bot.core.formatting import day_month_year, plural
from bot.core.models import Gate, GateReview, UnboundVariable
from bot.core.render.gates import metric_cell, proposed_text
from bot.core.render.loader import render_blocks
from bot.core.render.markdown import Markdown, code, escape, fenced, join, link, safe_url, truncate
from bot.core.render.sparkline import sparkline
from bot.core.thresholds.edit import format_literal

__all__ = [
    "BODY_LIMIT",
    "CUT_ORDER",
    "DASHBOARD_MARKER",
    "DASHBOARD_TITLE",
    "NOTES_SHOWN",
    "SPARK_WIDTH",
    "context",
    "dashboard_body",
    "dashboard_fingerprint",
]

DASHBOARD_TITLE = "Threshold dashboard"
DASHBOARD_MARKER = "<!-- threshold-bot:dashboard -->"
NOTES_SHOWN = 5  # the newest notes of what was asked through the boxes
SPARK_WIDTH = 20  # glyphs of a gate's sparkline
HINT_CONFIG_LIMIT = 1000  # characters of one hint's config lines shown
CUT_ORDER = ("hints", "healthy", "detected", "looser", "flaky", "notes")
"""The blocks left out, in this order, until the body fits; *Needs attention* is cut last."""
_NAMES = {
    "hints": "the literals not bound",
    "healthy": "Healthy",
    "detected": "Detected threshold files",
    "looser": "Looser than the history supports",
    "flaky": "Flaky",
    "notes": "the notes",
    "attention": "part of Needs attention",
}


@dataclass(frozen=True)
class _Row:
    """One gate's line, its values made safe."""

    box: Markdown  # the marker of its "rebaseline this gate" box, or ""
    label: Markdown  # the gate's name, linked to its line
    file: Markdown  # its file, linked
    condition: Markdown
    why: str
    spark: str
    item: Markdown  # the open drift issue or PR, or ""
    rebaselined: Markdown  # the last rebaseline, or ""
    rule: str  # the rule's value (looser gates)
    model: str
    better: str  # the backtest's better model


def _blob(view: RepoView, path: str, line: int | None = None) -> str | None:
    """The web address of ``path`` (at ``line``) at the view's head, percent-encoded; None
    without a usable repository address."""
    base = _base(view.url)
    if base is None:
        return None
    anchor = f"#L{line}" if line else ""
    return f"{base}/blob/{quote(view.sha, safe='')}/{quote(path, safe='/')}{anchor}"


@lru_cache(maxsize=8)
def _base(url: str) -> str | None:
    """The repository's address as a link target (``safe_url``), None when unusable."""
    return safe_url(url.rstrip("/")) if url else None


def _linked_code(text: str, url: str | None) -> Markdown:
    """``text`` in a code font, linked to ``url`` (built by :func:`_blob`: already safe)."""
    return Markdown(f"[{code(text)}]({url})") if url else code(text)


def _item(view: RepoView, file: FileView) -> Markdown:
    item = file.item
    if item is None:
        return Markdown("")
    kind, path = ("PR", "pull") if item.is_pull else ("issue", "issues")
    url = f"{view.url.rstrip('/')}/{path}/{item.number}" if view.url else None
    return (
        link(f"drift {kind} #{item.number}", url)
        if url
        else Markdown(f"drift {kind} #{item.number}")
    )


def _rebaselined(view: RepoView, file: FileView) -> Markdown:
    done = file.rebaselined
    if done is None:
        return Markdown("")
    url = f"{view.url.rstrip('/')}/pull/{done.pull}" if view.url else None
    words = f"#{done.pull}"
    pull = link(words, url) if url else Markdown(words)
    return Markdown(f"Last rebaselined {day_month_year(done.at)} in {pull}")


def _row(view: RepoView, files: dict[str, FileView], place: GatePlace, page: bool) -> _Row:
    g, d = place.gate, place.drift
    file = files[place.file]
    points = g.chart.points if g.chart else ()
    drifting = d.status == "drifting"
    shown = place.rule if drifting or place.section == "looser" else None
    return _Row(
        box=Markdown(Box(action="rebaseline-gate", file=file.path, gate=g.name).marker)
        if drifting and not page
        else Markdown(""),
        label=_linked_code(g.name, _blob(view, file.path, g.line)),
        file=_linked_code(file.path, _blob(view, file.path)),
        condition=_condition(g),
        why=place.why,
        spark=sparkline([p.value for p in points], SPARK_WIDTH),
        item=_item(view, file),
        rebaselined=_rebaselined(view, file),
        rule="" if shown is None else format_literal(shown, g.decimals),
        model="" if shown is None else g.model,
        better=place.better_model,
    )


def _condition(g: GateReview) -> Markdown:
    """``metric ≥ 0.32`` (a limit), ``metric ≈ 0.95 ±8% (≥ 0.874)`` (a reference)."""
    cell = metric_cell(g)
    return cell if g.kind == "reference" else Markdown(f"{cell} {escape(proposed_text(g))}")


def _gate_line(gate: Gate, url: str | None) -> Markdown:
    """A gate as read: ``NAME: metric >= 0.8`` (a reference: ``metric ≈ 0.95``), and why a
    placeholder is not judged."""
    op = "≈" if gate.kind == "reference" else gate.op
    line = f"{_linked_code(gate.name, url)}: {code(f'{gate.metric} {op} {gate.literal}')}"
    if gate.ignored:
        line += f" (not judged: {escape(gate.ignored)})"
    return Markdown(line)


def _indented(text: Markdown) -> Markdown:
    """``text`` indented two spaces: inside the list item above it."""
    return Markdown("\n".join(f"  {line}" if line else line for line in text.split("\n")))


def _hint(view: RepoView, hint: UnboundVariable) -> dict[str, object]:
    return {
        "label": _linked_code(hint.name, _blob(view, hint.file, hint.line)),
        "file": escape(hint.file),
        "line": hint.line,
        "literal": code(hint.literal),
        "reason": escape(hint.reason),
        "config": _indented(fenced(hint.config, "yaml", HINT_CONFIG_LIMIT)) if hint.config else "",
    }


def context(view: RepoView, *, page: bool = False) -> dict[str, object]:
    """What ``templates/dashboard.md.j2`` renders of ``view``; ``page``: for the report page
    (``bot.core.dashboard.page``: no hidden comment, no box, no link to itself)."""
    places = place_gates(view)
    files = {f.path: f for f in view.files}
    rows = {s: [_row(view, files, p, page) for p in places if p.section == s] for s in _SECTIONS}
    target = safe_url(view.report_url) if view.report_url and not page else None
    many = [
        (
            Markdown(Box(action="rebaseline-file", file=f.path).marker),
            _linked_code(f.path, _blob(view, f.path)),
        )
        for f in view.files
        if not page and f.report is not None and len(f.report.drifting) >= 2
    ]
    detected = [
        {
            "file": _linked_code(f.path, _blob(view, f.path)),
            "source": escape(f.source) if f.source else "",
            "gates": [_gate_line(g, _blob(view, f.path, g.line)) for g in f.gates],
            "problem": escape(f.problem) if f.report is None else "",
        }
        for f in view.files
    ]
    return {
        "page": page,
        "report_url": Markdown(target) if target else "",
        "marker": Markdown(DASHBOARD_MARKER),
        "branch": code(view.branch),
        "sha": code(view.sha[:12]),
        "counts": {s: len(r) for s, r in rows.items()},
        "unevaluated_count": plural(len(not_evaluated(view)), "file"),
        "notes": [escape(n) for n in view.notes[:NOTES_SHOWN]],
        "attention": rows["attention"],
        "unevaluated": [
            {"file": _linked_code(f.path, _blob(view, f.path)), "problem": escape(f.problem)}
            for f in not_evaluated(view)
        ],
        "file_boxes": many,
        "flaky": rows["flaky"],
        "looser": rows["looser"],
        "healthy": rows["healthy"],
        "detected": detected,
        "hints": [_hint(view, h) for f in view.files for h in f.hints],
        "check_box": Markdown(Box(action="check").marker),
    }


_SECTIONS = ("attention", "flaky", "looser", "healthy")
_MORE = "- …"  # the last line of a cut *Needs attention*


def _notice(cut: Sequence[str], report_url: str) -> str:
    names = join([_NAMES[c] for c in cut])
    target = safe_url(report_url) if report_url else None
    where = f" [The whole dashboard]({target})." if target else ""
    return f"*Left out to fit GitHub's size limit: {names}.{where}*\n"


def _whole(blocks: dict[str, str], names: Sequence[str], notice: str) -> str:
    """The blocks ``names`` in their order, ``notice`` before the last box (``check``)."""
    parts = [blocks[n] for n in names if n != "check"]
    parts += [notice] if notice else []
    parts += [blocks["check"]] if "check" in names else []
    return "\n".join(parts)


def dashboard_body(view: RepoView, *, limit: int = BODY_LIMIT) -> str:
    """The dashboard's Markdown body for ``view`` (this module's docstring), at most
    ``limit`` characters; the same view always gives the same body."""
    blocks = dict(render_blocks("dashboard.md.j2", context(view)))
    order = [name for name, text in blocks.items() if text.strip()]
    text = _whole(blocks, order, "")
    cut: list[str] = []
    for name in CUT_ORDER:
        if len(text) <= limit:
            return text
        if name in order:
            order.remove(name)
            cut.append(name)
            text = _whole(blocks, order, _notice(cut, view.report_url))
    if len(text) <= limit or "attention" not in order:
        return text[:limit]
    notice = _notice([*cut, "attention"], view.report_url)
    room = limit - len(_whole(blocks, [n for n in order if n != "attention"], notice)) - 1
    if room > len(_MORE) + 2:
        blocks["attention"] = truncate(blocks["attention"], room, _MORE)
        text = _whole(blocks, order, notice)
    if len(text) > limit:  # not even the heading fits: the intro and the last box only
        order.remove("attention")
        text = _whole(blocks, order, notice)
    return text[:limit]


def dashboard_fingerprint(body: str) -> str:
    """A digest of what ``body`` shows (SHA-256 hex): the issue is rewritten only when it
    changes.  The boxes' ticks are not part of it (unticking rewrites nothing by itself)."""
    shown = body.replace("- [x] ", "- [ ] ").replace("- [X] ", "- [ ] ")
    return hashlib.sha256(shown.encode("utf-8", "surrogatepass")).hexdigest()
