"""Evaluate the gates of the default branch against their newest runs.

Each gate is reviewed as it stands (``GateChange(head=gate, base=gate)``: the literal on
the default branch is both old and proposed) with the rule's window set to ``drift.window``,
per history source, then assessed (``bot.core.analysis.drift``).  A drifting streak the
regime detector has not confirmed yet gets its onset as a change
(``bot.core.analysis.onset``), so the PRs that started it can be named.

A file whose history could not be read is *not evaluated*: its item is neither opened
nor closed (an outage is retried next round).  Attribution (GitHub requests) happens
only when an item is about to be written: ``attributed``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.adapters.github.api import GitHubAPI
from bot.core.analysis.drift import DriftReport, drift_report
from bot.core.analysis.onset import onset_change
from bot.core.analysis.review import build_review, merge_reviews
from bot.core.config import RepoConfig
from bot.core.history.series import with_series
from bot.core.history.sources import HistoryError, HistorySource, HistoryUnavailable
from bot.core.models import (
    Change,
    GateChange,
    History,
    Review,
    RuleSettings,
    SourceSpec,
    ThresholdFile,
)
from bot.features.review.attribution import attribute


@dataclass(frozen=True)
class FileDrift:
    """The evaluation of one threshold file: a report, or why there is none."""

    file: str
    report: DriftReport | None = None
    problem: str = ""  # why it could not be evaluated
    outage: bool = False  # the problem is a history outage (retried next round)
    runs: dict[str, History] = field(default_factory=dict, repr=False)  # by source key

    @property
    def fingerprint(self) -> str:
        """What the item shows, summarised: an item is rewritten only when this changes."""
        if self.report is None:
            return ""
        shown = [
            (
                g.gate.name,
                g.status,
                g.failed,
                g.total,
                g.streak,
                g.since.isoformat() if g.since else None,
                g.change.at.isoformat() if g.change else None,
                g.gate.recomputed,
            )
            for g in self.report.gates
            if g.status in ("drifting", "flaky")
        ]
        data = json.dumps([shown, list(self.report.settings.problems)], default=str)
        return hashlib.sha256(data.encode()).hexdigest()


class Evaluation:
    """The gates of one branch, evaluated file by file under its ``config``; each history
    source is read once, however many files name it."""

    def __init__(self, config: RepoConfig, history: HistorySource) -> None:
        self.config = config
        self.rule = config.rule.model_copy(update={"window": config.drift.window})
        self._history = history
        self._fetched: dict[str, History | HistoryError] = {}
        self._digests: dict[str, str] = {}

    def _runs_of(self, spec: SourceSpec, tf: ThresholdFile) -> History | HistoryError:
        key = spec.key()
        if key not in self._fetched:
            try:
                self._fetched[key] = self._history.fetch(with_series(spec, tf.gates))
            except HistoryError as exc:
                self._fetched[key] = exc
        return self._fetched[key]

    def versions(self, tf: ThresholdFile) -> tuple[tuple[str, str], ...] | None:
        """The version of each history ``tf``'s gates read, but the repository's own files
        (read at the head: its SHA says their version): a digest of what the fetch returned
        (every run's id, state, time, values and series), or the error it raised; fetched
        once per call, as ``file`` reads it.  None when one is unavailable for now (an
        outage: such an evaluation is not kept)."""
        found: dict[str, str] = {}
        for gate in tf.gates:
            spec = gate.source
            if gate.ignored or spec is None or spec.kind == "file":
                continue
            key = spec.key()
            if key in found:
                continue
            runs = self._runs_of(spec, tf)
            if isinstance(runs, HistoryUnavailable):
                return None
            if isinstance(runs, HistoryError):
                found[key] = f"error: {runs}"
                continue
            if key not in self._digests:
                data = runs.model_dump_json().encode()
                self._digests[key] = hashlib.blake2b(data, digest_size=16).hexdigest()
            found[key] = self._digests[key]
        return tuple(sorted(found.items()))

    def file(self, tf: ThresholdFile) -> FileDrift:
        """The drift of ``tf``'s gates (or why they could not be evaluated)."""
        return _evaluate_file(tf, self._runs_of, self.config, self.rule)


def _evaluate_file(
    tf: ThresholdFile,
    runs_of: Callable[[SourceSpec, ThresholdFile], History | HistoryError],
    config: RepoConfig,
    rule: RuleSettings,
) -> FileDrift:
    groups: dict[str, tuple[SourceSpec, list[GateChange]]] = {}
    for gate in tf.gates:
        if gate.ignored:
            continue
        if gate.source is None:
            return FileDrift(tf.path, problem=f"{gate.name}: no history source")
        groups.setdefault(gate.source.key(), (gate.source, []))[1].append(
            GateChange(head=gate, base=gate)
        )
    reviews: list[Review] = []
    histories: dict[str, History] = {}
    for key, (spec, changes) in groups.items():
        found = runs_of(spec, tf)
        if isinstance(found, HistoryError):
            outage = isinstance(found, HistoryUnavailable)
            return FileDrift(tf.path, problem=f"{spec.describe()}: {found}", outage=outage)
        histories[key] = found
        review = build_review(
            changes,
            found,
            rule=rule,
            regime_settings=config.regimes,
        )
        reviews.append(_with_onsets(review, found, config))
    if not reviews:
        return FileDrift(tf.path, problem="no gates to watch")
    report = drift_report(tf.path, merge_reviews(reviews), config.drift)
    return FileDrift(tf.path, report=report, runs=histories)


def _with_onsets(review: Review, history: History, config: RepoConfig) -> Review:
    """``review`` with the onset of each failing streak long enough to drift added to its
    changes, unless a change starts exactly there: the detector confirms a change only once
    the new regime holds ``min_regime_runs`` runs, and places one early until then.

    Onsets are appended after the detector's changes, never interleaved: the regime table
    pairs regimes with the detector's changes by position, and an onset is no regime."""
    known = {c.at for c in review.changes}
    added: list[Change] = []
    for gate in review.gates:
        since = gate.failing_since
        if since is None or since in known:
            continue
        if gate.consecutive_failures < config.drift.min_failures:
            continue
        change = onset_change(history.finished, gate.metric, since)
        if change is not None:
            known.add(change.at)
            added.append(change)
    if not added:
        return review
    return review.model_copy(update={"changes": (*review.changes, *added)})


def attributed(gh: GitHubAPI, repo: str, sha: str, drift: FileDrift) -> FileDrift:
    """``drift`` with its regime changes attributed to the PRs merged at them."""
    if drift.report is None:
        return drift
    review = attribute(gh, repo, drift.report.review, ref=sha)
    report = drift_report(drift.file, review, drift.report.settings)
    return FileDrift(drift.file, report=report, runs=drift.runs)
