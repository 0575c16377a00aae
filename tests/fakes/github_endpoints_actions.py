"""GitHub Actions: workflows, their runs, and the runs' artifacts, as GitHub serves them.

Runs and artifacts are listed newest first and paged like the fake's other lists. A run
listing filtered by ``actor``, ``branch``, ``check_suite_id``, ``created``, ``event``,
``head_sha`` or ``status`` returns at most ``FILTERED_RESULTS`` runs, as GitHub documents. An
artifact's download answers 302 with a signed URL on the artifact storage host
(``FakeGitHub.blob_url``), valid ``BLOB_LINK_SECONDS``; 410 once the artifact expired.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from tests.fakes.github_routes import Api, ApiError, Reply, Request, now, parse_time, route
from tests.fakes.github_state import Artifact, Repo, Workflow, WorkflowRun

FILTERED_RESULTS = 1000
BLOB_LINK_SECONDS = 60
RUN_STATUSES = ("queued", "in_progress", "completed", "requested", "waiting", "pending")
_FILTERS = ("actor", "branch", "check_suite_id", "created", "event", "head_sha", "status")


def _workflow(repo: Repo, req: Request) -> Workflow:
    workflow = repo.workflow(req.params["workflow_id"])
    if workflow is None:
        raise ApiError(404, "Not Found")
    return workflow


def _created_filter(value: str) -> tuple[datetime | None, datetime | None, bool, bool]:
    """GitHub's date qualifier (``>=D``, ``>D``, ``<=D``, ``<D``, ``D..D``, ``D``) as
    (lower, upper, lower inclusive, upper inclusive)."""

    def day(text: str, end: bool) -> datetime:
        moment = parse_time(text if "T" in text else f"{text}T00:00:00Z", "created")
        return (
            moment + timedelta(days=1) - timedelta(seconds=1) if end and "T" not in text else moment
        )

    if ".." in value:
        low, high = value.split("..", 1)
        return (
            None if low in ("", "*") else day(low, False),
            None if high in ("", "*") else day(high, True),
            True,
            True,
        )
    for prefix, lower, inclusive in ((">=", True, True), ("<=", False, True), (">", True, False)):
        if value.startswith(prefix):
            moment = day(value[len(prefix) :], not lower if inclusive else True)
            return (moment, None, inclusive, True) if lower else (None, moment, True, inclusive)
    if value.startswith("<"):
        return None, day(value[1:], False), True, False
    return day(value, False), day(value, True), True, True


def _runs(api: Api, repo: Repo, req: Request, workflow: Workflow | None) -> Reply:
    query = req.query
    runs = sorted(repo.workflow_runs.values(), key=lambda r: (r.created_at, r.id), reverse=True)
    runs = [r for r in runs if workflow is None or r.workflow is workflow]
    if "branch" in query:
        runs = [r for r in runs if r.head_branch == query["branch"]]
    if "event" in query:
        runs = [r for r in runs if r.event == query["event"]]
    if "actor" in query:
        runs = [r for r in runs if r.actor == query["actor"]]
    if "head_sha" in query:
        runs = [r for r in runs if r.head_sha == query["head_sha"]]
    if "status" in query:  # a status or a conclusion
        wanted = query["status"]
        field = "status" if wanted in RUN_STATUSES else "conclusion"
        runs = [r for r in runs if getattr(r, field) == wanted]
    if "created" in query:
        low, high, low_in, high_in = _created_filter(query["created"])
        runs = [
            r
            for r in runs
            if (low is None or r.created_at > low or (low_in and r.created_at == low))
            and (high is None or r.created_at < high or (high_in and r.created_at == high))
        ]
    if any(name in query for name in _FILTERS):
        runs = runs[:FILTERED_RESULTS]
    pulls = query.get("exclude_pull_requests", "false").lower() != "true"
    chunk, headers = api.page(req, runs)
    body = {
        "total_count": len(runs),
        "workflow_runs": [api.shapes.workflow_run(repo, r, pulls=pulls) for r in chunk],
    }
    return Reply(200, body, headers)


@route("GET", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}")
def get_workflow(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    return Reply(200, api.shapes.workflow(repo, _workflow(repo, req)))


@route("GET", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs")
def list_workflow_runs(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    return _runs(api, repo, req, _workflow(repo, req))


@route("GET", "/repos/{owner}/{repo}/actions/runs")
def list_repository_runs(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    return _runs(api, repo, req, None)


def _run(repo: Repo, req: Request) -> WorkflowRun:
    run = repo.workflow_runs.get(int(req.params["run_id"]))
    if run is None:
        raise ApiError(404, "Not Found")
    return run


@route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}")
def get_workflow_run(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    pulls = req.query.get("exclude_pull_requests", "false").lower() != "true"
    return Reply(200, api.shapes.workflow_run(repo, _run(repo, req), pulls=pulls))


def _artifacts(api: Api, req: Request, repo: Repo, found: list[Artifact]) -> Reply:
    if "name" in req.query:
        found = [a for a in found if a.name == req.query["name"]]
    found = sorted(found, key=lambda a: (a.created_at, a.id), reverse=True)
    chunk, headers = api.page(req, found)
    body = {"total_count": len(found), "artifacts": [api.shapes.artifact(repo, a) for a in chunk]}
    return Reply(200, body, headers)


@route("GET", "/repos/{owner}/{repo}/actions/artifacts")
def list_artifacts(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    return _artifacts(api, req, repo, list(repo.artifacts.values()))


@route("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts")
def list_run_artifacts(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    run = _run(repo, req)
    return _artifacts(api, req, repo, [a for a in repo.artifacts.values() if a.run is run])


def _artifact(repo: Repo, req: Request) -> Artifact:
    artifact = repo.artifacts.get(int(req.params["artifact_id"]))
    if artifact is None:
        raise ApiError(404, "Not Found")
    return artifact


@route("GET", "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}")
def get_artifact(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    return Reply(200, api.shapes.artifact(repo, _artifact(repo, req)))


@route("GET", "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}")
def download_artifact(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    artifact = _artifact(repo, req)
    if req.params["archive_format"] != "zip":
        raise ApiError(404, "Not Found")
    if artifact.expired:
        raise ApiError(410, "Artifact has expired")
    token = secrets.token_urlsafe(16)
    api.state.blob_links[token] = (artifact, now() + timedelta(seconds=BLOB_LINK_SECONDS))
    return Reply(302, None, {"Location": api.blob_url(token, artifact)})
