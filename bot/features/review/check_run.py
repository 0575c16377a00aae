"""``check_run`` events on the bot's own check run.

``rerequested`` ("Re-run" in the Checks tab) reviews the PR again.  The PR is found
from ``external_id`` (the bot stores the PR number there), else from the payload's
``pull_requests`` (empty for fork branches), else from the PRs of the head commit.
"""

from __future__ import annotations

from typing import Any

from bot.adapters.github.api import CHECK_NAME
from bot.core.routing import Router
from bot.features.context import HandlerContext
from bot.features.payloads import CheckRun, CheckRunEvent
from bot.features.review.handlers import review_for_delivery


def is_ours(ctx: HandlerContext, run: CheckRun) -> bool:
    """Whether the check run is this App's review check."""
    app_id = ctx.settings.app_id
    same_app = run.app is None or app_id is None or run.app.id == app_id
    return same_app and run.name == CHECK_NAME


def pull_number(ctx: HandlerContext, event: CheckRunEvent) -> int | None:
    """The PR a check run belongs to (see the module docstring), or None."""
    run = event.check_run
    if run.external_id and run.external_id.isdigit():
        return int(run.external_id)
    if run.pull_requests:
        return run.pull_requests[0].number
    gh = ctx.installation_client()
    pulls = gh.pulls_for_commit(event.repository.full_name, run.head_sha)
    open_pulls = [p.number for p in pulls if p.state == "open" and p.head_sha == run.head_sha]
    return open_pulls[0] if open_pulls else None


router = Router[HandlerContext]()


@router.register("check_run", "rerequested")
def on_rerequested(ctx: HandlerContext, payload: dict[str, Any]) -> None:
    """Review the PR again when someone re-runs the check."""
    event = CheckRunEvent.model_validate(payload)
    if not is_ours(ctx, event.check_run):
        return
    number = pull_number(ctx, event)
    if number is None:
        ctx.log.info(
            "check run %d: no open PR for %s", event.check_run.id, event.check_run.head_sha
        )
        return
    review_for_delivery(ctx, event.repository.full_name, number)
