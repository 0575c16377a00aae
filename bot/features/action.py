"""The review of the GitHub Action (``threshold-bot action``): threshold files in, one review out.

The shell (``bot.cli.action``) reads the files of the workspace, their base versions from
GitHub and the inputs; this module diffs the gates, reads each gate's history and merges
the reviews, as the App does for a PR (``bot.features.review.pull``) but with the history
the workflow chooses:

- ``override`` (the ``history:`` or ``wandb:`` input) replaces every gate's source, its run
  filters kept;
- without it each gate reads the source its file or the config names (the script's own
  project), as in the App; a gate with none is ``no_data``, the review says where to name one.

On a PR the config and the history files are the base's (the shell reads them there), and
without ``override`` a gate reads the source the base decides (``bot.core.thresholds.pinning``,
as in the App): a source the PR's file names instead is shown, is not read, and makes the
review ``action_required``.  A config or history file the PR changes is named with what it
is to the review (``changed``), making it ``action_required`` too: the PR is judged by the
base, a maintainer judges the change.

A threshold file the head leaves unparseable is named in the review and makes it
``action_required`` (the PR broke it); one unparseable at the base only is treated as new.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.analysis.review import build_review, merge_reviews, unavailable_review
from bot.core.config import CONFIG_PATH, RepoConfig
from bot.core.history.series import with_series
from bot.core.history.sources import HistoryError, HistorySource
from bot.core.models import Conclusion, GateChange, Review, RuleSettings, SourceSpec, ThresholdFile
from bot.core.thresholds.diff import diff_gates, removed_gates
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.pinning import SourceProposal, mark_proposals, pin_sources
from bot.features.review.approval import gate_key

# what a parser may still raise on hostile input past its own limits (never a crash)
PARSE_FAILURES = (ThresholdFileError, RecursionError, ValueError, UnicodeError, OverflowError)
SEVERITY: dict[str, int] = {"success": 0, "neutral": 1, "action_required": 2}


@dataclass(frozen=True)
class FileVersions:
    """One threshold file: its repository path, its text in the workspace, and its text at
    the base (None: the PR adds it); ``audit``: no base to compare with (every gate unchanged)."""

    path: str
    head: str
    base: str | None = None
    audit: bool = False
    related: Mapping[str, str] = field(default_factory=dict)  # other files, by path: head
    base_related: Mapping[str, str] = field(default_factory=dict)  # and at the base
    related_notes: tuple[str, ...] = ()  # related files skipped (``bot.features.related_files``)


@dataclass(frozen=True)
class FoundGates:
    """The gates of the files, diffed: what the analysis reads."""

    files: tuple[ThresholdFile, ...] = ()
    changes: tuple[GateChange, ...] = ()
    errors: tuple[str, ...] = ()  # files the head leaves unparseable: "path:line: reason"
    notes: tuple[str, ...] = ()
    proposals: tuple[SourceProposal, ...] = ()  # sources the PR's files name, not the base's


def find_changes(
    versions: Sequence[FileVersions], config: RepoConfig, *, pin: bool = True
) -> FoundGates:
    """The gate changes of every file (a file without gates is named in ``notes``); ``pin``:
    each gate reads the source the base decides (``config`` is the base's), a source the
    head's file names instead is a proposal (without ``pin``, the workflow's override
    decides where every gate reads)."""
    files: list[ThresholdFile] = []
    changes: list[GateChange] = []
    proposals: list[SourceProposal] = []
    errors: list[str] = []
    notes: list[str] = []
    for version in versions:
        try:
            head = find_gates(version.path, version.head, config, related=version.related)
        except PARSE_FAILURES as exc:
            errors.append(_parse_problem(version.path, exc))
            continue
        if head is not None and version.related_notes:
            head = head.model_copy(update={"notes": (*head.notes, *version.related_notes)})
        if head is None or not (head.gates or head.unbound):
            notes.append(f"{version.path}: no threshold gates found")
            continue
        base = head if version.audit else _base(version, config, notes)
        files.append(head)
        diff = diff_gates(base, head)
        pinned, moved = pin_sources(diff, base, config, (), gate_key) if pin else (diff, [])
        changes.extend(pinned)
        proposals.extend(moved)
        notes += [f"{version.path}: {note}" for note in head.notes]
        if not version.audit:
            notes += [
                f"{version.path}: the PR removes gate {g.name} ({g.metric} {g.op} {g.literal})"
                for g in removed_gates(base, head)
            ]
    return FoundGates(tuple(files), tuple(changes), tuple(errors), tuple(notes), tuple(proposals))


def _base(version: FileVersions, config: RepoConfig, notes: list[str]) -> ThresholdFile | None:
    if version.base is None:
        return None
    try:
        return find_gates(version.path, version.base, config, related=version.base_related)
    except PARSE_FAILURES as exc:
        notes.append(f"{_parse_problem(version.path, exc)} (at the base; its gates are new)")
        return None


def _parse_problem(path: str, exc: Exception) -> str:
    if isinstance(exc, ThresholdFileError):
        return str(exc)  # "path:line: reason"
    return f"{path}: could not be read ({type(exc).__name__})"


def with_override(spec: SourceSpec | None, override: SourceSpec | None) -> SourceSpec | None:
    """The source a gate reads: ``override``'s place (kind, path, entity, project, tracking
    URI, experiment) with the gate's own run filters; without ``override``, the gate's own."""
    if override is None or spec is None:
        return override or spec
    where = ("kind", "path", "entity", "project", "tracking_uri", "experiment")
    return spec.model_copy(update={name: getattr(override, name) for name in where})


def _groups(
    found: FoundGates, override: SourceSpec | None
) -> dict[str, tuple[SourceSpec | None, list[GateChange]]]:
    """The gate changes by the source each reads (key ``""``: none)."""
    groups: dict[str, tuple[SourceSpec | None, list[GateChange]]] = {}
    for change in found.changes:
        spec = with_override(change.head.source, override)
        groups.setdefault(spec.key() if spec else "", (spec, []))[1].append(change)
    return groups


def history_files(found: FoundGates, override: SourceSpec | None) -> dict[str, tuple[str, ...]]:
    """The history files the review reads, each with the names of the gates that read it."""
    files: dict[str, list[str]] = {}
    for spec, changes in _groups(found, override).values():
        if spec is not None and spec.kind == "file" and spec.path:
            files.setdefault(spec.path, []).extend(c.head.name for c in changes)
    return {path: tuple(dict.fromkeys(names)) for path, names in files.items()}


def review_gates(
    found: FoundGates,
    history: HistorySource,
    *,
    config: RepoConfig,
    rule: RuleSettings,
    override: SourceSpec | None = None,
    changed: Sequence[str] = (),
    warnings: Sequence[str] = (),
) -> Review:
    """One review of every gate, each against its source's history (grouped by source); a
    history that cannot be read gives its gates ``no_data`` and the review says why.

    ``changed``: what the PR changes that the review reads at the base (``changed_file``),
    each making it ``action_required``, as does a gate whose source the PR moves
    (``found.proposals``); ``warnings``: more to say (the config's)."""
    hints = tuple(u for tf in found.files for u in tf.unbound)
    reviews: list[Review] = []
    for spec, changes in _groups(found, override).values():
        shared = hints if not reviews else ()
        if spec is None:
            error = (
                "no history source: give the action `history` or `wandb`, name a W&B project "
                f"in the file, or set one in {CONFIG_PATH}"
            )
            reviews.append(unavailable_review(changes, error, rule=rule, hints=shared))
            continue
        try:
            runs = history.fetch(with_series(spec, (c.head for c in changes)))
        except HistoryError as exc:
            error = f"{spec.describe()}: {exc}"
            reviews.append(unavailable_review(changes, error, rule=rule, hints=shared))
            continue
        reviews.append(
            build_review(changes, runs, rule=rule, regime_settings=config.regimes, hints=shared)
        )
    empty: Conclusion = "neutral" if hints else "success"
    review = merge_reviews(reviews) if reviews else Review(conclusion=empty, hints=hints)
    review = mark_proposals(review, found.proposals)
    notes = (*changed, *warnings, *found.errors, *found.notes, *review.warnings)
    update: dict[str, object] = {"warnings": notes}
    if found.errors or changed:
        update["conclusion"] = "action_required"
    return review.model_copy(update=update)


def fails(conclusion: str, fail_on: str) -> bool:
    """Whether ``conclusion`` fails the job under ``fail-on`` (``none``: never;
    ``neutral``: neutral or action_required; ``action_required``: that only)."""
    if fail_on == "none":
        return False
    return SEVERITY[conclusion] >= SEVERITY[fail_on]
