"""The App, repositories, pull requests, reviews, issue comments and reactions."""

from __future__ import annotations

import secrets

from tests.fakes.github_routes import (
    NOT_ACCESSIBLE,
    Api,
    ApiError,
    Reply,
    Request,
    now,
    require,
    route,
)
from tests.fakes.github_state import (
    IssueComment,
    PullRequest,
    Reaction,
    Repo,
    Review,
    ReviewComment,
)

REACTIONS = {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}
REVIEW_EVENTS = {
    "APPROVE": "APPROVED",
    "REQUEST_CHANGES": "CHANGES_REQUESTED",
    "COMMENT": "COMMENTED",
}


# ----- the App ---------------------------------------------------------------------------------
@route("GET", "/app", auth="jwt")
def get_app(api: Api, req: Request) -> Reply:
    return Reply(200, api.shapes.app())


@route("POST", "/app/installations/{installation_id}/access_tokens", auth="jwt")
def create_token(api: Api, req: Request) -> Reply:
    installation = int(req.params["installation_id"])
    if installation not in api.state.installations():
        raise ApiError(404, "Not Found")
    token = "ghs_" + secrets.token_hex(18)
    expires = now() + api.state.token_lifetime
    api.state.tokens[token] = (installation, expires)
    return Reply(201, api.shapes.installation_token(token, expires))


@route("GET", "/app/installations/{installation_id}", auth="jwt")
def get_installation(api: Api, req: Request) -> Reply:
    installation = int(req.params["installation_id"])
    owners = [r.owner for r in api.state.repos.values() if r.installation_id == installation]
    if not owners:
        raise ApiError(404, "Not Found")
    return Reply(200, api.shapes.installation(installation, owners[0]))


@route("GET", "/repos/{owner}/{repo}/installation", auth="jwt")
def get_repo_installation(api: Api, req: Request) -> Reply:
    repo = api.state.repos.get(f"{req.params['owner']}/{req.params['repo']}")
    if repo is None or repo.installation_id is None:
        raise ApiError(404, "Not Found")
    return Reply(200, api.shapes.installation(repo.installation_id, repo.owner))


@route("GET", "/installation/repositories")
def list_installation_repos(api: Api, req: Request) -> Reply:
    repos = [r for r in api.state.repos.values() if r.installation_id == req.installation]
    chunk, headers = api.page(req, sorted(repos, key=lambda r: r.id))
    return Reply(200, api.shapes.installation_repositories(chunk, len(repos)), headers)


# ----- repositories, users and permissions ------------------------------------------------
@route("GET", "/repos/{owner}/{repo}")
def get_repo(api: Api, req: Request) -> Reply:
    return Reply(200, api.shapes.full_repository(api.repo(req)))


@route("GET", "/users/{username}")
def get_user(api: Api, req: Request) -> Reply:
    return Reply(200, api.shapes.public_user(req.params["username"]))


@route("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission")
def get_permission(api: Api, req: Request) -> Reply:
    return Reply(200, api.shapes.permission(api.repo(req), req.params["username"]))


