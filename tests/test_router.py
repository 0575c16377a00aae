"""Routing by event and action, own-event filtering, and the bookkeeping handlers."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.locks import make_locks
from bot.adapters.store import installations, tracked
from bot.adapters.store.db import init_db, make_engine
from bot.app.routes import app_router
from bot.core.routing import Router, is_own_event, skip_reason
from bot.features import comments, repositories
from bot.features import installations as installation_events
from bot.features.context import DeliveryInfo, HandlerContext
from bot.features.drift import handlers as drift
from bot.features.review import approve, check_run
from bot.features.review import handlers as review
from tests import crash_handler
from tests.live import Recorder, make_settings
from tests.webhooks import event_of, fixture, fixture_names, patched, repository_event


def _context(tmp_path: Path, event: str, action: str | None) -> HandlerContext:
    settings = make_settings(tmp_path)
    engine = make_engine(settings.database_url)
    sessions = init_db(engine)

    def no_github(installation_id: int) -> Any:
        raise AssertionError("bookkeeping must not call GitHub")

    def no_history(spec: Any) -> Any:
        raise AssertionError("bookkeeping must not read history")

    return HandlerContext(
        settings=settings,
        sessions=sessions,
        delivery=DeliveryInfo(id="d-1", event=event, action=action, installation_id=None),
        github=no_github,
        history=no_history,
        locks=make_locks(settings, engine, "tests"),
        log=logging.LoggerAdapter(logging.getLogger("test"), {}),
    )


def test_dispatch_by_event_and_action(tmp_path: Path) -> None:
    rec = Recorder(("pull_request", ("opened", "synchronize")), ("check_run", ()))
    for name in fixture_names():
        payload = fixture(name)
        event, action = event_of(name), payload.get("action")
        ctx = _context(tmp_path, event, action)
        ran = rec.router.dispatch(event, action, ctx, payload)
        wanted = (event == "pull_request" and action in ("opened", "synchronize")) or (
            event == "check_run"
        )
        assert ran == (1 if wanted else 0), name
    routed = [(e, a) for e, a, _, _ in rec.calls]
    expected = sorted(
        (event_of(n), fixture(n).get("action"))
        for n in fixture_names()
        if event_of(n) == "check_run"
        or (event_of(n) == "pull_request" and fixture(n)["action"] in ("opened", "synchronize"))
    )
    assert sorted(routed) == expected
    assert ("pull_request", "closed") not in routed


def test_handlers_run_in_registration_order_once_each() -> None:
    router = Router[HandlerContext]()
    order: list[str] = []

    @router.register("issue_comment", "created")
    def first(ctx: HandlerContext, payload: dict[str, Any]) -> None:
        order.append("first")

    @router.register("issue_comment")
    def every_action(ctx: HandlerContext, payload: dict[str, Any]) -> None:
        order.append("every")

    router.register("issue_comment", "created", "edited")(first)  # registering again: no-op
    assert router.handlers("issue_comment", "created") == [every_action, first]
    assert router.handlers("issue_comment", "edited") == [every_action, first]
    assert router.handlers("issue_comment", "deleted") == [every_action]
    assert router.handlers("pull_request", "opened") == []


def test_own_events_and_unrouted_events_are_skipped() -> None:
    rec = Recorder(("issue_comment", ("created",)))
    payload = fixture("issue_comment.created")
    assert skip_reason(rec.router, "issue_comment", payload, "threshold-bot[bot]", 4242) is None
    ours = patched(payload, {"sender.login": "Threshold-Bot[bot]"})
    assert skip_reason(rec.router, "issue_comment", ours, "threshold-bot[bot]", 4242) == (
        "sent by the app itself"
    )
    via_app = patched(payload, {"comment.performed_via_github_app": {"id": 4242}})
    assert is_own_event(via_app, None, 4242)
    assert not is_own_event(via_app, None, 1)
    reason = skip_reason(
        rec.router, "issue_comment", fixture("issue_comment.edited.on-issue"), None, None
    )
    assert reason == "no handler for issue_comment.edited"
    assert skip_reason(rec.router, "push", fixture("push"), None, None) == "no handler for push"


def test_the_app_router_composes_the_feature_routers() -> None:
    router = app_router()
    assert router.handlers("ping", None) == [installation_events.on_ping]
    assert router.handlers("installation", "created") == [installation_events.on_installation]
    assert review.on_pull_request in router.handlers("pull_request", "opened")
    assert router.handlers("pull_request", "closed") == [review.on_closed, drift.on_pull_closed]
    assert router.handlers("issue_comment", "created") == [
        comments.on_comment,
        drift.on_issue_comment,
    ]
    assert router.handlers("push", None) == [drift.on_push]
    assert router.handlers("check_run", "requested_action") == [approve.on_requested_action]
    assert router.handlers("check_run", "rerequested") == [check_run.on_rerequested]
    assert router.handlers("repository", "privatized") == [repositories.on_privatized]
    assert router.handlers("repository", "deleted") == [repositories.on_gone]
    assert router.handlers("repository", "transferred") == [repositories.on_gone]
    assert router.handlers("repository", "archived") == [repositories.on_archived]
    assert router.handlers("repository", "renamed") == []


@pytest.mark.parametrize(
    ("former", "left"),
    [
        ({"organization": {"login": "octo", "id": 2}}, []),
        ({"user": {"login": "octo", "id": 1}}, []),
        ({}, ["octo/ml"]),  # a transfer that does not say from where: nothing to find
    ],
)
def test_a_transfer_forgets_what_is_kept_under_the_former_name(
    tmp_path: Path, former: dict[str, Any], left: list[str]
) -> None:
    ctx = _context(tmp_path, "repository", "transferred")
    with ctx.sessions.begin() as session:
        for repo in ("octo/ml", "lab/ml"):  # "lab/ml": a repository the new owner already had
            tracked.track(
                session, installation_id=7, repo=repo, number=1, head_sha="a" * 40, sources=[]
            )
    payload = repository_event("transferred", "lab/ml", 7, {"owner": {"from": former}})

    assert app_router().dispatch("repository", "transferred", ctx, payload) == 1

    with ctx.sessions() as session:
        assert sorted(t.repo for t in tracked.tracked(session)) == sorted([*left, "lab/ml"])


def test_routers_compose_and_extra_modules_must_expose_one() -> None:
    a, b = Router[HandlerContext](), Router[HandlerContext]()

    @a.register("ping")
    def first(ctx: HandlerContext, payload: dict[str, Any]) -> None: ...

    @b.register("ping")
    def second(ctx: HandlerContext, payload: dict[str, Any]) -> None: ...

    assert Router(a, b, a).handlers("ping", None) == [first, second]
    extended = app_router(["tests.crash_handler"])
    assert extended.handlers("crash_test", None) == [crash_handler.slow_handler]
    assert extended.handlers("ping", None) == [installation_events.on_ping]
    with pytest.raises(ValueError, match=r"tests\.webhooks has no `router`"):
        app_router(["tests.webhooks"])


@pytest.mark.parametrize(
    "name",
    ["installation.created", "installation.new_permissions_accepted", "installation.deleted"],
)
def test_installation_events_are_recorded(tmp_path: Path, name: str) -> None:
    payload = fixture(name)
    ctx = _context(tmp_path, "installation", payload["action"])
    assert app_router().dispatch("installation", payload["action"], ctx, payload) >= 1
    stored = installations.get(ctx.sessions, payload["installation"]["id"])
    assert stored is not None
    assert stored.account == payload["installation"]["account"]["login"]
    assert stored.repositories == tuple(sorted(r["full_name"] for r in payload["repositories"]))
    assert stored.status == ("deleted" if payload["action"] == "deleted" else "active")
    assert (stored in installations.active(ctx.sessions)) == (stored.status == "active")


def test_installation_repositories_added_then_removed(tmp_path: Path) -> None:
    router = app_router()
    created = fixture("installation.created")
    added = fixture("installation_repositories.added")
    inst = added["installation"]["id"]
    assert created["installation"]["id"] == inst
    ctx = _context(tmp_path, "installation", "created")
    router.dispatch("installation", "created", ctx, created)
    repos_ctx = _context(tmp_path, "installation_repositories", "added")
    router.dispatch("installation_repositories", "added", repos_ctx, added)
    before = {r["full_name"] for r in created["repositories"]}
    new = {r["full_name"] for r in added["repositories_added"]}
    stored = installations.get(ctx.sessions, inst)
    assert stored is not None and set(stored.repositories) == before | new
    removed = patched(
        fixture("installation_repositories.removed"),
        {"installation.id": inst, "repositories_removed": added["repositories_added"]},
    )
    router.dispatch("installation_repositories", "removed", repos_ctx, removed)
    stored = installations.get(ctx.sessions, inst)
    assert stored is not None and set(stored.repositories) == before


def test_ping_fixtures_are_accepted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    router = app_router()
    for name in ("ping", "ping.with-app_id"):
        payload = fixture(name)
        ctx = _context(tmp_path, "ping", None)
        with caplog.at_level(logging.INFO, logger="test"):
            assert router.dispatch("ping", None, ctx, payload) == 1
        assert f"ping from hook {payload['hook_id']}" in caplog.text
