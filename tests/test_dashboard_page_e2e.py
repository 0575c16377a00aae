"""End to end: the dashboard's page, kept by the drift watch's rounds and served by the real App
(uvicorn + worker + store, ``REPORT_BASE_URL`` set) against the GitHub fake and fake W&B
(``tests/drift_world.py``).

The issue's body links ``REPORT_BASE_URL/reports/TOKEN`` (its intro line, and its cut notice
when cut for size); the tests fetch ``/reports/TOKEN`` from the App itself.  The page is the
whole dashboard, at one address while it lives; a round with nothing new writes nothing, in
the store as on GitHub; a private repository (no ``REPORT_PRIVATE_REPOS``) has no page and no
link, and a dashboard written without the page settings has no link.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select

from bot.adapters.store.reports import PAGE_NUMBER, ReportRow
from bot.app.reports import CSP
from bot.core.dashboard.body import dashboard_body
from bot.core.dashboard.boxes import BOX_PREFIX
from bot.core.dashboard.view import RepoView
from bot.features.dashboard import write
from bot.features.dashboard.write import DashboardStep
from tests.drift_world import World, open_world
from tests.fakes.github_state import Repo
from tests.test_dashboard_e2e import (
    EVAL,
    HEALTHY,
    MIN_FAILURES,
    TRAIN,
    Seed,
    dashboard_requests,
    md,
    run,
    seed_repository,
    the_dashboard,
)
from tests.test_drift_watch import store_writes

pytestmark = pytest.mark.servers

BASE = "https://bot.example.test/threshold"
LINK = re.compile(rf"\[The whole dashboard\]\({re.escape(BASE)}/reports/([\w-]{{43}})\)")
CUT_LIMIT = 1500  # a body this short leaves Healthy and Detected threshold files out


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, module_backends: dict[str, str]
) -> Iterator[World]:
    """The App serving report pages, on SQLite and on PostgreSQL + Redis."""
    tmp = tmp_path_factory.mktemp("dashboard_page")
    with open_world(tmp, report_base_url=BASE, **module_backends) as running:
        yield running


@pytest.fixture(scope="module")
def seed(world: World) -> Seed:
    repo, nightly = seed_repository(world, "octo/paged")
    first = len(nightly.values)
    rounds = [world.watch()]
    for _night in range(MIN_FAILURES + 1):
        run(nightly)
        rounds.append(world.watch())
    return Seed(repo, nightly, first, rounds)


def token(body: str) -> str:
    """The one page the body links (its intro line links it)."""
    intro = body.split("\n## ")[0]
    (found,) = LINK.findall(intro)
    assert set(LINK.findall(body)) == {found}
    return found


def fetch(world: World, page: str) -> httpx.Response:
    return httpx.get(f"{world.url}/reports/{page}", timeout=30)


def page_rows(world: World, repo: Repo) -> list[ReportRow]:
    query = select(ReportRow).where(
        ReportRow.repo == repo.full_name, ReportRow.number == PAGE_NUMBER
    )
    with world.runtime.sessions() as session:
        return list(session.scalars(query))


def test_the_body_links_the_whole_dashboard_the_app_serves(seed: Seed, world: World) -> None:
    body = the_dashboard(seed.repo).body
    page = fetch(world, token(body))

    assert page.status_code == 200
    assert page.headers["content-security-policy"] == CSP
    assert page.headers["cache-control"] == "private, max-age=60"
    html = page.text
    assert html.lstrip().lower().startswith("<!doctype html>")
    for heading in ("<h2>Needs attention</h2>", "<h2>Flaky</h2>", "<h2>Detected threshold"):
        assert heading in html
    assert f"<summary>Healthy ({len(HEALTHY)})</summary>" in html
    for gate in (TRAIN, EVAL, *HEALTHY):
        assert f"<code>{gate}</code>" in html  # markdown's \_ read as _
        assert f"<code>{md(gate)}</code>" in body
    assert BOX_PREFIX not in html and "Check again now" not in html
    (row,) = page_rows(world, seed.repo)
    assert row.head_sha == seed.repo.head(seed.repo.default_branch)


def test_a_round_with_nothing_new_writes_nothing(seed: Seed, world: World) -> None:
    world.watch()
    body = the_dashboard(seed.repo).body
    (before,) = page_rows(world, seed.repo)
    requests = len(dashboard_requests(world, seed.repo))

    with store_writes(world.runtime.sessions) as written:
        world.watch()

    # the dashboard's and its page's tables (the W&B history cache stamps its sync apart)
    assert [w for w in written if re.search(r"\b(reports|dashboards)\b", w)] == []
    assert len(dashboard_requests(world, seed.repo)) == requests
    assert the_dashboard(seed.repo).body == body
    (after,) = page_rows(world, seed.repo)
    assert (after.created_at, after.expires_at) == (before.created_at, before.expires_at)


def test_a_change_updates_the_page_at_the_same_address(seed: Seed, world: World) -> None:
    first = token(the_dashboard(seed.repo).body)
    before = fetch(world, first).text

    run(seed.nightly)
    world.watch()

    assert token(the_dashboard(seed.repo).body) == first
    after = fetch(world, first)
    assert after.status_code == 200 and after.text != before
    assert len(page_rows(world, seed.repo)) == 1


def test_a_body_cut_for_size_links_the_page_which_holds_it_all(world: World) -> None:
    repo, _nightly = seed_repository(world, "octo/cut")

    def short(view: RepoView) -> str:
        return dashboard_body(view, limit=CUT_LIMIT)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(write, "dashboard_body", short)
        world.watch()

    body = the_dashboard(repo).body
    assert len(body) <= CUT_LIMIT
    page = token(body)
    notice = "*Left out to fit GitHub's size limit: Healthy, Detected threshold files."
    assert f"{notice} [The whole dashboard]({BASE}/reports/{page}).*" in body  # linked
    html = fetch(world, page).text
    for gate in HEALTHY:
        assert md(gate) not in body
        assert f"<code>{gate}</code>" in html
    assert "<h2>Detected threshold files</h2>" in html


def test_a_private_repository_has_no_page_and_no_link(world: World) -> None:
    private, _ = seed_repository(world, "octo/secret")
    private.private = True
    public, nightly = seed_repository(world, "octo/going-private")
    world.watch()

    assert "The whole dashboard" not in the_dashboard(private).body
    assert page_rows(world, private) == []
    assert token(the_dashboard(public).body)
    assert len(page_rows(world, public)) == 1

    public.private = True  # made private: its page goes, and the link
    run(nightly)
    world.watch()
    assert "The whole dashboard" not in the_dashboard(public).body
    assert page_rows(world, public) == []


def test_without_the_page_settings_no_link(world: World) -> None:
    repo, _nightly = seed_repository(world, "octo/unpaged")
    world.watch(DashboardStep(everywhere=False))  # REPORT_BASE_URL unset, as the step sees it
    body = the_dashboard(repo).body
    assert "The whole dashboard" not in body and "/reports/" not in body
    assert page_rows(world, repo) == []