# ----- pull requests -----------------------------------------------------------------------
@route("GET", "/repos/{owner}/{repo}/pulls")
def list_pulls(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    state = req.query.get("state", "open")
    pulls = [
        pr
        for pr in sorted(repo.pulls.values(), key=lambda p: p.number, reverse=True)
        if state in ("all", pr.state)
        and req.query.get("base", pr.base_ref) == pr.base_ref
        and req.query.get("head", f"{pr.head_repo.owner}:{pr.head_ref}")
        == f"{pr.head_repo.owner}:{pr.head_ref}"
    ]
    chunk, headers = api.page(req, pulls)
    return Reply(200, [api.shapes.pull_request_simple(pr) for pr in chunk], headers)


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}")
def get_pull(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    return Reply(200, api.shapes.pull_request(api.pull(repo, req)))


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/files")
def list_pull_files(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    pr = api.pull(repo, req)
    chunk, headers = api.page(req, repo.pr_files(pr))
    body = [api.shapes.diff_entry(repo, pr.head_sha, change) for change in chunk]
    return Reply(200, body, headers)


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/commits")
def list_pull_commits(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    chunk, headers = api.page(req, repo.pr_commits(api.pull(repo, req)))
    return Reply(200, [api.shapes.commit(repo, c) for c in chunk], headers)


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews")
def list_reviews(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    pr = api.pull(repo, req)
    chunk, headers = api.page(req, repo.reviews(pr.number))
    return Reply(200, [api.shapes.review(pr, r) for r in chunk], headers)


@route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/comments")
def list_review_comments(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    pr = api.pull(repo, req)
    comments = [c for r in repo.reviews(pr.number) for c in r.comments]
    chunk, headers = api.page(req, comments)
    return Reply(200, [api.shapes.review_comment(pr, c) for c in chunk], headers)


@route("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews")
def create_review(api: Api, req: Request) -> Reply:
    repo = api.repo(req, write=True)
    pr = api.pull(repo, req)
    body = require(req.body)
    event = body.get("event")
    if event is not None and event not in REVIEW_EVENTS:
        raise ApiError(422, "Unprocessable Entity", [f"Invalid event: {event}"])
    text = body.get("body") or ""
    if event == "REQUEST_CHANGES" and not text:
        raise ApiError(422, "Unprocessable Entity", ["Body is required for REQUEST_CHANGES"])
    commit_id = body.get("commit_id") or pr.head_sha
    if commit_id not in repo.objects:
        raise ApiError(422, "Unprocessable Entity", ["Commit is not part of the pull request"])
    files = {c.path: c for c in repo.pr_files(pr)}
    review = Review(
        id=api.state.next_id(),
        pr_number=pr.number,
        user=api.state.bot_login,
        body=text,
        state=REVIEW_EVENTS.get(event or "", "PENDING"),
        commit_id=commit_id,
        submitted_at=api.state.tick(),
    )
    for item in body.get("comments") or []:
        path, line = item.get("path"), item.get("line", item.get("position"))
        if path not in files or files[path].text is None:
            raise ApiError(422, "Unprocessable Entity", ["Path could not be resolved"])
        length = len((files[path].text or "").splitlines())
        start = item.get("start_line")
        if not isinstance(line, int) or not 1 <= line <= length or (start and start > line):
            raise ApiError(422, "Unprocessable Entity", ["Line could not be resolved"])
        review.comments.append(
            ReviewComment(
                id=api.state.next_id(),
                review_id=review.id,
                path=path,
                body=str(item.get("body", "")),
                line=line,
                start_line=start,
                side=item.get("side", "RIGHT"),
                commit_id=commit_id,
                user=review.user,
                created_at=review.submitted_at,
            )
        )
    repo.reviews_by_id[review.id] = review
    return Reply(200, api.shapes.review(pr, review))


# ----- issues and comments -----------------------------------------------------------------
def _comment(repo: Repo, req: Request) -> IssueComment:
    comment = repo.issue_comments.get(int(req.params["comment_id"]))
    if comment is None:
        raise ApiError(404, "Not Found")
    return comment


def _comment_body(req: Request) -> str:
    body = require(req.body, "body")["body"]
    if not isinstance(body, str) or not body:
        raise ApiError(
            422,
            "Validation Failed",
            [{"resource": "IssueComment", "code": "missing_field", "field": "body"}],
        )
    if len(body) > 65536:
        raise ApiError(
            422,
            "Validation Failed",
            [
                {
                    "resource": "IssueComment",
                    "code": "custom",
                    "field": "body",
                    "message": "Body is too long (maximum is 65536 characters)",
                }
            ],
        )
    return body


@route("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments")
def list_comments(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    issue = api.item(repo, req)
    chunk, headers = api.page(req, repo.comments(issue.number))
    return Reply(200, [api.shapes.issue_comment(repo, c) for c in chunk], headers)


@route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments")
def create_comment(api: Api, req: Request) -> Reply:
    repo = api.repo(req, write=True)
    issue = api.item(repo, req)
    api.allow(req, "pull_requests" if isinstance(issue, PullRequest) else "issues")
    now = api.state.tick()
    comment = IssueComment(
        api.state.next_id(),
        issue.number,
        api.state.bot_login,
        _comment_body(req),
        now,
        now,
        app_id=api.state.app_id,  # written with an installation token: by the App
    )
    repo.issue_comments[comment.id] = comment
    return Reply(201, api.shapes.issue_comment(repo, comment))


@route("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}")
def get_comment(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    return Reply(200, api.shapes.issue_comment(repo, _comment(repo, req)))


@route("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}")
def update_comment(api: Api, req: Request) -> Reply:
    repo = api.repo(req, write=True)
    comment = _comment(repo, req)
    if comment.user != api.state.bot_login:
        raise ApiError(403, NOT_ACCESSIBLE)
    comment.body = _comment_body(req)
    comment.updated_at = api.state.tick()
    return Reply(200, api.shapes.issue_comment(repo, comment))


@route("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions")
def create_reaction(api: Api, req: Request) -> Reply:
    repo = api.repo(req, write=True)
    comment = _comment(repo, req)
    content = require(req.body, "content")["content"]
    if content not in REACTIONS:
        raise ApiError(
            422,
            "Validation Failed",
            [{"resource": "Reaction", "code": "invalid", "field": "content"}],
        )
    for reaction in comment.reactions:
        if reaction.user == api.state.bot_login and reaction.content == content:
            return Reply(200, api.shapes.reaction(reaction))
    reaction = Reaction(api.state.next_id(), api.state.bot_login, content, api.state.tick())
    comment.reactions.append(reaction)
    return Reply(201, api.shapes.reaction(reaction))
