"""GitHub as a workflow's token sees it: the client of ``threshold-bot action``.

The token is the workflow's ``GITHUB_TOKEN`` (an installation token of the GitHub Actions
App, whose comments are written by ``github-actions[bot]``) or a personal token.  Comments
are the client's own when written by the token's user: ``GET /user`` names it for a
personal token.  An installation token (``ghs_…``) may not read it (the request would end
in a 403 in the job's log), so none is made: it writes as ``github-actions[bot]``.
``author`` names the login outright (another GitHub App's token: ``slug[bot]``).
"""

from __future__ import annotations

from github import Auth, Github, GithubException, GithubRetry

from bot.adapters.github.client import GitHubClient
from bot.adapters.github.errors import translated
from bot.adapters.github.identity import AppLogin

ACTIONS_LOGIN = "github-actions[bot]"
INSTALLATION_PREFIX = "ghs_"  # GitHub's prefix of installation (server-to-server) tokens


def workflow_client(
    token: str, *, base_url: str, author: str | None = None, timeout: int = 15
) -> GitHubClient:
    """A client acting with ``token``; its own comments are those of ``author`` (default:
    the token's user, ``github-actions[bot]`` for an installation token, decided from its
    prefix).  Raises ``GitHubError`` when GitHub refuses the token."""
    gh = Github(
        auth=Auth.Token(token),
        base_url=base_url.rstrip("/"),
        timeout=timeout,
        retry=GithubRetry(total=3, backoff_factor=0.5, allowed_methods={"GET", "PATCH"}),
        lazy=True,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )
    if not author and token.startswith(INSTALLATION_PREFIX):
        author = ACTIONS_LOGIN  # an installation token may not ask GET /user
    return GitHubClient(gh, login=AppLogin(None, author or _token_login(gh)))


@translated
def _token_login(gh: Github) -> str:
    """The login of the token's user; ``github-actions[bot]`` for a token that may not ask."""
    try:
        _, data = gh.requester.requestJsonAndCheck("GET", "/user")
    except GithubException as exc:
        if exc.status in (403, 404):  # an installation token: "Resource not accessible"
            return ACTIONS_LOGIN
        raise
    login = data.get("login") if isinstance(data, dict) else None
    return login if isinstance(login, str) and login else ACTIONS_LOGIN
