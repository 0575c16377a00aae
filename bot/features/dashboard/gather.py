"""Gather one repository's dashboard view (``RepoView``) from what its watch round holds.

The round's read of the default branch (``BranchFiles``: every threshold file read, its gates,
the literals it did not bind, the files that could not be read), the ``FileDrift`` of each file
evaluated in the round, and the repository's drift records (``bot.adapters.store.drift``: the
open issue or PR of each file, its last rebaseline PR merged).  Nothing here asks GitHub or
the store: the caller passes them in, so the same inputs always give the same view.

Bounded by its inputs: at most the files the watch reads (``DRIFT_MAX_FILES``) and their gates.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from bot.adapters.github.api import RepoInfo
from bot.adapters.store.drift import DriftItem
from bot.core.dashboard.view import FileView, ItemLink, Rebaselined, RepoView
from bot.core.models import ThresholdFile
from bot.features.drift.evaluate import FileDrift
from bot.features.drift.read import BranchFiles


def gather(
    info: RepoInfo,
    branch: BranchFiles,
    drifts: Sequence[FileDrift],
    items: Sequence[DriftItem],
    *,
    notes: tuple[str, ...] = (),
    report_url: str = "",
) -> RepoView:
    """The view of ``info``'s dashboard at ``branch.sha``: one ``FileView`` per file read
    with gates or that could not be read (by path), with its evaluation from ``drifts``
    (a file without one shows why: not evaluated), its open item and last rebaseline from
    ``items``; ``notes``: what was asked through the dashboard's checkboxes."""
    evaluated = {d.file: d for d in drifts}
    records = {i.file: i for i in items}
    files = {
        tf.path: _file(tf, evaluated.get(tf.path), records.get(tf.path)) for tf in branch.files
    }
    for path, why in branch.unreadable.items():
        files.setdefault(path, FileView(path=path, problem=why))
    return RepoView(
        repo=info.full_name,
        branch=info.default_branch,
        sha=branch.sha,
        url=info.url,
        files=tuple(files[p] for p in sorted(files)),
        report_url=report_url,
        notes=notes,
    )


def _file(tf: ThresholdFile, drift: FileDrift | None, item: DriftItem | None) -> FileView:
    sources = dict.fromkeys(g.source.describe() for g in tf.gates if g.source is not None)
    problem = "not evaluated" if drift is None else drift.problem
    return FileView(
        path=tf.path,
        source=", ".join(sources),
        gates=tf.gates,
        hints=tf.unbound,
        report=None if drift is None else drift.report,
        problem="" if drift is not None and drift.report is not None else problem,
        item=_link(item),
        rebaselined=_rebaselined(item),
    )


def _link(item: DriftItem | None) -> ItemLink | None:
    if item is None or item.state != "open":
        return None
    if item.pull is not None:
        return ItemLink(number=item.pull, is_pull=True)
    return None if item.issue is None else ItemLink(number=item.issue)


def _rebaselined(item: DriftItem | None) -> Rebaselined | None:
    if item is None or item.rebaselined is None or item.rebaselined_at is None:
        return None
    at = item.rebaselined_at
    return Rebaselined(pull=item.rebaselined, at=at if at.tzinfo else at.replace(tzinfo=UTC))
