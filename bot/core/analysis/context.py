"""What every gate reviewed against one history shares: the finished runs, their regimes, and
the values gates compare, extracted once per :class:`~bot.core.analysis.values.Extraction`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from bot.core.analysis.explain import describe_missing
from bot.core.analysis.keys import (
    closest_keys,
    gate_key,
    resolve_key,
    series_keys,
    summary_keys,
)
from bot.core.analysis.values import Extraction, extract, extraction_of
from bot.core.analysis.windows import FloatArray, Series, run_times
from bot.core.models import Change, Gate, NoDataReason, Regime, Run, Trend

__all__ = ["HistoryContext"]


@dataclass
class HistoryContext:
    """Runs, regimes and the gated values of one history."""

    runs: Sequence[Run]
    regimes: list[Regime]
    changes: list[Change]
    read: int = 0  # runs read, in any state
    unfinished_keys: frozenset[str] = frozenset()  # summary keys of runs not finished
    not_numbers: Mapping[str, int] = field(default_factory=dict)  # History.not_numbers
    times: FloatArray = field(init=False)
    keys: frozenset[str] = field(init=False)  # summary keys of the finished runs
    columns: dict[Extraction, Series] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.times = run_times(self.runs)
        self.keys = summary_keys(self.runs)

    @cached_property
    def series_keys(self) -> frozenset[str]:
        """Keys of the finished runs' per-step series."""
        return series_keys(self.runs)

    def key(self, metric: str) -> str:
        """The key ``metric`` reads (``eval.acc`` reads a nested ``eval/acc``): a summary key,
        else a per-step series key."""
        return gate_key(metric, self.keys, lambda: self.series_keys)

    def values(self, gate: Gate) -> Series:
        """What ``gate`` compares, over the finished runs having it (extracted once, then
        cached)."""
        what = extraction_of(gate, self.key(gate.metric))
        if what not in self.columns:
            self.columns[what] = extract(self.runs, what, self.times)
        return self.columns[what]

    def closest(self, metric: str) -> tuple[str, ...]:
        """The finished runs' keys most like ``metric``, which none of them has."""
        return closest_keys(metric, self.keys)

    def set_aside(self, metric: str) -> int:
        """How many finished runs have a value of ``metric`` that is not a number."""
        return self.not_numbers.get(resolve_key(metric, self.not_numbers.keys()), 0)

    def no_data_reason(self, metric: str) -> NoDataReason:
        """Why no finished run has a number for ``metric``."""
        if not self.read:
            return "empty_history"
        if not self.runs:
            return "no_finished_runs"
        return "not_numbers" if self.set_aside(metric) else "no_metric"

    def missing(self, metric: str) -> str:
        """Why a gate on ``metric``, which no finished run has, cannot be verified."""
        return describe_missing(
            metric,
            closest=self.closest(metric),
            read=self.read,
            finished=len(self.runs),
            others_have_it=resolve_key(metric, self.unfinished_keys) in self.unfinished_keys,
            not_numbers=self.set_aside(metric),
        )

    def regime_start(self, metric: str) -> datetime | None:
        """Start of ``metric``'s current regime: its newest change (None: all runs); when it
        drifts in the newest regime, that regime's start."""
        drift = self.trend(metric)
        if drift is not None:
            return drift[0].start
        changes = self.changes_of(metric)
        return changes[-1].at if changes else None

    def trend(self, metric: str) -> tuple[Regime, Trend] | None:
        """The newest regime and ``metric``'s trend in it, when it drifts there."""
        if not self.regimes:
            return None
        current = self.regimes[-1]
        found = current.trends.get(self.key(metric))
        return None if found is None else (current, found)

    @property
    def newest(self) -> datetime | None:
        """When the newest finished run was created (None without runs)."""
        return self.runs[-1].created_at if self.runs else None

    def changes_of(self, metric: str) -> list[Change]:
        """Regime changes that moved ``metric`` (all of them if none records its metrics)."""
        key = self.key(metric)
        moved = [c for c in self.changes if key in c.metrics]
        return moved if moved or any(c.metrics for c in self.changes) else list(self.changes)
