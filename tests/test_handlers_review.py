"""The ``pull_request`` and ``check_run`` handlers, called through the router with real
(re-patched) payloads, a real SQLite store and the recording GitHub."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.locks import make_locks
from bot.adapters.store import tracked
from bot.adapters.store.db import init_db, make_engine
from bot.app.routes import app_router
from bot.core.models import History, Run, SourceSpec
from bot.features.context import DeliveryInfo, HandlerContext
from bot.features.review.check_run import on_rerequested
from bot.features.review.handlers import on_closed, on_pull_request
from tests.fakes.recording_github import RecordingGitHub
from tests.live import make_settings
from tests.test_review_pr import METRIC, SCRIPT, script
from tests.webhooks import fixture, patched

PROJECT = "gsm8k_ci"


class Steady:
    def fetch(self, spec: SourceSpec) -> History:
        start = datetime(2026, 8, 1, tzinfo=UTC)
        runs = tuple(
            Run(id=f"r{i}", created_at=start + timedelta(hours=i), summary={METRIC: 0.55})
            for i in range(25)
        )
        return History(runs=runs, source=spec.describe())


@pytest.fixture
def gh() -> RecordingGitHub:
    fake = RecordingGitHub()
    fake.commit({SCRIPT: script("0.56", project=PROJECT)})
    return fake


@pytest.fixture
def ctx(tmp_path: Path, gh: RecordingGitHub) -> HandlerContext:
    settings = make_settings(tmp_path)
    engine = make_engine(settings.database_url)
    return HandlerContext(
        settings=settings,
        sessions=init_db(engine),
        delivery=DeliveryInfo(id="d1", event="pull_request", action="opened", installation_id=3),
        github=lambda installation: gh,
        history=lambda spec: Steady(),
        locks=make_locks(settings, engine, "tests"),
        log=logging.LoggerAdapter(logging.getLogger("test")),
    )


def pull_payload(action: str, number: int) -> dict[str, Any]:
    return patched(
        fixture(f"pull_request.{action}"),
        {"number": number, "pull_request.number": number, "repository.full_name": "owner/repo"},
    )


def test_handlers_are_registered_for_their_events() -> None:
    router = app_router()
    for action in ("opened", "synchronize", "reopened", "ready_for_review"):
        assert on_pull_request in router.handlers("pull_request", action)
    assert on_closed in router.handlers("pull_request", "closed")
    assert on_rerequested in router.handlers("check_run", "rerequested")
    assert on_rerequested not in router.handlers("check_run", "created")


def test_opened_reviews_and_tracks_then_closed_forgets(
    ctx: HandlerContext, gh: RecordingGitHub
) -> None:
    gh.open_pull(7, {SCRIPT: script("0.50", project=PROJECT)})

    on_pull_request(ctx, pull_payload("opened", 7))

    assert gh.writes() == ["upsert_comment", "upsert_check_run"]
    with ctx.sessions() as session:
        assert [(t.installation_id, t.number) for t in tracked.tracked(session)] == [(3, 7)]
    on_closed(ctx, pull_payload("closed", 7))
    with ctx.sessions() as session:
        assert tracked.tracked(session) == []


@pytest.mark.parametrize("external_id", ["7", None])
def test_rerequested_maps_the_check_back_to_its_pull(
    ctx: HandlerContext, gh: RecordingGitHub, external_id: str | None
) -> None:
    pull = gh.open_pull(7, {SCRIPT: script("0.50", project=PROJECT)})
    payload = patched(
        fixture("check_run.rerequested"),
        {
            "check_run.name": "threshold-bot",
            "check_run.head_sha": pull.head_sha,
            "check_run.external_id": external_id,
            "check_run.pull_requests": [],
            "check_run.app.id": ctx.settings.app_id,
            "repository.full_name": "owner/repo",
        },
    )

    on_rerequested(ctx, payload)

    assert gh.writes() == ["upsert_comment", "upsert_check_run"]
    assert gh.check_for(pull.head_sha).external_id == "7"


def test_rerequested_ignores_other_apps_checks(ctx: HandlerContext, gh: RecordingGitHub) -> None:
    pull = gh.open_pull(7, {SCRIPT: script("0.50", project=PROJECT)})
    payload = patched(
        fixture("check_run.rerequested"),
        {
            "check_run.head_sha": pull.head_sha,
            "check_run.external_id": "7",
            "repository.full_name": "owner/repo",
        },
    )  # the fixture's check run is "randscape" of another app

    on_rerequested(ctx, payload)

    assert gh.writes() == []
