"""The review as a terminal table (``threshold-bot review`` on an interactive terminal)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from bot.core.models import Review
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


def headline_plain(review: Review) -> str:
    """The one-line verdict as plain text."""
    if review.error and review.conclusion == "neutral":
        return f"not reviewed: {review.error}"
    counts = verdict_counts(review.gates)
    summary = ", ".join(f"{n} {verdict.replace('_', ' ')}" for verdict, n in counts.items())
    if review.error:
        summary += f"; the history could not be read: {review.error}"
    return f"{review.conclusion.replace('_', ' ')}: {summary or 'no gates'}"


def review_table(review: Review) -> Table:
    """One row per gate; every cell is plain text (no Rich markup is interpreted)."""
    table = Table(title=Text(headline_plain(review)), title_justify="left")
    for column in COLUMNS:
        table.add_column(column)
    for g in review.gates:
        row = gate_row(g)
        cells = (
            g.name,
            f"{g.metric} {row.op}",
            row.change,
            row.rule,
            row.window,
            row.old_fails,
            row.new_fails,
            row.verdict,
        )
        table.add_row(*(Text(str(c).replace("**", "")) for c in cells))
    return table
