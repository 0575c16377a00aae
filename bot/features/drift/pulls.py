"""The rebaseline PR of a drifting file: one branch, one commit, one PR.

The branch ``threshold-bot/rebaseline/<file>`` is (re)set to the default branch's head and
gets one commit that changes only the drifting gates' literals, with the provenance comment
``/rebaseline`` writes (``bot.features.rebaseline.plan``).  It is rewritten only when the
values change.  The PR is found again by its branch (``open_pull`` is idempotent), so a
worker killed between any two steps leaves one branch, one PR and one record once the next
worker is done.  The PR is then reviewed like any threshold PR: its check must be green.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from bot.adapters.github.errors import GitHubPermanentError
from bot.adapters.store import drift as records
from bot.adapters.store.drift import DriftItem
from bot.core.analysis.curves import recompute_points
from bot.core.commands import Command
from bot.core.config import DriftSettings
from bot.core.render.drift import branch_name, item_body, pull_title
from bot.features.drift.evaluate import FileDrift
from bot.features.drift.place import Acted, Action, Place, dismissal
from bot.features.rebaseline.literals import PointValues
from bot.features.rebaseline.plan import GateKey, commit_message, gate_key, plan_file, rule_for

VIA = "the threshold-bot drift watch"


def _points(drift: FileDrift, place: Place) -> dict[GateKey, PointValues]:
    """The rule's value at each step of the file's drifting golden curves."""
    assert drift.report is not None
    tf = place.files[drift.file]
    rule = drift.report.review.rule
    reviews = {gate_key(g.gate): g.gate for g in drift.report.drifting}
    points: dict[GateKey, PointValues] = {}
    for gate in tf.gates:
        judged = reviews.get(gate_key(gate))
        if not gate.points or gate.source is None or judged is None:
            continue
        history = drift.runs.get(gate.source.key())
        if history is not None:
            start = judged.window.first if rule.window.kind == "regime" else None
            points[gate_key(gate)] = recompute_points(
                gate, history.finished, rule, regime_start=start
            )
    return points


def write_pull(
    place: Place,
    item: DriftItem,
    drift: FileDrift,
    settings: DriftSettings,
    fingerprint: str,
    command: Command | None = None,
) -> Acted:
    """Write (or bring up to date) the rebaseline PR of ``drift.file``."""
    assert drift.report is not None
    gh, repo = place.gh, place.repo
    tf, text = place.files[drift.file], place.texts[drift.file]
    names = tuple(g.gate.name for g in drift.report.drifting)
    wanted = command or Command(kind="rebaseline", line=0)
    asked = wanted.model_copy(update={"gates": wanted.gates or names, "line": 0})
    review = drift.report.review
    if command is not None:
        review = review.model_copy(update={"rule": rule_for(command, review.rule)})
    plan = plan_file(
        tf,
        text,
        review,
        asked,
        today=datetime.now(UTC).date(),
        points=_points(drift, place),
        via=VIA,
    )
    if not plan.edits:
        return Acted(drift.file, "skipped", detail="no run has data for the drifting gates")
    values = {edit.label: edit.new_literal for edit in plan.edits}
    if command is not None and command.dry_run:
        changes = "; ".join(edit.summary for edit in plan.edits)
        return Acted(drift.file, "unchanged", item.pull, detail=changes)
    branch = branch_name(drift.file)
    body = item_body(drift.report, mode="pull_request", repo_url=None, pull=None)
    if item.pull is not None:  # its body first: a PR a maintainer closed is not reopened
        ref = gh.update_issue(repo, item.pull, body=body)
        if ref.state == "closed":
            item = item.pull_closed()
            if command is None or item.state != "open":
                records.save(place.sessions, item, place.owner)
                return Acted(drift.file, "dismissed", ref.number)
    if item.values != values or item.branch != branch or item.pull is None:
        gh.create_branch(repo, branch, place.sha, force=True)
        message = commit_message([plan], review.rule, None)
        gh.commit_file(repo, branch, drift.file, plan.text, message)
    pull = gh.open_pull(  # a new PR gets ``body``; an open one was updated above
        repo, head=branch, base=place.branch, title=pull_title(drift.file), body=body
    )
    fresh = item.state != "open"
    opened = item.opened(mode="pull_request", issue=item.issue, pull=pull.number) if fresh else item
    saved = replace(
        opened,
        pull=pull.number,
        branch=branch,
        values=values,
        fingerprint=fingerprint,
        shown=dismissal(drift),
    )
    records.save(place.sessions, saved, place.owner)
    if item.issue is not None:
        _link_issue(place, item.issue, drift, pull.number)
    action: Action = "opened" if item.pull is None else "updated"
    try:
        place.review_pull(pull.number)
    except GitHubPermanentError as exc:  # the PR exists; its review is retried with the PR's events
        return Acted(drift.file, action, pull.number, str(exc))
    return Acted(drift.file, action, pull.number)


def _link_issue(place: Place, issue: int, drift: FileDrift, pull: int) -> None:
    """Point the issue at the PR ``/rebaseline`` opened from it."""
    assert drift.report is not None
    body = item_body(drift.report, mode="issue", repo_url=None, pull=pull)
    place.gh.update_issue(place.repo, issue, body=body)
