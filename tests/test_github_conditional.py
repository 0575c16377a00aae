"""Conditional reads of the GitHub client against the fake GitHub: a branch head and the
installation's repositories are asked again with the ETag GitHub sent (``If-None-Match``), a
304 is answered from what the client kept, per installation, shared across threads, free of
rate limit; and one installation token per installation, shared across threads, renewed
before it expires."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest

from bot.adapters.github.app import TOKEN_RENEW_MARGIN, GitHubApp
from bot.adapters.github.client import GitHubClient
from bot.adapters.github.conditional import ETags
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import Repo

pytestmark = pytest.mark.servers

INSTALLATION = 7
REPO = "octo/ml"
REF = f"/repos/{REPO}/git/ref/heads/main"
LISTING = "/installation/repositories"
T = TypeVar("T")


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server
        server.check()


@pytest.fixture
def repo(fake: FakeGitHub) -> Repo:
    return fake.add_repo(REPO, installation_id=INSTALLATION)


@pytest.fixture
def app(fake: FakeGitHub) -> GitHubApp:
    return fake.github_app()


def statuses(fake: FakeGitHub, path: str) -> list[int]:
    return [c.status for c in fake.requests("GET", path)]


def listing_statuses(fake: FakeGitHub) -> list[tuple[str, int]]:
    return [(c.query.get("page", "1"), c.status) for c in fake.requests("GET", LISTING)]


def in_thread(work: Callable[[], T]) -> T:
    """``work()`` run in a new thread, as the App's periodic jobs run each round."""
    with ThreadPoolExecutor(max_workers=1) as one:
        return one.submit(work).result(timeout=60)


# ----- branch heads ------------------------------------------------------------------------------
def test_a_second_branch_head_is_a_304_with_the_same_sha(
    fake: FakeGitHub, app: GitHubApp, repo: Repo
) -> None:
    client = app.installation(INSTALLATION)
    first = client.branch_head(REPO, "main")
    assert first == repo.head("main")
    assert client.branch_head(REPO, "main") == first
    assert statuses(fake, REF) == [200, 304]


def test_a_push_changes_the_etag_and_the_new_head_is_read(
    fake: FakeGitHub, app: GitHubApp, repo: Repo
) -> None:
    client = app.installation(INSTALLATION)
    before = client.branch_head(REPO, "main")
    pushed = repo.commit("main", {"README.md": "# pushed\n"})
    assert pushed != before
    assert client.branch_head(REPO, "main") == pushed
    assert client.branch_head(REPO, "main") == pushed
    assert statuses(fake, REF) == [200, 200, 304]


def test_a_missing_branch_is_none_and_then_found(
    fake: FakeGitHub, app: GitHubApp, repo: Repo
) -> None:
    client = app.installation(INSTALLATION)
    assert client.branch_head(REPO, "gone") is None
    made = repo.commit("gone", {"x.txt": "x\n"})
    assert client.branch_head(REPO, "gone") == made


def test_a_new_threads_client_gets_304s_and_costs_no_rate_limit(
    fake: FakeGitHub, app: GitHubApp, repo: Repo
) -> None:
    fake.rate_cost = 1
    fake.rate_remaining = 1000
    head = app.installation(INSTALLATION).branch_head(REPO, "main")
    left = fake.rate_remaining

    def warm_read() -> tuple[str | None, int | None]:
        client = app.installation(INSTALLATION)
        return client.branch_head(REPO, "main"), client.rate_remaining()

    assert in_thread(warm_read) == (head, left)  # the 304 carries the rate headers too
    assert in_thread(warm_read) == (head, left)
    assert statuses(fake, REF) == [200, 304, 304]
    assert fake.rate_remaining == left


def test_another_installation_never_sends_the_first_ones_etag(
    fake: FakeGitHub, app: GitHubApp, repo: Repo
) -> None:
    # octo/ml is public: installation 8 reads the very same body, so a shared ETag would be
    # answered 304 and the read answered from installation 7's data
    fake.add_repo("acme/other", installation_id=8)
    assert app.installation(INSTALLATION).branch_head(REPO, "main") == repo.head("main")
    assert app.installation(8).branch_head(REPO, "main") == repo.head("main")
    assert app.installation(INSTALLATION).installation_repositories()
    assert app.installation(8).installation_repositories()
    assert statuses(fake, REF) == [200, 200]
    assert statuses(fake, LISTING) == [200, 200]
    # and each installation's next read is its own 304
    app.installation(8).branch_head(REPO, "main")
    assert statuses(fake, REF) == [200, 200, 304]


# ----- the installation's repositories -------------------------------------------------------
@pytest.fixture
def many(fake: FakeGitHub) -> list[Repo]:
    """150 repositories of the installation: two pages of 100."""
    return [fake.add_repo(f"octo/r{i:03}", installation_id=INSTALLATION) for i in range(150)]


def names(client: GitHubClient) -> list[str]:
    return [info.full_name for info in client.installation_repositories()]


def test_every_page_of_an_unchanged_listing_is_a_304(
    fake: FakeGitHub, app: GitHubApp, many: list[Repo]
) -> None:
    fake.rate_cost = 1
    expected = [r.full_name for r in many]
    assert names(app.installation(INSTALLATION)) == expected
    left = fake.rate_remaining
    assert in_thread(lambda: names(app.installation(INSTALLATION))) == expected
    assert listing_statuses(fake) == [("1", 200), ("2", 200), ("1", 304), ("2", 304)]
    assert fake.rate_remaining == left


