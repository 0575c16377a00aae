"""The imperative shell of ``/rebaseline``: recompute, plan, then commit or suggest.

Reads the PR's threshold files at its head (config at its base, as every review),
reviews them with the command's window and allowance over the current history,
attributes regime changes to PRs, and plans each file (``bot.features.rebaseline.plan``).  Then:

- ``--dry-run``: nothing is written; the caller replies with the plan;
- the App may push to the head branch (same repository, or a fork that allows edits
  from maintainers): one commit per changed file on the head branch;
- otherwise: one PR review whose line comments carry ```` ```suggestion ```` blocks.

The caller (``bot.features.comments``) checks permissions, replies and re-reviews.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime

from bot.adapters.github.api import GitHubAPI, PullInfo, ReviewComment
from bot.adapters.github.errors import (
    GitHubForbidden,
    GitHubNotFound,
    GitHubPermanentError,
    GitHubUnprocessable,
)
from bot.adapters.history.actions_source import ActionsAPI
from bot.adapters.settings import DEFAULT_THRESHOLD_FILE_BYTES
from bot.core.analysis.curves import recompute_points
from bot.core.commands import Command
from bot.core.history.series import with_series
from bot.core.history.sources import HistoryError, HistorySource
from bot.core.models import Gate, Review, RuleSettings
from bot.core.render.markdown import code, escape
from bot.features.rebaseline.literals import PointValues
from bot.features.rebaseline.plan import (
    FilePlan,
    GateKey,
    RebaselineResult,
    commit_message,
    gate_key,
    plan_file,
    rule_for,
    unknown_gates,
)
from bot.features.rebaseline.replies import suggestion_review
from bot.features.rebaseline.suggestions import commentable, hunks, placeable, suggestion
from bot.features.review.attribution import attribute
from bot.features.review.pull import (
    HistoryRouter,
    PullThresholds,
    RemoteHistory,
    analyse,
    read_thresholds,
    repo_history,
)

HEAD_WAIT_SECONDS = 10.0  # how long to wait for GitHub to move the PR head to our commit


class RebaselineError(Exception):
    """The rebaseline could not be applied; the message is for the reply."""


def may_push(pull: PullInfo, repo: str) -> bool:
    """Whether the App may push to the PR's head branch."""
    return pull.head_repo is not None and (pull.head_repo == repo or pull.maintainer_can_modify)


def plan(
    gh: GitHubAPI,
    repo: str,
    pull: PullInfo,
    command: Command,
    *,
    by: str | None,
    today: date,
    remote_history: RemoteHistory | None = None,
    max_bytes: int = DEFAULT_THRESHOLD_FILE_BYTES,
) -> tuple[RebaselineResult, dict[str, str]]:
    """The dry-run result for ``command`` on ``pull``, and the head texts of the files
    (each read with at most ``max_bytes``, as the review reads them)."""
    found = read_thresholds(gh, repo, pull, max_bytes=max_bytes)
    try:
        rule = rule_for(command, found.config.rule)
    except ValueError as exc:  # --allowance over the repository's cap
        raise RebaselineError(str(exc)) from None
    found = replace(found, config=found.config.model_copy(update={"rule": rule}))
    history = HistoryRouter(
        repo_history(gh, repo, pull.base_ref),
        remote_history,
        repo=repo,
        actions=gh if isinstance(gh, ActionsAPI) else None,
    )
    review = _attributed_review(gh, repo, pull, found, history)
    points = curve_points(found, review, history)
    texts: dict[str, str] = {}
    plans: list[FilePlan] = []
    for tf in found.files:
        text = gh.file_text(repo, tf.path, pull.head_sha, max_bytes=max_bytes)
        if text is None:
            continue
        texts[tf.path] = text
        plans.append(plan_file(tf, text, review, command, today=today, by=by, points=points))
    result = RebaselineResult(
        mode="dry_run" if command.dry_run else "nothing",
        pull=pull,
        rule=rule,
        plans=tuple(plans),
        unknown=tuple(unknown_gates(command, found.files)),
        gate_names=tuple(g.name for tf in found.files for g in tf.gates),
        errors=found.errors,
        history_error=review.error,
    )
    return result, texts


def _attributed_review(
    gh: GitHubAPI, repo: str, pull: PullInfo, found: PullThresholds, history: HistorySource
) -> Review:
    review = analyse(found, history).review
    return attribute(gh, repo, review, ref=pull.head_sha)  # ranked as the review ranks them


def curve_points(
    found: PullThresholds, review: Review, history: HistorySource
) -> dict[GateKey, PointValues]:
    """The rule's value at each step of the golden curves that have data, by gate; their
    runs are read again from each source, once per source (a source that fails now leaves
    its curves without values: they are left as they are)."""
    reviews = {gate_key(g): g for g in review.gates}
    rule = found.config.rule
    by_source: dict[str, list[Gate]] = {}
    for change in found.changes:
        gate, judged = change.head, reviews.get(gate_key(change.head))
        if not gate.points or gate.ignored or gate.source is None or judged is None:
            continue
        if judged.recomputed is not None:
            by_source.setdefault(gate.source.key(), []).append(gate)
    points: dict[GateKey, PointValues] = {}
    for gates in by_source.values():
        spec = gates[0].source
        assert spec is not None  # grouped by it
        try:
            runs = history.fetch(with_series(spec, gates)).finished
        except HistoryError:
            continue
        for gate in gates:
            window = reviews[gate_key(gate)].window
            start = window.first if rule.window.kind == "regime" else None
            points[gate_key(gate)] = recompute_points(gate, runs, rule, regime_start=start)
    return points


