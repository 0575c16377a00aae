"""Issues (listed with the pull requests, as GitHub does), and opening and editing pull
requests: what the App writes when it opens items of its own.

Writes need the installation's ``issues`` (or ``pull_requests``) permission: without it
(``FakeGitHub.deny``) GitHub answers 403 "Resource not accessible by integration".
"""

from __future__ import annotations

from typing import Any

from tests.fakes.github_routes import Api, ApiError, Reply, Request, require, route
from tests.fakes.github_state import Issue, PullRequest, Repo

TITLE_LIMIT = 256
BODY_LIMIT = 65536
STATES = ("open", "closed")


def _invalid(resource: str, field: str, value: Any = None, code: str = "invalid") -> ApiError:
    error: dict[str, Any] = {"resource": resource, "field": field, "code": code}
    if value is not None:
        error["value"] = value
    return ApiError(422, "Validation Failed", [error])


def _custom(resource: str, message: str) -> ApiError:
    return ApiError(
        422, "Validation Failed", [{"resource": resource, "code": "custom", "message": message}]
    )


def _text(body: dict[str, Any], key: str, resource: str, limit: int) -> str | None:
    """``body[key]`` as text within GitHub's length limit; None when absent."""
    value = body.get(key)
    if value is None:
        return None
    text = str(value)
    if len(text) > limit:
        raise _custom(resource, f"{key.capitalize()} is too long (maximum is {limit} characters)")
    return text


def _labels(repo: Repo, body: dict[str, Any]) -> list[str] | None:
    """The labels asked for (names or ``{name}`` objects), created when new; None: absent."""
    if body.get("labels") is None:
        return None
    names = [str(v.get("name") if isinstance(v, dict) else v) for v in body["labels"]]
    return [repo.label(name) for name in dict.fromkeys(names)]


def _assignees(repo: Repo, body: dict[str, Any], resource: str) -> list[str] | None:
    """The assignees asked for; 422 for a login that may not be assigned; None: absent."""
    logins = body.get("assignees")
    if logins is None and body.get("assignee"):
        logins = [body["assignee"]]
    if logins is None:
        return None
    for login in logins:
        if not repo.assignable(str(login)):
            raise _invalid(resource, "assignees", login)
    return [str(login) for login in dict.fromkeys(logins)]


# ----- issues ------------------------------------------------------------------------------
@route("GET", "/repos/{owner}/{repo}/issues")
def list_issues(api: Api, req: Request) -> Reply:
    """Issues and PRs; filters ``state``, ``creator``, ``assignee``, ``labels``; ``sort``
    by ``created`` / ``updated`` / ``comments``, ``direction`` (default newest first)."""
    repo = api.repo(req)
    q = req.query
    state = q.get("state", "open")
    wanted = {name.strip().lower() for name in q.get("labels", "").split(",") if name.strip()}
    items: list[PullRequest | Issue] = [*repo.pulls.values(), *repo.issues.values()]

    def keep(item: PullRequest | Issue) -> bool:
        assignee = q.get("assignee")
        return (
            state in ("all", item.state)
            and q.get("creator", item.user).lower() == item.user.lower()
            and wanted <= {name.lower() for name in item.labels}
            and (
                assignee is None
                or (assignee == "none" and not item.assignees)
                or (assignee == "*" and bool(item.assignees))
                or assignee in item.assignees
            )
        )

    sort = q.get("sort", "created")

    def key(item: PullRequest | Issue) -> tuple[Any, int]:
        if sort == "comments":
            return len(repo.comments(item.number)), item.number
        if sort == "updated":
            return item.updated_at or item.closed_at or item.created_at, item.number
        return item.created_at, item.number

    ordered = sorted(filter(keep, items), key=key, reverse=q.get("direction", "desc") == "desc")
    chunk, headers = api.page(req, ordered)
    return Reply(200, [api.shapes.issue(repo, item) for item in chunk], headers)


@route("POST", "/repos/{owner}/{repo}/issues")
def create_issue(api: Api, req: Request) -> Reply:
    repo = api.repo(req, write=True)
    api.allow(req, "issues")
    body = require(req.body, "title")
    title = _text(body, "title", "Issue", TITLE_LIMIT) or ""
    if not title.strip():
        raise _invalid("Issue", "title", code="missing_field")
    text = _text(body, "body", "Issue", BODY_LIMIT) or ""
    assignees = _assignees(repo, body, "Issue") or []
    now = api.state.tick()
    issue = Issue(
        repo.next_number(),
        api.state.next_id(),
        title,
        text,
        api.state.bot_login,  # written with an installation token: by the App's bot user
        now,
        now,
        labels=_labels(repo, body) or [],
        assignees=assignees,
        app_id=api.state.app_id,
    )
    repo.issues[issue.number] = issue
    url = f"{api.base}/repos/{repo.full_name}/issues/{issue.number}"
    return Reply(201, api.shapes.issue(repo, issue), {"Location": url})