def test_a_repository_added_or_removed_is_seen(
    fake: FakeGitHub, app: GitHubApp, many: list[Repo]
) -> None:
    client = app.installation(INSTALLATION)
    names(client)
    added = fake.add_repo("octo/zz-new", installation_id=INSTALLATION)
    assert names(client) == [r.full_name for r in [*many, added]]
    many[3].installation_id = None  # taken out of the installation
    assert names(client) == [r.full_name for r in [*many[:3], *many[4:], added]]
    assert names(client)[-1] == added.full_name
    assert listing_statuses(fake)[-2:] == [("1", 304), ("2", 304)]


def test_a_page_that_changed_is_read_while_the_others_are_304s(
    fake: FakeGitHub, app: GitHubApp, many: list[Repo]
) -> None:
    client = app.installation(INSTALLATION)
    names(client)
    many[120].archived = True  # on page 2
    listed = client.installation_repositories()
    assert [i.full_name for i in listed if i.archived] == [many[120].full_name]
    assert listing_statuses(fake)[2:] == [("1", 304), ("2", 200)]
    # a page grows: a third appears, and is read
    more = [fake.add_repo(f"octo/s{i:03}", installation_id=INSTALLATION) for i in range(60)]
    assert names(client) == [r.full_name for r in [*many, *more]]
    assert [page for page, _ in listing_statuses(fake)[4:]] == ["1", "2", "3"]


def test_a_page_linking_back_ends_the_listing(fake: FakeGitHub, app: GitHubApp, repo: Repo) -> None:
    first = f"{fake.base_url}{LISTING}?per_page=100"
    body = fake.shapes.installation_repositories([repo], 1)
    fake.fail_next("GET", LISTING, 200, 5, {"Link": f'<{first}>; rel="next"'}, body)
    assert names(app.installation(INSTALLATION)) == [REPO]
    assert listing_statuses(fake) == [("1", 200)]


# ----- the kept answers ----------------------------------------------------------------------
def test_etags_keep_the_most_recently_used_entries_up_to_their_size() -> None:
    kept = ETags(size=2)
    kept.put("a", 'W/"1"', "A")
    kept.put("b", 'W/"2"', "B")
    assert kept.get("a") == ('W/"1"', "A")  # a is now the most recently used
    kept.put("c", 'W/"3"', "C")
    assert kept.get("b") is None
    assert [kept.get(k) for k in ("a", "c")] == [('W/"1"', "A"), ('W/"3"', "C")]


# ----- installation tokens -------------------------------------------------------------------
TOKENS = f"/app/installations/{INSTALLATION}/access_tokens"


def test_rounds_in_new_threads_share_one_installation_token(
    fake: FakeGitHub, app: GitHubApp, many: list[Repo]
) -> None:
    def round_() -> list[str | None]:
        client = app.installation(INSTALLATION)
        return [client.branch_head(i.full_name, "main") for i in client.installation_repositories()]

    heads = [r.head("main") for r in many]
    assert in_thread(round_) == heads
    assert in_thread(round_) == heads
    assert len(fake.requests("POST", TOKENS)) == 1
    # the warm round: every read a 304
    warm = fake.calls[-(len(many) + 2) :]
    assert {c.status for c in warm} == {304}


def test_threads_asking_at_once_get_one_token(fake: FakeGitHub, app: GitHubApp, repo: Repo) -> None:
    start = threading.Barrier(8)

    def read() -> str | None:
        client = app.installation(INSTALLATION)
        start.wait(timeout=30)
        return client.branch_head(REPO, "main")

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(fake.requests("POST", TOKENS)) == 1
    assert len(fake.requests("GET", REF)) == 8


def test_each_installation_has_its_own_token(fake: FakeGitHub, app: GitHubApp, repo: Repo) -> None:
    fake.add_repo("acme/other", installation_id=8)
    for _ in range(2):
        assert in_thread(lambda: app.installation(8).branch_head("acme/other", "main"))
        assert in_thread(lambda: app.installation(INSTALLATION).branch_head(REPO, "main"))
    tokens = [c.path for c in fake.requests("POST") if c.path.endswith("/access_tokens")]
    assert tokens == ["/app/installations/8/access_tokens", TOKENS]


def test_a_token_close_to_expiry_is_renewed_before_use(
    fake: FakeGitHub, app: GitHubApp, repo: Repo
) -> None:
    fake.state.token_lifetime = TOKEN_RENEW_MARGIN - timedelta(minutes=1)
    assert in_thread(lambda: app.installation(INSTALLATION).branch_head(REPO, "main"))
    (first,) = fake.state.tokens
    fake.state.tokens[first] = (INSTALLATION, datetime.now(UTC))  # GitHub refuses it now
    assert in_thread(lambda: app.installation(INSTALLATION).branch_head(REPO, "main"))
    assert len(fake.requests("POST", TOKENS)) == 2  # renewed before the second read
    assert statuses(fake, REF) == [200, 304]  # no 401: the new token was used


def test_a_token_outside_the_margin_is_kept(fake: FakeGitHub, app: GitHubApp, repo: Repo) -> None:
    fake.state.token_lifetime = TOKEN_RENEW_MARGIN + timedelta(minutes=1)
    for _ in range(2):
        assert in_thread(lambda: app.installation(INSTALLATION).branch_head(REPO, "main"))
    assert len(fake.requests("POST", TOKENS)) == 1
