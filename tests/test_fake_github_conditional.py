"""The fake GitHub's conditional requests, driven by the real PyGithub client: a weak ETag on
every JSON GET, ``304 Not Modified`` (empty, free of rate limit, recorded apart) for an
``If-None-Match`` that holds it, and a new ETag once the resource changed."""

from __future__ import annotations

import re
from typing import Any

import pytest
from github import Github

from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo

pytestmark = pytest.mark.servers

INSTALLATION = 7
REF = "/repos/octo/ml/git/ref/heads/main"
WEAK_ETAG = re.compile(r'W/"[0-9a-f]{64}"')


@pytest.fixture
def octo(fake_github: FakeGitHub) -> Repo:
    return fake_github.add_repo("octo/ml", installation_id=INSTALLATION)


def get(gh: Github, path: str, etag: str | None = None) -> tuple[dict[str, Any], Any]:
    headers = {} if etag is None else {"If-None-Match": etag}
    return gh.requester.requestJsonAndCheck("GET", path, headers=headers)


def test_a_json_get_carries_a_weak_etag_and_githubs_cache_headers(
    fake_github: FakeGitHub, octo: Repo
) -> None:
    gh = fake_github.client(INSTALLATION)
    headers, data = get(gh, REF)
    assert data["object"]["sha"] == octo.head("main")
    assert WEAK_ETAG.fullmatch(headers["etag"])
    assert "Authorization" in headers["vary"]
    assert headers["cache-control"].startswith("private")
    again, _ = get(gh, REF)
    assert again["etag"] == headers["etag"]  # the same body, the same ETag
    other, _ = get(gh, "/repos/octo/ml")
    assert WEAK_ETAG.fullmatch(other["etag"]) and other["etag"] != headers["etag"]


def test_the_etag_it_would_send_gets_an_empty_304_recorded_apart(
    fake_github: FakeGitHub, octo: Repo
) -> None:
    gh = fake_github.client(INSTALLATION)
    etag = get(gh, REF)[0]["etag"]
    headers, data = get(gh, REF, etag)
    assert data is None  # no body
    assert headers["etag"] == etag
    # the opaque tag compares weakly, and a list of tags matches when one of them does
    assert get(gh, REF, etag.removeprefix("W/"))[1] is None
    assert get(gh, REF, f'"other", {etag}')[1] is None
    assert [c.status for c in fake_github.requests("GET", REF)] == [200, 304, 304, 304]
    fake_github.check()  # an empty 304 breaks no schema


def test_another_etag_or_a_changed_resource_gets_the_body(
    fake_github: FakeGitHub, octo: Repo
) -> None:
    gh = fake_github.client(INSTALLATION)
    etag = get(gh, REF)[0]["etag"]
    assert get(gh, REF, 'W/"0123"')[1]["object"]["sha"] == octo.head("main")
    pushed = octo.commit("main", {"README.md": "# pushed\n"})
    headers, data = get(gh, REF, etag)
    assert data["object"]["sha"] == pushed
    assert headers["etag"] != etag
    assert get(gh, REF, headers["etag"])[1] is None
    assert [c.status for c in fake_github.requests("GET", REF)] == [200, 200, 200, 304]


def test_a_304_does_not_count_against_the_rate_limit(fake_github: FakeGitHub, octo: Repo) -> None:
    gh = fake_github.client(INSTALLATION)
    fake_github.rate_cost = 1
    fake_github.rate_remaining = 100
    etag = get(gh, REF)[0]["etag"]  # says 100, leaves 99
    for _ in range(3):
        headers, _ = get(gh, REF, etag)
        assert headers["x-ratelimit-remaining"] == "99"
    assert gh.requester.rate_limiting[0] == 99  # PyGithub reads the 304's rate headers
    assert fake_github.rate_remaining == 99
    get(gh, REF)  # a plain read costs again
    assert fake_github.rate_remaining == 98


def test_a_304_does_not_count_against_the_installations_own_rate_limit(
    fake_github: FakeGitHub, octo: Repo
) -> None:
    gh = fake_github.client(INSTALLATION)
    fake_github.rate_cost = 1
    etag = get(gh, REF)[0]["etag"]
    fake_github.installation_rates[INSTALLATION] = 50
    assert get(gh, REF, etag)[0]["x-ratelimit-remaining"] == "50"
    assert fake_github.installation_rates[INSTALLATION] == 50
    assert get(gh, REF, 'W/"stale"')[0]["x-ratelimit-remaining"] == "50"
    assert fake_github.installation_rates[INSTALLATION] == 49


def test_another_installations_etag_is_answered_with_its_own_body(
    fake_github: FakeGitHub, octo: Repo
) -> None:
    fake_github.add_repo("acme/other", installation_id=8)
    first = fake_github.client(INSTALLATION)
    second = fake_github.client(8)
    etag = get(first, "/installation/repositories")[0]["etag"]
    headers, data = get(second, "/installation/repositories", etag)
    assert [r["full_name"] for r in data["repositories"]] == ["acme/other"]
    assert headers["etag"] != etag
    assert [c.status for c in fake_github.requests("GET", "/installation/repositories")] == [
        200,
        200,
    ]
