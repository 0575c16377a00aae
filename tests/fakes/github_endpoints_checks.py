"""Check runs, with GitHub's all-or-nothing updates."""

from __future__ import annotations

from typing import Any

from tests.fakes.github_routes import (
    Api,
    ApiError,
    Reply,
    Request,
    now,
    parse_time,
    require,
    route,
)
from tests.fakes.github_state import (
    CheckRun,
    Repo,
)


# ----- check runs --------------------------------------------------------------------------
def _check_fields(body: dict[str, Any], run: CheckRun) -> None:
    """Apply a create/update request to ``run``. The length and count limits (actions <= 3,
    label <= 20, summary <= 65535, ...) are in GitHub's request schema, checked before this."""
    for key in ("name", "details_url", "external_id", "status"):
        if key in body:
            setattr(run, key, body[key])
    if "started_at" in body:
        run.started_at = parse_time(body["started_at"], "started_at")
    if body.get("conclusion") is not None:
        run.conclusion, run.status = body["conclusion"], "completed"
    if run.status == "completed":
        if run.conclusion is None:
            raise ApiError(422, "Invalid request.\n\nconclusion wasn't supplied.")
        run.completed_at = (
            parse_time(body["completed_at"], "completed_at")
            if "completed_at" in body
            else run.completed_at or now()
        )
    if "output" in body:
        run.output = dict(body["output"] or {})
    if "actions" in body:
        run.actions = [dict(action) for action in body["actions"] or []]


@route("POST", "/repos/{owner}/{repo}/check-runs")
def create_check_run(api: Api, req: Request) -> Reply:
    repo = api.repo(req, write=True)
    body = require(req.body, "name", "head_sha")
    sha = repo.resolve(str(body["head_sha"]))
    if sha is None or sha != body["head_sha"]:
        raise ApiError(422, f"No commit found for SHA: {body['head_sha']}")
    run = CheckRun(api.state.next_id(), sha, "", "queued", None, now(), None)
    _check_fields(body, run)
    repo.check_runs_by_id[run.id] = run
    return Reply(201, api.shapes.check_run(repo, run))


def _check_run(repo: Repo, req: Request) -> CheckRun:
    run = repo.check_runs_by_id.get(int(req.params["check_run_id"]))
    if run is None:
        raise ApiError(404, "Not Found")
    return run


@route("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}")
def get_check_run(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    return Reply(200, api.shapes.check_run(repo, _check_run(repo, req)))


@route("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}")
def update_check_run(api: Api, req: Request) -> Reply:
    repo = api.repo(req, write=True)
    run = _check_run(repo, req)
    draft = CheckRun(**vars(run))
    _check_fields(require(req.body), draft)  # all-or-nothing, as GitHub
    vars(run).update(vars(draft))
    return Reply(200, api.shapes.check_run(repo, run))


@route("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs")
def list_check_runs(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    sha = api.sha(repo, req.params["ref"])
    runs = [
        r
        for r in sorted(repo.check_runs(sha), key=lambda r: r.id, reverse=True)
        if req.query.get("check_name", r.name) == r.name
        and req.query.get("status", r.status) == r.status
    ]
    if req.query.get("filter", "latest") == "latest":
        latest: dict[str, CheckRun] = {}
        for run in runs:
            latest.setdefault(run.name, run)
        runs = list(latest.values())
    chunk, headers = api.page(req, runs)
    body = {"total_count": len(runs), "check_runs": [api.shapes.check_run(repo, r) for r in chunk]}
    return Reply(200, body, headers)