@route("GET", "/repos/{owner}/{repo}/issues/{issue_number}")
def get_issue(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    return Reply(200, api.shapes.issue(repo, api.item(repo, req)))


def _set_state(api: Api, item: PullRequest | Issue, state: str, reason: Any) -> None:
    if state not in STATES:
        raise _invalid("Issue", "state", state)
    if state == item.state:
        return
    if isinstance(item, PullRequest) and item.merged:
        raise _custom("PullRequest", "state cannot be changed. The pull request is merged.")
    item.state = state
    item.closed_at = api.state.tick() if state == "closed" else None
    if isinstance(item, Issue):
        default = "completed" if state == "closed" else "reopened"
        item.state_reason = str(reason) if reason else default


@route("PATCH", "/repos/{owner}/{repo}/issues/{issue_number}")
def update_issue(api: Api, req: Request) -> Reply:
    """Title, body, state (and ``state_reason``), labels, assignees; on a PR number the
    PR's own fields."""
    repo = api.repo(req, write=True)
    item = api.item(repo, req)
    api.allow(req, "pull_requests" if isinstance(item, PullRequest) else "issues")
    body = require(req.body)
    title = _text(body, "title", "Issue", TITLE_LIMIT)
    text = _text(body, "body", "Issue", BODY_LIMIT)
    labels = _labels(repo, body)
    assignees = _assignees(repo, body, "Issue")
    if "state" in body:
        _set_state(api, item, str(body["state"]), body.get("state_reason"))
    item.title = item.title if title is None else title
    item.body = item.body if text is None else text
    item.labels = item.labels if labels is None else labels
    item.assignees = item.assignees if assignees is None else assignees
    item.updated_at = api.state.tick()
    return Reply(200, api.shapes.issue(repo, item))


# ----- writing pull requests ---------------------------------------------------------------
@route("POST", "/repos/{owner}/{repo}/pulls")
def create_pull(api: Api, req: Request) -> Reply:
    """A PR from ``head`` (``branch`` of this repository, or ``owner:branch`` of a fork)
    into ``base``; one open PR per head and base, as GitHub allows."""
    repo = api.repo(req, write=True)
    api.allow(req, "pull_requests")
    body = require(req.body, "head", "base")
    owner, _, branch = str(body["head"]).rpartition(":")
    head_repo = repo if owner in ("", repo.owner) else api.state.repos.get(f"{owner}/{repo.name}")
    base = str(body["base"])
    if head_repo is None or branch not in head_repo.branches:
        raise _invalid("PullRequest", "head")
    if base not in repo.branches:
        raise _invalid("PullRequest", "base")
    for pr in repo.pulls.values():
        same = pr.head_repo is head_repo and (pr.head_ref, pr.base_ref) == (branch, base)
        if same and pr.state == "open":
            raise _custom(
                "PullRequest", f"A pull request already exists for {head_repo.owner}:{branch}."
            )
    if head_repo.branches[branch] in repo.ancestors(repo.branches[base]):
        raise _custom("PullRequest", f"No commits between {base} and {branch}")
    title = _text(body, "title", "PullRequest", TITLE_LIMIT)
    if not title:
        raise _invalid("PullRequest", "title", code="missing_field")
    pr = PullRequest(
        number=repo.next_number(),
        id=api.state.next_id(),
        title=title,
        body=_text(body, "body", "PullRequest", BODY_LIMIT) or "",
        user=api.state.bot_login,
        repo=repo,
        head_repo=head_repo,
        head_ref=branch,
        base_ref=base,
        maintainer_can_modify=bool(body.get("maintainer_can_modify", False)),
        draft=bool(body.get("draft", False)),
        created_at=api.state.tick(),
        app_id=api.state.app_id,
    )
    repo.pulls[pr.number] = pr
    url = f"{api.base}/repos/{repo.full_name}/pulls/{pr.number}"
    return Reply(201, api.shapes.pull_request(pr), {"Location": url})


@route("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}")
def update_pull(api: Api, req: Request) -> Reply:
    repo = api.repo(req, write=True)
    api.allow(req, "pull_requests")
    pr = api.pull(repo, req)
    body = require(req.body)
    title = _text(body, "title", "PullRequest", TITLE_LIMIT)
    text = _text(body, "body", "PullRequest", BODY_LIMIT)
    if "state" in body:
        _set_state(api, pr, str(body["state"]), None)
    if "maintainer_can_modify" in body:
        pr.maintainer_can_modify = bool(body["maintainer_can_modify"])
    pr.title = pr.title if title is None else title
    pr.body = pr.body if text is None else text
    pr.updated_at = api.state.tick()
    return Reply(200, api.shapes.pull_request(pr))
