"""The App's credentials: installation clients (App JWT auth) and token clients (CLI).

``GitHubApp`` authenticates as the App (``Auth.AppAuth``) and hands out a ``GitHubClient``
per installation and thread; the installation's token (``InstallationToken``) and its kept
answers for conditional reads (``conditional.ETags``) are shared by its clients in every
thread, never by another installation's.
``repository_reader(settings)`` reads a repository as the App's installation on it sees it
(the report pages re-check their repository's visibility with it).
``app_login(settings)`` is the App's login (``BOT_LOGIN``, else read from ``GET /app``),
one per App and process, shared by the webhook, the workers and the clients.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from github import Auth, Github, GithubException, GithubIntegration, GithubRetry
from github.InstallationAuthorization import InstallationAuthorization

from bot.adapters.github import DEFAULT_API_URL
from bot.adapters.github.api import GitHubFactory, RepoInfo
from bot.adapters.github.client import GitHubClient
from bot.adapters.github.conditional import ETags
from bot.adapters.github.errors import GitHubNotFound, GitHubUnsafeInput, translated
from bot.adapters.github.identity import AppLogin
from bot.adapters.github.support import shown
from bot.adapters.settings import DEFAULT_MAX_FILE_BYTES, Settings
from bot.core.api_paths import is_full_name

# A token is renewed this long before GitHub said it expires: a request keeps the token it
# was sent with through its retries (GithubRetry waits up to 60 s on a rate limit, then backs
# off, each attempt up to the timeout), and this host's clock and GitHub's may differ.
# PyGithub's AppInstallationAuth renews only 20 s before.
TOKEN_RENEW_MARGIN = timedelta(minutes=5)
_LOGINS: dict[int, tuple[Settings, AppLogin]] = {}  # by id(settings), kept alive here
_LOGINS_LOCK = threading.Lock()


class InstallationToken(Auth.Auth):
    """An installation's access token, shared by that installation's clients in every thread.

    Created through the App (``POST /app/installations/{id}/access_tokens``, PyGithub's
    ``GithubIntegration.get_access_token``) on first use, and again once it is within
    ``TOKEN_RENEW_MARGIN`` of the expiry GitHub gave it (an hour), under a lock so threads
    asking at once get one token.  Not PyGithub's ``AppInstallationAuth``: that one renews
    20 s before expiry, unlocked, through whichever client's requester it was last bound to.
    """

    def __init__(self, integration: Callable[[], GithubIntegration], installation_id: int):
        self._integration = integration
        self._installation_id = installation_id
        self._authorization: InstallationAuthorization | None = None
        self._lock = threading.Lock()

    @property
    def token_type(self) -> str:
        return "token"

    @property
    def token(self) -> str:
        with self._lock:
            held = self._authorization
            if held is None or held.expires_at - TOKEN_RENEW_MARGIN <= datetime.now(UTC):
                held = self._integration().get_access_token(self._installation_id)
                self._authorization = held
            return held.token


@dataclass(frozen=True)
class _Installation:
    """What an installation's clients in every thread share: its token and kept answers."""

    token: InstallationToken
    etags: ETags


