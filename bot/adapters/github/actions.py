"""GitHub Actions runs and artifacts over PyGithub, for the ``actions`` history source.

Three listings and one download, each what GitHub's REST API documents:

* ``workflow_runs``: ``GET /repos/{o}/{r}/actions/workflows/{workflow}/runs`` (100 a page),
  narrowed on the server by branch and ``created>=``; every page is read.
* ``artifacts_named``: ``GET /repos/{o}/{r}/actions/artifacts?name=…`` — the artifacts of
  that name across all runs in one paged listing (a glob lists every artifact and matches
  the names here), never one request per run.
* ``download_artifact``: ``GET …/artifacts/{id}/zip``, GitHub's 302 to the artifact
  storage followed without GitHub's credentials, streamed into memory with a
  byte cap: an archive over ``max_bytes`` (declared or streamed) raises
  ``ArtifactTooLarge`` once the cap is passed; 410 (expired) raises ``ArtifactExpired``.
  Nothing is written to disk.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

import requests
from github import GithubException
from github.PaginatedList import PaginatedList
from urllib3.exceptions import HTTPError as Urllib3Error

from bot.adapters.github.errors import (
    GitHubPermanentError,
    GitHubUnsafeInput,
    translate,
    translated,
)
from bot.adapters.github.support import Listed, RepoAccess, shown
from bot.core.models import as_utc

PAGE = 100  # GitHub's largest page for both listings
CHUNK = 64 * 1024  # bytes read from the download at a time
DOWNLOAD_TIMEOUT = 60.0  # seconds to connect to the artifact storage, and per read


class ArtifactExpired(GitHubPermanentError):
    """GitHub answered 410: the artifact is past its retention and gone."""


class ArtifactTooLarge(GitHubPermanentError):
    """The artifact's archive is larger than the byte cap (declared or while streaming)."""


@dataclass(frozen=True)
class WorkflowRun:
    """One run of a workflow as the runs listing gives it."""

    id: int
    created_at: datetime
    status: str  # queued, in_progress, completed, ...
    conclusion: str | None  # success, failure, cancelled, timed_out, ... (None: not done)
    event: str
    head_branch: str | None
    head_sha: str | None
    head_repo: str | None  # OWNER/NAME of the head repository (a fork's for a fork PR)
    name: str | None = None


@dataclass(frozen=True)
class Artifact:
    """One artifact as the artifacts listing gives it."""

    id: int
    name: str
    run_id: int | None
    size: int
    expired: bool
    head_branch: str | None
    head_repo_id: int | None
    created_at: datetime | None = None


def _when(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return as_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))


def _run(raw: dict[str, Any]) -> WorkflowRun:
    head_repo = raw.get("head_repository") or {}
    return WorkflowRun(
        id=int(raw["id"]),
        created_at=_when(raw["created_at"]) or as_utc(datetime.fromtimestamp(0)),
        status=str(raw.get("status") or ""),
        conclusion=raw.get("conclusion"),
        event=str(raw.get("event") or ""),
        head_branch=raw.get("head_branch"),
        head_sha=raw.get("head_sha"),
        head_repo=head_repo.get("full_name") if isinstance(head_repo, dict) else None,
        name=raw.get("display_title") or raw.get("name"),
    )


def _artifact(raw: dict[str, Any]) -> Artifact:
    run = raw.get("workflow_run") or {}
    return Artifact(
        id=int(raw["id"]),
        name=str(raw.get("name") or ""),
        run_id=int(run["id"]) if run.get("id") is not None else None,
        size=int(raw.get("size_in_bytes") or 0),
        expired=bool(raw.get("expired")),
        head_branch=run.get("head_branch"),
        head_repo_id=run.get("head_repository_id"),
        created_at=_when(raw.get("created_at")),
    )


def _workflow_segment(workflow: str) -> str:
    """A workflow id or file name as a path segment (``GitHubUnsafeInput`` for anything else)."""
    if workflow.isdigit() or (
        workflow.endswith((".yml", ".yaml")) and "/" not in workflow and ".." not in workflow
    ):
        return quote(workflow, safe="")
    raise GitHubUnsafeInput(f"refusing {shown(workflow)} as a workflow: give its file name or id")


