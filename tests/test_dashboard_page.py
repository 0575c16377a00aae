"""The dashboard's page (``bot.core.dashboard.page``) and the body's link to it: the page holds
the whole dashboard the body cuts, outside strings shown as text (raw HTML off, no script, no
hidden comment, no box); the body links the page in its intro and in its cut notice when a
page is configured, and not at all otherwise."""

from __future__ import annotations

import re

import pytest

from bot.core.dashboard.body import BODY_LIMIT, dashboard_body
from bot.core.dashboard.boxes import BOX_PREFIX
from bot.core.dashboard.page import dashboard_page
from bot.core.dashboard.view import RepoView
from bot.core.models import UnboundVariable
from tests.builders import limit_gate
from tests.dashboard_views import SHA, URL, Kinds, drifting_values, file_view, kinds

PAGE = "https://bot.example.test/threshold/reports/" + "A" * 43
HOSTILE_METRIC = "acc|<img src=x onerror=alert(1)>@someone"
LINK = f"[The whole dashboard]({PAGE})"


@pytest.fixture(scope="module")
def made() -> Kinds:
    return kinds()


def _many(made: Kinds, healthy: int, drifting: int, report_url: str = PAGE) -> RepoView:
    files = [made.healthy.model_copy(update={"path": f"ci/fine{i}.sh"}) for i in range(healthy)]
    files += [made.drifting.model_copy(update={"path": f"ci/train{i}.sh"}) for i in range(drifting)]
    hint = UnboundVariable(name="HINTED", file="ci/fine0.sh", line=1, literal="1", reason="r")
    files[0] = files[0].model_copy(update={"hints": (hint,)})
    return RepoView(
        repo="octo/repo",
        branch="main",
        sha=SHA,
        url=URL,
        files=tuple(files),
        report_url=report_url,
    )


def _text(html: str) -> str:
    """The page's text, tags removed (what a reader sees, entities left as written)."""
    return re.sub(r"<[^>]*>", "", html)


def test_the_page_holds_what_the_body_cuts(made: Kinds) -> None:
    view = _many(made, healthy=3000, drifting=5)
    body = dashboard_body(view)
    page = dashboard_page(view)

    assert len(body) <= BODY_LIMIT and "<code>FINE</code>" not in body
    assert f"Detected threshold files. {LINK}.*" in body  # the cut notice links the page
    assert page.count("<code>FINE</code>") == 3000 * 2  # Healthy, and Detected threshold files
    assert page.count("<code>TRAIN</code>") == 5 * 2
    for part in ("attention", "healthy", "detected", "hints"):
        assert f'id="{part}"' in page
    assert '<details class="part" id="healthy">\n<summary>Healthy (3000)</summary>' in page
    assert "<summary>Literals not bound to a gate (1)</summary>" in page
    assert "<code>HINTED</code>" in page
    assert "Left out" not in page and "Check again now" not in page
    assert BOX_PREFIX not in page and "<!--" not in page and "[ ]" not in page
    assert "<script" not in page and PAGE not in page  # no script, no link to itself


def test_the_intro_links_the_page_even_when_nothing_is_cut(made: Kinds) -> None:
    body = dashboard_body(made.view(report_url=PAGE))
    intro = body.split("\n## ")[0]
    assert LINK in intro
    assert "Left out" not in body


def test_not_configured_no_link(made: Kinds) -> None:
    cut = dashboard_body(_many(made, healthy=3000, drifting=5, report_url=""))
    whole = dashboard_body(made.view())
    assert "*Left out to fit GitHub's size limit:" in cut
    for body in (cut, whole):
        assert "The whole dashboard" not in body and "/reports/" not in body


def test_hostile_names_are_text_on_the_page(made: Kinds) -> None:
    gate = limit_gate(HOSTILE_METRIC, ">=", "0.75", name="X*_[y](javascript:1)")
    path = "ci/<b>x</b> @org -->.sh"
    evil = file_view(path, [gate], drifting_values(), metric=HOSTILE_METRIC)
    page = dashboard_page(made.view(evil, notes=("<script>@admin</script>",)))

    for tag in ("<img", "<b>", "<script", 'href="javascript', "-->"):
        assert tag not in page
    text = _text(page)
    assert "acc|&lt;img src=x onerror=alert(1)&gt;@" in text  # shown as written
    assert "&lt;script&gt;@" in text and "ci/&lt;b&gt;x&lt;/b&gt; @" in text


def test_the_same_view_gives_the_same_page(made: Kinds) -> None:
    assert dashboard_page(made.view()) == dashboard_page(made.view())
    assert dashboard_page(made.view()) == dashboard_page(made.view(report_url=PAGE))
