"""The fake GitHub's endpoint registry and the rules its handlers share.

Handlers (in ``github_endpoints_*``) register under GitHub's own OpenAPI path templates with
``@route``; each gets a ``Request`` (path parameters, query, JSON body, the installation of the
token) and returns a ``Reply`` or raises ``ApiError``. ``github_api`` does routing, auth,
recording and schema checks around them.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.fakes.github_shapes import Shapes
from tests.fakes.github_state import (
    Artifact,
    GitHubState,
    Issue,
    PullRequest,
    Repo,
)

NOT_ACCESSIBLE = "Resource not accessible by integration"
BLOB_PREFIX = "/_blobs/actions-results/"  # the artifact storage's paths (no GitHub API path)


class ApiError(Exception):
    """An error answer: status, message and optional validation ``errors``."""

    def __init__(self, status: int, message: str, errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    installation: int | None
    accept: str = ""  # the Accept header: GitHub's custom media types change some answers


@dataclass
class Reply:
    """An answer: a JSON ``body`` checked against the operation's schema for ``media``, or
    ``bytes`` sent as they are (the ``raw`` media type)."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    media: str = "application/json"


@dataclass(frozen=True)
class Route:
    handler: Callable[[Api, Request], Reply]
    auth: str  # "jwt" (the App itself) or "token" (an installation)


ROUTES: dict[tuple[str, str], Route] = {}


def route(
    method: str, template: str, auth: str = "token"
) -> Callable[[Callable[[Api, Request], Reply]], Callable[[Api, Request], Reply]]:
    """Register a handler for GitHub's ``method template`` operation."""

    def register(handler: Callable[[Api, Request], Reply]) -> Callable[[Api, Request], Reply]:
        ROUTES[(method, template)] = Route(handler, auth)
        return handler

    return register


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def parse_time(value: Any, name: str) -> datetime:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(422, f"Invalid request.\n\n{name} is not a valid ISO 8601 time.") from None


def require(body: Any, *names: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "Problems parsing JSON")
    for name in names:
        if name not in body:
            raise ApiError(422, f"Invalid request.\n\n{name!r} wasn't supplied.")
    return body


class Api:
    """The endpoint handlers over one state, with paging and access rules shared by them."""

    def __init__(self, state: GitHubState, shapes: Shapes, base_url: str) -> None:
        self.state = state
        self.shapes = shapes
        self.base = base_url
        # The artifact storage: the same server under another host name, as GitHub's storage is
        # another host (clients must not send it their GitHub token).
        self.blob_base = base_url.replace("//127.0.0.1:", "//localhost:")

    # ----- shared rules ---------------------------------------------------------------------
    def repo(self, req: Request, *, write: bool = False) -> Repo:
        """The repository of the request, if the installation may see (or write) it."""
        repo = self.state.repos.get(f"{req.params['owner']}/{req.params['repo']}")
        if repo is None:
            raise ApiError(404, "Not Found")
        installed = repo.installation_id is not None and repo.installation_id == req.installation
        if not installed and repo.private:
            raise ApiError(404, "Not Found")
        if write and not installed:
            raise ApiError(403, NOT_ACCESSIBLE)
        return repo

    def pushable(self, req: Request, branch: str) -> Repo:
        """The repository to push ``branch`` to: an installed one, or a fork whose open PR into
        an installed repository allows edits from maintainers."""
        repo = self.repo(req)
        if repo.installation_id is not None and repo.installation_id == req.installation:
            return repo
        for parent in self.state.repos.values():
            if parent.installation_id != req.installation:
                continue
            for pr in parent.pulls.values():
                if (
                    pr.state == "open"
                    and pr.head_repo is repo
                    and pr.head_ref == branch
                    and pr.maintainer_can_modify
                ):
                    return repo
        raise ApiError(403, NOT_ACCESSIBLE)

    def allow(self, req: Request, permission: str) -> None:
        """403 as GitHub answers when the installation lacks ``permission`` (``issues``,
        ``pull_requests``: see ``FakeGitHub.deny``)."""
        if permission in self.state.denied.get(req.installation or 0, set()):
            raise ApiError(403, NOT_ACCESSIBLE)

    def item(self, repo: Repo, req: Request) -> PullRequest | Issue:
        """The issue or pull request ``issue_number`` of the path."""
        number = int(req.params["issue_number"])
        found = repo.pulls.get(number) or repo.issues.get(number)
        if found is None:
            raise ApiError(404, "Not Found")
        return found

    def pull(self, repo: Repo, req: Request) -> PullRequest:
        number = int(req.params["pull_number"])
        if number not in repo.pulls:
            raise ApiError(404, "Not Found")
        return repo.pulls[number]

    def sha(self, repo: Repo, ref: str) -> str:
        sha = repo.resolve(ref)
        if sha is None:
            raise ApiError(422 if len(ref) == 40 else 404, f"No commit found for SHA: {ref}")
        return sha

    def page(
        self, req: Request, items: list[Any], default: int = 30, maximum: int = 100
    ) -> tuple[list[Any], dict[str, str]]:
        """One page of ``items`` per ``page``/``per_page``, with GitHub's ``Link`` header."""
        try:
            per_page = max(1, min(maximum, int(req.query.get("per_page", default))))
            number = max(1, int(req.query.get("page", 1)))
        except ValueError:
            raise ApiError(400, "Invalid page or per_page") from None
        last = max(1, -(-len(items) // per_page))

        def link(page: int) -> str:
            query = urllib.parse.urlencode({**req.query, "page": page, "per_page": per_page})
            return f"<{self.base}{req.path}?{query}>"

        rels = []
        if number < last:
            rels += [f'{link(number + 1)}; rel="next"', f'{link(last)}; rel="last"']
        if number > 1:
            rels += [f'{link(1)}; rel="first"', f'{link(min(number, last + 1) - 1)}; rel="prev"']
        headers = {"Link": ", ".join(rels)} if rels else {}
        return items[(number - 1) * per_page : number * per_page], headers

    def listing(self, req: Request, items: list[Any], **limits: int) -> Reply:
        chunk, headers = self.page(req, items, **limits)
        return Reply(200, chunk, headers)

    def blob_url(self, token: str, artifact: Artifact) -> str:
        """The signed storage URL of an artifact's archive for one download link."""
        name = urllib.parse.quote(artifact.name, safe="")
        return f"{self.blob_base}{BLOB_PREFIX}{token}/{name}.zip"

    # ----- git writes -----------------------------------------------------------------------
    def snapshot_of_tree(self, repo: Repo, sha: str) -> dict[str, str] | None:
        if sha in repo.trees:
            return repo.trees[sha]
        return next((c.files for c in repo.objects.values() if c.tree == sha), None)
