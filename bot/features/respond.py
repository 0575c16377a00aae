"""What the command and approval handlers share: replies, permission checks, audit entries.

Handlers run at least once per delivery, so each of these is idempotent: a reply is
found again by its marker (delivery id and key) and edited, and an audit entry is
written once per delivery, action and message.
"""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.adapters.github.api import GitHubAPI
from bot.adapters.store import audit
from bot.adapters.store.audit import AuditEntry
from bot.core.permissions import allows
from bot.features.context import HandlerContext
from bot.features.replies import refusal, reply_marker
from bot.features.repo_config import config_at

Action = Literal["rebaseline", "approve"]  # the actions ``PermissionSettings`` guards


def reply(ctx: HandlerContext, gh: GitHubAPI, repo: str, number: int, key: str, text: str) -> None:
    """Post (or, on a retried delivery, edit) the reply ``key`` of this delivery."""
    marker = reply_marker(f"{ctx.delivery.id}:{key}")
    gh.upsert_comment(repo, number, f"{marker}\n{text}", marker)


def permitted(
    gh: GitHubAPI, repo: str, base_sha: str, user: str, action: Action
) -> tuple[bool, str, str]:
    """Whether ``user`` may do ``action`` (``rebaseline``/``approve``) on ``repo``.

    The least level comes from the repository config at the PR's base; the user's level
    is asked of GitHub each time.  Returns (allowed, user's level, required level).
    """
    config, _ = config_at(gh, repo, base_sha)
    required: str = getattr(config.permissions, action)
    level: str = gh.permission(repo, user)
    return allows(level, required), level, required


def refuse(
    ctx: HandlerContext,
    gh: GitHubAPI,
    repo: str,
    number: int,
    *,
    key: str,
    user: str,
    action: Action,
    level: str,
    required: str,
    message: str,
) -> None:
    """Reply with a polite refusal naming the required permission, and audit it."""
    reply(ctx, gh, repo, number, key, refusal(user, action, required, level))
    audit_once(
        ctx,
        repo=repo,
        number=number,
        actor=user,
        action=action,
        outcome="refused",
        detail={"level": level, "required": required},
        message=message,
    )


def audited(ctx: HandlerContext, action: str, message: str = "") -> str | None:
    """The outcome this delivery already audited for ``action`` and ``message`` (a retry)."""
    with ctx.sessions() as session:
        return _outcome(session, ctx.delivery.id, action, message)


def _outcome(session: Session, delivery_id: str, action: str, message: str) -> str | None:
    query = select(AuditEntry.outcome).where(
        AuditEntry.delivery_id == delivery_id,
        AuditEntry.action == action,
        AuditEntry.message == message,
    )
    return session.scalars(query).first()


def audit_once(
    ctx: HandlerContext,
    *,
    repo: str,
    number: int | None,
    actor: str,
    action: str,
    outcome: str,
    detail: dict[str, Any] | None = None,
    message: str = "",
) -> None:
    """Add an audit entry, once per delivery, action and ``message`` (a retry adds none)."""
    with ctx.sessions.begin() as session:
        if _outcome(session, ctx.delivery.id, action, message) is not None:
            return
        audit.add(
            session,
            repo=repo,
            pr_number=number,
            actor=actor,
            action=action,
            outcome=outcome,
            detail=detail,
            delivery_id=ctx.delivery.id,
            message=message,
        )