class ActionsMixin(RepoAccess):
    """The Actions operations of ``GitHubClient``."""

    @translated
    def workflow_runs(
        self,
        repo: str,
        workflow: str,
        *,
        branch: str | None = None,
        created_since: datetime | None = None,
    ) -> list[WorkflowRun]:
        """Every run of ``workflow`` (file name or id), newest first, on ``branch`` and
        created at or after ``created_since`` when given (filters GitHub applies; the caller
        still checks each run)."""
        gh_repo = self._repo(repo)
        params: dict[str, Any] = {"per_page": PAGE}
        if branch:
            params["branch"] = branch
        if created_since is not None:
            params["created"] = ">=" + as_utc(created_since).strftime("%Y-%m-%dT%H:%M:%SZ")
        url = f"{gh_repo.url}/actions/workflows/{_workflow_segment(workflow)}/runs"
        listed = PaginatedList(Listed, gh_repo.requester, url, params, list_item="workflow_runs")
        return [_run(item.raw_data) for item in listed]

    @translated
    def workflow_run(self, repo: str, run_id: int) -> WorkflowRun | None:
        """One workflow run by id; None when GitHub no longer has it."""
        gh_repo = self._repo(repo)
        try:
            _, data = gh_repo.requester.requestJsonAndCheck(
                "GET", f"{gh_repo.url}/actions/runs/{int(run_id)}"
            )
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        return _run(data)

    @translated
    def artifacts_named(
        self, repo: str, name: str, *, older_than: datetime | None = None
    ) -> list[Artifact]:
        """The repository's artifacts named ``name`` (a glob: every artifact, matched here),
        newest first, across all runs, in one paged listing; with ``older_than``, paging
        stops after the first page reaching an artifact created before then."""
        gh_repo = self._repo(repo)
        glob = any(c in name for c in "*?[")
        params: dict[str, Any] = {"per_page": PAGE}
        if not glob:
            params["name"] = name
        url = f"{gh_repo.url}/actions/artifacts"
        listed = PaginatedList(Listed, gh_repo.requester, url, params, list_item="artifacts")
        found: list[Artifact] = []
        for item in listed:
            artifact = _artifact(item.raw_data)
            if fnmatch.fnmatchcase(artifact.name, name):
                found.append(artifact)
            if older_than and artifact.created_at and artifact.created_at < older_than:
                break  # newest first: the rest are older still
        return found

    def download_artifact(self, repo: str, artifact_id: int, max_bytes: int) -> bytes:
        """The artifact's zip archive, at most ``max_bytes`` (``ArtifactTooLarge`` past it,
        read no further); ``ArtifactExpired`` on 410; other failures as ``GitHubError``.

        GitHub answers the API request with a 302 to a signed URL on its artifact storage
        (another host: PyGithub's own redirect handling refuses it); that URL is fetched
        here without GitHub's credentials, streamed, within ``DOWNLOAD_TIMEOUT`` seconds
        per read."""
        gh_repo = self._repo(repo)
        url = f"{gh_repo.url}/actions/artifacts/{int(artifact_id)}/zip"
        try:
            status, headers, _ = gh_repo.requester.requestJson("GET", url)
            location = {k.lower(): v for k, v in headers.items()}.get("location")
            if status == 410:
                raise ArtifactExpired(f"artifact {artifact_id}: expired", 410)
            if status != 302 or not location or urlsplit(location).scheme not in ("http", "https"):
                raise GithubException(status, {"message": f"artifact {artifact_id}: no download"})
            with requests.get(location, stream=True, timeout=DOWNLOAD_TIMEOUT) as response:
                response.raise_for_status()
                return _capped(response, max_bytes, artifact_id)
        except (GithubException, requests.RequestException, Urllib3Error, OSError) as exc:
            raise translate(exc) from exc


def _capped(response: requests.Response, max_bytes: int, artifact_id: int) -> bytes:
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ArtifactTooLarge(
            f"artifact {artifact_id}: {int(declared):,} bytes, over {max_bytes:,}"
        )
    data = bytearray()
    for chunk in response.iter_content(chunk_size=CHUNK):
        data += chunk
        if len(data) > max_bytes:
            raise ArtifactTooLarge(f"artifact {artifact_id}: over {max_bytes:,} bytes")
    return bytes(data)