def rebaseline(
    gh: GitHubAPI,
    repo: str,
    number: int,
    command: Command,
    *,
    by: str | None,
    remote_history: RemoteHistory | None = None,
    today: date | None = None,
    max_bytes: int = DEFAULT_THRESHOLD_FILE_BYTES,
) -> RebaselineResult:
    """Apply ``command`` to PR ``number``: commit, suggest, or (dry run) nothing."""
    pull = gh.pull(repo, number)
    if pull.state != "open":
        raise RebaselineError(f"this PR is {pull.state}")
    result, texts = plan(
        gh,
        repo,
        pull,
        command,
        by=by,
        today=today or datetime.now(UTC).date(),
        remote_history=remote_history,
        max_bytes=max_bytes,
    )
    if command.dry_run or not result.changed:
        return result
    if may_push(pull, repo):
        try:
            commits = commit(gh, repo, pull, result.changed, texts, result.rule, by)
        except (GitHubForbidden, GitHubNotFound):
            pass  # the fork stopped allowing edits: suggest instead
        else:
            wait_for_head(gh, repo, number, commits[-1])
            return replace(result, mode="committed", commits=commits)
    review_id, manual = suggest(gh, repo, pull, result.changed, texts, by)
    return replace(result, mode="suggested", review_id=review_id, manual=manual)


def commit(
    gh: GitHubAPI,
    repo: str,
    pull: PullInfo,
    plans: Sequence[FilePlan],
    texts: Mapping[str, str],
    rule: RuleSettings,
    by: str | None,
) -> tuple[str, ...]:
    """Commit each planned file to the head branch; refuse if the branch moved meanwhile.

    ``GitHubForbidden`` / ``GitHubNotFound`` (no push access) pass through; any other
    refusal of a commit is a ``RebaselineError`` naming the file.
    """
    target = pull.head_repo or repo
    message = commit_message(plans, rule, by)
    shas: list[str] = []
    for file_plan in plans:
        current = gh.file_text(target, file_plan.path, pull.head_ref)
        if current != texts[file_plan.path]:
            raise RebaselineError(
                f"{code(pull.head_ref)} changed while the new values were computed; "
                "comment `/rebaseline` again"
            )
        try:
            sha = gh.commit_file(target, pull.head_ref, file_plan.path, file_plan.text, message)
        except (GitHubForbidden, GitHubNotFound):
            raise  # no push access (any more): the caller suggests instead
        except GitHubPermanentError as exc:  # 409: the branch moved, or a branch rule refused
            done = f"; committed before it: {', '.join(s[:7] for s in shas)}" if shas else ""
            raise RebaselineError(
                f"GitHub refused the commit to {code(file_plan.path)} ({escape(exc)}){done}"
            ) from exc
        shas.append(sha)
    return tuple(shas)


def wait_for_head(
    gh: GitHubAPI, repo: str, number: int, sha: str, timeout: float = HEAD_WAIT_SECONDS
) -> bool:
    """Wait until GitHub shows ``sha`` as the PR's head (it updates shortly after a push)."""
    deadline = time.monotonic() + timeout
    delay = 0.2
    while gh.pull(repo, number).head_sha != sha:
        if time.monotonic() + delay > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
    return True


def suggest(
    gh: GitHubAPI,
    repo: str,
    pull: PullInfo,
    plans: Sequence[FilePlan],
    texts: Mapping[str, str],
    by: str | None,
) -> tuple[int, tuple[str, ...]]:
    """Post one review with a suggestion per changed range; return its id and the files
    whose change lies outside the PR's diff (shown as a diff in the review body)."""
    comments: list[ReviewComment] = []
    manual: list[str] = []
    base_sha = gh.merge_base(repo, pull.base_sha, pull.head_sha)
    for file_plan in plans:
        old = texts[file_plan.path]
        ranges = commentable(gh.file_text(repo, file_plan.path, base_sha), old)
        changes = hunks(old, file_plan.text)
        if all(placeable(h, ranges) for h in changes):
            comments += [
                ReviewComment(
                    path=file_plan.path,
                    line=h.end,
                    start_line=h.start if h.start < h.end else None,
                    body=suggestion(h.lines),
                )
                for h in changes
            ]
        else:
            manual.append(file_plan.path)
    body = suggestion_review(plans, texts, manual, by)
    try:
        review_id = gh.create_review(
            repo, pull.number, commit_sha=pull.head_sha, body=body, comments=tuple(comments)
        )
    except GitHubUnprocessable:  # GitHub placed a line differently: everything in the body
        manual = [p.path for p in plans]
        body = suggestion_review(plans, texts, manual, by)
        review_id = gh.create_review(repo, pull.number, commit_sha=pull.head_sha, body=body)
    return review_id, tuple(manual)
