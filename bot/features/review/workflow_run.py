"""``workflow_run`` ``completed``: re-review the open PRs whose gates read that workflow's
artifacts, as soon as the nightly finishes, instead of at the next re-check round.

Only a run that could enter an ``actions`` history counts (``reads_run``): a run of the
repository itself (its head repository is the repository, not a fork), on the branch the
source reads (default: the default branch), triggered by one of the source's ``events``, of
the workflow the source names (file name or id). A run of a PR branch or of a fork, or of
another workflow, re-reviews nothing. The PRs are those the re-check tracks
(``bot.adapters.store.tracked``) for the delivery's installation; each is reviewed as a
*Re-run* would (``review_for_delivery``: the comment and check run edited in place).

Bounded: one delivery re-reviews at most ``MAX_PULLS_PER_RUN`` PRs (the newest first), within
the job's time limit (``JOB_TIMEOUT_SECONDS``). Every affected PR is first marked due
(``tracked.mark_due``): those cut, failed or cut short by the time limit are reviewed by the
periodic re-check at its next round.
"""

from __future__ import annotations

from typing import Any

from bot.adapters.github.errors import GitHubError
from bot.adapters.store import tracked
from bot.adapters.store.tracked import Tracked
from bot.core.history.sources import HistoryError
from bot.core.models import SourceSpec
from bot.core.routing import Router
from bot.features.context import HandlerContext
from bot.features.payloads import WorkflowRunEvent
from bot.features.review.handlers import review_for_delivery
from bot.features.review.recheck import PullBusy

MAX_PULLS_PER_RUN = 20

router = Router[HandlerContext]()


def _file_name(path: str) -> str:
    """``nightly.yml`` of ``.github/workflows/nightly.yml@main``."""
    return path.split("@", 1)[0].rsplit("/", 1)[-1]


def own_run(event: WorkflowRunEvent) -> bool:
    """Whether the run is of the repository's own code: its head repository is the
    repository itself (a PR from a fork runs in the repository with the fork as head)."""
    run, repo = event.workflow_run, event.repository
    head = run.head_repository
    return head is not None and head.id == repo.id and run.repository.id == repo.id


def reads_run(spec: SourceSpec, pull_repo: str, event: WorkflowRunEvent) -> bool:
    """Whether ``spec`` (a source of a PR of ``pull_repo``) reads the runs of ``event``'s
    workflow on that branch and trigger (``own_run`` is checked apart)."""
    run, repo = event.workflow_run, event.repository
    if spec.kind != "actions" or spec.workflow is None:
        return False
    if (spec.repo or pull_repo).lower() != repo.full_name.lower():
        return False
    if run.head_branch != (spec.branch or repo.default_branch) or run.event not in spec.events:
        return False
    paths = {run.path} | ({event.workflow.path} if event.workflow is not None else set())
    names = (
        {str(run.workflow_id)}
        | {_file_name(p) for p in paths if p}
        | {p.split("@", 1)[0] for p in paths if p}
    )
    return spec.workflow in names


def affected(pulls: list[Tracked], event: WorkflowRunEvent) -> list[Tracked]:
    """The tracked PRs some source of which reads the run, newest PR first."""
    found = [p for p in pulls if any(reads_run(s, p.repo, event) for s in p.sources)]
    return sorted(found, key=lambda p: p.number, reverse=True)


@router.register("workflow_run", "completed")
def on_workflow_run(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Re-review the tracked PRs whose ``actions`` source reads this completed run."""
    event = WorkflowRunEvent.model_validate(payload)
    run = event.workflow_run
    if ctx.delivery.installation_id is None or not own_run(event):
        ctx.log.info("workflow run %d: not the repository's own run, nothing to re-review", run.id)
        return
    with ctx.sessions() as session:
        pulls = affected(tracked.tracked(session, ctx.delivery.installation_id), event)
    if not pulls:
        return
    # Owed first: a PR this delivery does not get to (cut, failed, the job's time limit) is
    # reviewed by the next re-check round; a review done here records its own conclusion.
    with ctx.sessions.begin() as session:
        tracked.mark_due(session, [(p.repo, p.number) for p in pulls])
    now, later = pulls[:MAX_PULLS_PER_RUN], pulls[MAX_PULLS_PER_RUN:]
    for pull in now:
        try:
            review_for_delivery(ctx, pull.repo, pull.number)
        except (GitHubError, HistoryError, PullBusy) as exc:
            ctx.log.warning("re-review of %s#%d failed: %s", pull.repo, pull.number, exc)
    ctx.log.info(
        "workflow run %d of %s: %d PRs re-reviewed, %d left to the re-check",
        run.id,
        event.repository.full_name,
        len(now),
        len(later),
    )
