"""The regime table on a terminal, in the widest layout that fits without cutting a
period, a metric name or a median: a row per regime (as in the PR comment); else a row
per metric with a column per regime; else a block per regime.  A ``*`` marks a median
that moved at the change that started its regime (bold in the comment).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from bot.core.models import Review
from bot.core.render.terminal_parts import indent, item, text
from bot.core.render.terminal_text import plain, unmark
from bot.core.render.view import regime_metrics, regime_rows

MOVED = "*"  # after a regime's median: moved at the change that started the regime
STARTED_BY_MIN = 12  # the narrowest "started by" column of the regime table
GAP = 2  # columns between two columns of a table


@dataclass(frozen=True)
class _Row:
    start: str
    end: str
    runs: int
    medians: tuple[str, ...]
    started_by: str  # "—" for the first regime

    @property
    def period(self) -> str:
        return f"{self.start} – {self.end}"


def _period(period: str) -> tuple[str, str]:
    """A regime's first and last day (``view`` writes ``1 Jul 2026 – 9 Jul 2026``)."""
    start, _, end = period.partition(" – ")
    return start, end


def _widest(cells: Iterator[str] | list[str]) -> int:
    return max(map(cell_len, cells), default=0)


class RegimeTable:
    """The regimes of a review, laid out for the width they are printed at."""

    def __init__(self, review: Review) -> None:
        metrics = regime_metrics(review)
        self.columns = metrics  # as in the review (``metrics``: made safe to print)
        self.metrics = [plain(m) for m in metrics]
        self.rows = [
            _Row(
                *_period(r.period),
                runs=r.runs,
                medians=tuple(unmark(m) + (MOVED if m.startswith("**") else "") for m in r.medians),
                started_by=unmark(r.started_by).replace("…", ".."),  # a commit range, as git's
            )
            for r in regime_rows(review, metrics, None)
        ]

    # --------------------------------------------------------------- a row per regime

    def _rows_width(self) -> int:
        columns = [
            [r.period for r in self.rows],
            ["runs", *(str(r.runs) for r in self.rows)],
            *([m, *(r.medians[i] for r in self.rows)] for i, m in enumerate(self.metrics)),
        ]
        return sum(_widest(c) + GAP for c in columns) + STARTED_BY_MIN

    def _by_regime(self) -> Table:
        table = Table(box=None, pad_edge=False, show_edge=False)
        table.add_column("period", no_wrap=True)
        table.add_column("runs", no_wrap=True, justify="right")
        for metric in self.metrics:
            table.add_column(Text(metric), no_wrap=True, justify="right")
        table.add_column("started by", overflow="fold", min_width=STARTED_BY_MIN)
        for r in self.rows:
            table.add_row(r.period, str(r.runs), *map(Text, r.medians), text(r.started_by))
        return table

    # --------------------------------------------------------------- a row per metric

    def _header(self, r: _Row) -> str:
        return f"{r.start} –\n{r.end}\n{r.runs} runs"

    def _metrics_width(self) -> int:
        columns = [[*self._header(r).splitlines(), *r.medians] for r in self.rows]
        return _widest(self.metrics) + sum(_widest(c) + GAP for c in columns)

    def _by_metric(self) -> Iterator[RenderableType]:
        table = Table(box=None, pad_edge=False, show_edge=False)
        table.add_column("median of", no_wrap=True)
        for r in self.rows:
            table.add_column(Text(self._header(r)), no_wrap=True, justify="right")
        for i, metric in enumerate(self.metrics):
            table.add_row(Text(metric), *(Text(r.medians[i]) for r in self.rows))
        yield table
        for r in self.rows:
            if r.started_by != "—":
                yield item(f"{r.period}: started by {r.started_by}")

    # --------------------------------------------------------------- a block per regime

    def _blocks(self) -> Iterator[RenderableType]:
        widest = _widest([m for r in self.rows for m in r.medians])
        for r in self.rows:
            by = f", started by {r.started_by}" if r.started_by != "—" else ""
            yield text(f"{r.period}, {r.runs} runs{by}", "bold")
            cells = Table.grid(padding=(0, GAP))
            cells.add_column(overflow="fold")
            cells.add_column(no_wrap=True, justify="right", min_width=widest)
            for metric, median in zip(self.metrics, r.medians, strict=True):
                cells.add_row(text(metric), Text(median))
            yield indent(cells)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self._rows_width() <= options.max_width:
            yield self._by_regime()
        elif self._metrics_width() <= options.max_width:
            yield from self._by_metric()
        else:
            yield from self._blocks()
