"""``repository`` events: what the App keeps of a repository follows it going private, away
or read-only.

- ``privatized``: its reports are deleted (unless ``REPORT_PRIVATE_REPOS``): a link shared
  while it was public no longer shows its numbers.  PRs, drift items and the run cache stay:
  the App goes on reviewing private repositories.
- ``deleted``: its reports, tracked PRs, drift items, drift cursor and dashboard record are
  deleted: there is nothing left to show, re-check or watch.
- ``transferred``: the same under its former name (the delivery's ``changes.owner.from``):
  the installation that held it may not hold it now.  The next event under the new name
  starts afresh (the drift watch finds its open issue again by its marker).
- ``archived``: its tracked PRs are forgotten (GitHub refuses writes to an archived
  repository, so a re-check could only fail); reports stay, their visibility unchanged.

Approvals and the audit log stay: they are the record.  The run cache is kept by source
(W&B project, MLflow experiment), not by repository: nothing of it is the repository's own.
A report that outlives a missed event is still caught when served (``bot.app.reports``).
"""

from __future__ import annotations

from typing import Any

from bot.adapters.store import cursors, dashboards, reports, tracked
from bot.adapters.store import drift as records
from bot.core.routing import Router
from bot.features.context import HandlerContext
from bot.features.payloads import RepositoryEvent

router = Router[HandlerContext]()


@router.register("repository", "privatized")
def on_privatized(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Stop serving the reports of a repository made private, unless the operator allows."""
    repo = RepositoryEvent.model_validate(payload).repository.full_name
    if ctx.settings.report_private_repos:
        ctx.log.info("%s made private: its reports stay (REPORT_PRIVATE_REPOS)", repo)
        return
    with ctx.sessions.begin() as session:
        dropped = reports.delete_repo(session, repo)
    ctx.log.info("%s made private: %d report(s) deleted", repo, dropped)


@router.register("repository", "deleted", "transferred")
def on_gone(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Forget a repository deleted, or transferred away from its former name."""
    event = RepositoryEvent.model_validate(payload)
    repo = event.repository.full_name
    if event.action == "transferred":
        former = event.former_name()
        if former is None:  # a transfer that does not say from where: nothing to find
            ctx.log.warning("%s transferred from an account the delivery does not name", repo)
            return
        repo = former
    with ctx.sessions.begin() as session:
        counts = (
            reports.delete_repo(session, repo),
            tracked.untrack_repo(session, repo),
            records.forget_repo(session, repo),
        )
        cursors.forget_repo(session, repo)  # where the drift watch resumes it, if cut
        dashboards.forget_repo(session, repo)  # its dashboard issue is found again by marker
    ctx.log.info(
        "%s %s: %d report(s), %d tracked PR(s), %d drift item(s) deleted",
        repo,
        event.action,
        *counts,
    )


@router.register("repository", "archived")
def on_archived(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Stop re-checking the PRs of a repository made read-only."""
    repo = RepositoryEvent.model_validate(payload).repository.full_name
    with ctx.sessions.begin() as session:
        untracked = tracked.untrack_repo(session, repo)
    ctx.log.info("%s archived: %d tracked PR(s) forgotten", repo, untracked)