class GitHubApp:
    """The App's credentials; hands out a cached ``GitHubClient`` per installation and thread."""

    def __init__(
        self,
        app_id: int | str,
        private_key: str,
        *,
        base_url: str = DEFAULT_API_URL,
        timeout: int = 15,
        retries: int = 3,
        backoff: float = 0.5,
        throttle: bool = True,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        login: AppLogin | None = None,
    ) -> None:
        """``throttle`` spaces writes 1 s apart, as GitHub asks of integrations; reads are
        never delayed.  ``throttle=False`` (local fakes) sends everything at once.
        ``max_file_bytes``: the largest file the clients read from a repository.
        ``login``: the App's login (default: read from ``GET /app`` on first use)."""
        self.app_id = int(app_id)
        self._auth = Auth.AppAuth(self.app_id, private_key)
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._retries = retries
        self._backoff = backoff
        self._throttle = throttle
        self._max_file_bytes = max_file_bytes
        self._local = threading.local()
        self._installations: dict[int, _Installation] = {}
        self._installations_lock = threading.Lock()
        self.login = login if login is not None else AppLogin(self.read_login)

    @translated
    def read_login(self) -> str:
        """The App's bot login, ``{slug}[bot]``, from ``GET /app`` (App JWT)."""
        return f"{self.integration().get_app().slug}[bot]"

    @translated
    def repository(self, repo: str) -> RepoInfo | None:
        """``repo`` as the App's installation on it sees it: ``GET /repos/{owner}/{repo}/
        installation`` (App JWT), then ``GET /repos/{owner}/{repo}`` as that installation.
        None when the App is not installed on it or it is gone (404); other failures raise
        ``GitHubError``."""
        owner, _, name = repo.partition("/")
        if not is_full_name(repo):
            raise GitHubUnsafeInput(f"refusing {shown(repo)} as a repository: not owner/name")
        try:
            installation = self.integration().get_repo_installation(owner, name)
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        try:
            return self.installation(installation.id).repository(repo)
        except GitHubNotFound:
            return None

    def _retry(self) -> GithubRetry:
        # POST is left out: a POST that failed may have landed (see ``_create_once``).
        return GithubRetry(
            total=self._retries,
            backoff_factor=self._backoff,
            allowed_methods={"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"},
            max_rate_limit_wait=60,
        )

    def installation(self, installation_id: int) -> GitHubClient:
        """A client acting as installation ``installation_id``: one per thread (a PyGithub
        client's HTTP session is not thread-safe), each with the installation's token and
        ``ETags``, shared by its clients in every thread and never by another installation's
        (one of each per installation the App has acted as: a token and at most
        ``conditional.ETAG_ENTRIES`` kept answers)."""
        cache: dict[int, GitHubClient] = self._local.__dict__.setdefault("clients", {})
        client = cache.get(installation_id)
        if client is None:
            with self._installations_lock:
                shared = self._installations.get(installation_id)
                if shared is None:
                    token = InstallationToken(self.integration, installation_id)
                    shared = self._installations[installation_id] = _Installation(token, ETags())
            gh = Github(
                auth=shared.token,
                base_url=self._base_url,
                timeout=self._timeout,
                retry=self._retry(),
                lazy=True,
                seconds_between_requests=None,
                seconds_between_writes=1.0 if self._throttle else None,
            )
            client = cache[installation_id] = GitHubClient(
                gh,
                app_id=self.app_id,
                login=self.login,
                max_file_bytes=self._max_file_bytes,
                etags=shared.etags,
            )
        return client

    def integration(self) -> GithubIntegration:
        """PyGithub's client of the App itself (App JWT; GETs retried, POSTs not; writes
        spaced as ``throttle`` says, reads never delayed)."""
        return GithubIntegration(
            auth=self._auth,
            base_url=self._base_url,
            timeout=self._timeout,
            retry=self._retry(),
            seconds_between_requests=None,
            seconds_between_writes=1.0 if self._throttle else None,
        )


def client_factory(settings: Settings, *, throttle: bool | None = None) -> GitHubFactory:
    """Installation id -> ``GitHubClient`` for the App in ``settings``.

    ``throttle`` defaults to on, except against an API on the loopback interface (a local
    fake GitHub in tests and the demo).
    """
    if settings.app_id is None:
        raise ValueError("APP_ID is required to talk to GitHub")
    key = settings.private_key_pem()
    if not key:
        raise ValueError("PRIVATE_KEY or PRIVATE_KEY_PATH is required to talk to GitHub")
    if throttle is None:
        throttle = not loopback(settings.github_api_url)
    app = GitHubApp(
        settings.app_id,
        key,
        base_url=settings.github_api_url,
        throttle=throttle,
        max_file_bytes=settings.max_file_bytes,
        login=app_login(settings),
    )
    return app.installation


def repository_reader(
    settings: Settings, *, timeout: int = 5, retries: int = 1
) -> Callable[[str], RepoInfo | None]:
    """``GitHubApp.repository`` of the App in ``settings``, with a short ``timeout`` and few
    ``retries`` (a page waits on it).  ``ValueError`` without ``APP_ID`` or a private key."""
    key = settings.private_key_pem()
    if settings.app_id is None or not key:
        raise ValueError("APP_ID and PRIVATE_KEY are required to read a repository")
    app = GitHubApp(
        settings.app_id, key, base_url=settings.github_api_url, timeout=timeout, retries=retries
    )
    return app.repository


def app_login(settings: Settings) -> AppLogin:
    """The App's login: ``BOT_LOGIN`` when set, else ``{slug}[bot]`` read from ``GET /app``
    on first use (none without ``APP_ID`` and a private key).  One per ``settings`` object,
    so the webhook, the workers and the clients of a process share it."""
    with _LOGINS_LOCK:
        found = _LOGINS.get(id(settings))
        if found is None or found[0] is not settings:
            found = _LOGINS[id(settings)] = (settings, _new_login(settings))
        return found[1]


def _new_login(settings: Settings) -> AppLogin:
    key = settings.private_key_pem()
    if settings.bot_login or settings.app_id is None or not key:
        return AppLogin(None, settings.bot_login)
    # one quick retry: while GitHub fails, the login is asked again a minute later
    url = settings.github_api_url
    return GitHubApp(settings.app_id, key, base_url=url, timeout=10, retries=1).login


def token_client(token: str, *, base_url: str = DEFAULT_API_URL, timeout: int = 15) -> GitHubClient:
    """A read-mostly client authenticated with a personal or Actions token (CLI ``--repo``)."""
    gh = Github(
        auth=Auth.Token(token),
        base_url=base_url.rstrip("/"),
        timeout=timeout,
        retry=GithubRetry(total=3, backoff_factor=0.5, allowed_methods={"GET"}),
        lazy=True,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    return GitHubClient(gh)


def loopback(url: str) -> bool:
    """Whether the API at ``url`` is on this host's loopback interface (a local fake)."""
    return (urlsplit(url).hostname or "") in ("127.0.0.1", "localhost", "::1")
