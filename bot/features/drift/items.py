"""Act on one file's drift, once: open, update or close its issue or rebaseline PR.

Per repository and threshold file there is at most one open item, recorded in
``bot.adapters.store.drift`` and marked in its body (``drift_marker``).  The worker that
acts first *claims* the record (a lease), so several processes never act on one file at
once; every write is idempotent (an issue found again by its marker, the PR by its
branch), so a worker killed half-way leaves nothing doubled for the next one to find.

- nothing drifts and an item is open: it is closed with a comment (every gate passes);
- something drifts: the item is written when what it shows changed (``fingerprint``), else
  left alone (no request at all); ``issue`` mode writes the issue, ``pull_request`` mode the
  branch, its one commit and the PR (``bot.features.drift.pulls``);
- an item a maintainer closed is *dismissed*: the same drift does not open it again, a
  different one (other gates, another change) opens a new item;
- a file that could not be evaluated (outage, unreadable) is left exactly as it is.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import Literal

from bot.adapters.github.errors import GitHubForbidden
from bot.adapters.store import drift as records
from bot.adapters.store.drift import DriftItem
from bot.core.commands import Command
from bot.core.config import DriftSettings
from bot.core.render.drift import closing_comment, drift_marker, issue_title, item_body
from bot.features.drift.evaluate import FileDrift, attributed
from bot.features.drift.place import NO_ISSUES, Acted, Place, dismissal
from bot.features.drift.pulls import write_pull

log = logging.getLogger(__name__)
CLOSED_MARKER = "<!-- threshold-bot:drift-closed -->"


def act(
    place: Place, drift: FileDrift, settings: DriftSettings, command: Command | None = None
) -> Acted:
    """Bring the item of ``drift.file`` up to date with ``drift`` (see the module doc).

    ``command``: a maintainer's ``/rebaseline`` on the issue: the PR is written whatever
    the mode, with the command's gates, window and allowance."""
    if drift.report is None:
        return Acted(drift.file, "skipped", detail=drift.problem)
    if settings.mode == "off" and command is None:
        return Acted(drift.file, "skipped", detail="drift.mode is off")
    item = records.claim(
        place.sessions,
        repo=place.repo,
        file=drift.file,
        installation_id=place.installation_id,
        owner=place.owner,
        seconds=place.lease_seconds,
    )
    if item is None:
        return Acted(drift.file, "busy")
    try:
        done = _act(place, item, drift, settings, command)
    finally:
        stamp = records.release(place.sessions, place.repo, drift.file, place.owner)
    return replace(done, stamp=stamp)


def _act(
    place: Place,
    item: DriftItem,
    drift: FileDrift,
    settings: DriftSettings,
    command: Command | None,
) -> Acted:
    assert drift.report is not None  # checked by act
    if not drift.report.drifting:
        if item.state == "open":
            return close(place, item, "passing")
        return Acted(drift.file, "unchanged")
    fingerprint = drift.fingerprint
    if command is None:
        if item.state == "open" and item.fingerprint == fingerprint:
            return Acted(drift.file, "unchanged", item.pull or item.issue)
        if item.state == "idle" and item.dismissed and item.dismissed == dismissal(drift):
            return Acted(drift.file, "unchanged", detail="dismissed by a maintainer")
    full = attributed(place.gh, place.repo, place.sha, drift)
    if command is not None or settings.mode == "pull_request" or item.pull is not None:
        return write_pull(place, item, full, settings, fingerprint, command)
    return _write_issue(place, item, full, settings, fingerprint)


def _write_issue(
    place: Place, item: DriftItem, drift: FileDrift, settings: DriftSettings, fingerprint: str
) -> Acted:
    """Create or update the issue of ``drift.file``."""
    assert drift.report is not None
    gh, repo = place.gh, place.repo
    body = item_body(drift.report, mode="issue", repo_url=None)
    marker = drift_marker(drift.file)
    if item.state == "open" and item.issue is not None:
        ref = gh.update_issue(repo, item.issue, body=body)
        if ref.state == "closed":  # a maintainer closed it: this drift is dismissed
            records.save(place.sessions, item.closed(by_maintainer=True), place.owner)
            return Acted(drift.file, "dismissed", ref.number)
        shown = replace(item, fingerprint=fingerprint, shown=dismissal(drift))
        records.save(place.sessions, shown, place.owner)
        return Acted(drift.file, "updated", ref.number)
    found = [ref for ref in gh.find_items(repo, marker) if not ref.is_pull]
    try:
        if found:
            ref = gh.update_issue(repo, found[0].number, body=body)
        else:
            ref = gh.create_issue(
                repo,
                issue_title(drift.file),
                body,
                marker,
                labels=settings.labels,
                assignees=settings.assignees,
            )
    except GitHubForbidden as exc:
        if item.note != NO_ISSUES:
            log.warning(
                "%s: %s: no drift issue opened for %s (%s)", repo, NO_ISSUES, drift.file, exc
            )
            records.save(place.sessions, replace(item, note=NO_ISSUES), place.owner)
        return Acted(drift.file, "forbidden", detail=NO_ISSUES)
    opened = replace(
        item.opened(mode="issue", issue=ref.number),
        fingerprint=fingerprint,
        shown=dismissal(drift),
    )
    records.save(place.sessions, opened, place.owner)
    return Acted(drift.file, "opened", ref.number)


def close(
    place: Place,
    item: DriftItem,
    reason: Literal["passing", "merged"],
    pull: int | None = None,
    merged_at: datetime | None = None,
) -> Acted:
    """Close the item's issue and PR with a comment saying why; the record goes idle.

    ``pull``: the PR whose merge closes it (merged at ``merged_at``, naive UTC; None: now),
    kept on the record as the file's last rebaseline.  A PR GitHub already closed is left
    alone, and one already merged (its ``push`` handled before its ``closed`` event) makes
    it a merge."""
    if pull is None and item.pull is not None:
        found = place.gh.pull(place.repo, item.pull)
        if found.state != "open":
            pull = item.pull
            reason = "merged" if found.merged else reason
    comment = f"{CLOSED_MARKER}\n{closing_comment(reason, pull=pull or item.pull)}"
    for number in (item.issue, item.pull):
        if number is None or number == pull:
            continue
        place.gh.upsert_comment(place.repo, number, comment, CLOSED_MARKER)
        place.gh.update_issue(place.repo, number, state="closed")
    done = item.closed()
    if reason == "merged" and (pull or item.pull) is not None:
        done = item.merged(pull or item.pull or 0, merged_at)
    records.save(place.sessions, done, place.owner)
    return Acted(item.file, "closed", item.issue or item.pull)
