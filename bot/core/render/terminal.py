"""The review as a terminal table (``threshold-bot review`` on an interactive terminal),
and ``plain``: outside text made safe to print on a terminal."""

from __future__ import annotations

import re

from rich.table import Table
from rich.text import Text

from bot.core.models import Review
from bot.core.render.gates import judged, label_plain, metric_plain, placeholder_rows
from bot.core.render.view import gate_row, verdict_counts

COLUMNS = (
    "gate",
    "metric",
    "old → proposed",
    "rule",
    "window min – max",
    "old fails",
    "new fails",
    "verdict",
)


# ESC or C1 introducers: OSC/DCS/SOS/PM/APC strings up to BEL or ST (or the end), CSI
# sequences, other two-character escapes; then every other C0/C1 control character except
# newline and tab, and the bidi overrides that reorder what the terminal shows.
_TERMINAL_CONTROLS = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


def plain(text: str) -> str:
    """``text`` without terminal escape sequences or control characters (newline and tab
    kept): printed, it cannot retitle the window, clear the screen or move the cursor."""
    return _TERMINAL_CONTROLS.sub("", text)


def headline_plain(review: Review) -> str:
    """The one-line verdict as plain text."""
    if review.error and review.conclusion == "neutral":
        return f"not reviewed: {review.error}"
    counts = verdict_counts(judged(review))
    summary = ", ".join(f"{n} {verdict.replace('_', ' ')}" for verdict, n in counts.items())
    if review.error:
        summary += f"; the history could not be read: {review.error}"
    return f"{review.conclusion.replace('_', ' ')}: {summary or 'no gates'}"


def _placeholders_caption(review: Review) -> Text | None:
    """The placeholders, apart from the judged gates: ``Placeholders, not judged: …``."""
    rows = placeholder_rows(review)
    if not rows:
        return None
    listed = "; ".join(
        f"{r.gate.name} = {r.value} ({r.gate.file} line {r.gate.line}): {r.gate.ignored}"
        for r in rows
    )
    return Text(plain(f"Placeholders, not judged: {listed}"))


def review_table(review: Review) -> Table:
    """One row per judged gate (a reference reads ``metric ≈ 0.95 ±8% (≥ 0.874)``), the
    placeholders in the caption; every cell is plain text (no Rich markup is interpreted)."""
    table = Table(
        title=Text(plain(headline_plain(review))),
        title_justify="left",
        caption=_placeholders_caption(review),
        caption_justify="left",
    )
    for column in COLUMNS:
        table.add_column(column)
    for g in judged(review):
        row = gate_row(g)
        worst = f"\nworst at step {g.worst_step}" if g.worst_step is not None else ""
        cells = (
            label_plain(g) + worst,
            metric_plain(g),
            row.change,
            row.rule,
            row.window,
            row.old_fails,
            row.new_fails,
            row.verdict,
        )
        table.add_row(*(Text(plain(str(c).replace("**", ""))) for c in cells))
    return table
