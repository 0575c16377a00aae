"""Contents, commits, comparisons and the git data API (refs, blobs, trees, commits)."""

from __future__ import annotations

import base64
import binascii
import re

from tests.fakes.github_routes import (
    Api,
    ApiError,
    Reply,
    Request,
    require,
    route,
)
from tests.fakes.github_state import (
    Commit,
    blob_sha,
    diff_snapshots,
    tree_sha,
)

# ----- contents ----------------------------------------------------------------------------
CONTENTS_LIMIT = 1024 * 1024  # larger files only in the raw and object media types
TOO_LARGE = (
    "This API returns blobs up to 1 MB in size. The requested blob is too large to fetch via "
    "the API, but you can use the Git Data API to request blobs up to 100 MB in size."
)
RAW = "application/vnd.github.raw"
OBJECT = "application/vnd.github.object"


def _media(accept: str) -> str:
    """The custom media type asked for in ``accept`` (``RAW``, ``OBJECT``), else JSON."""
    for part in accept.split(","):
        name = part.split(";")[0].strip().removesuffix("+json").replace(".v3.", ".")
        if name in (RAW, OBJECT):
            return name
    return "application/json"


@route("GET", "/repos/{owner}/{repo}/contents/{path}")
def get_contents(api: Api, req: Request) -> Reply:
    """A file or directory at ``ref``, as GitHub answers for the media type asked: a file over
    1 MB is refused (403 ``too_large``) in JSON, sent without content in ``object`` (``content``
    empty, ``encoding`` ``none``), and as it is in ``raw``."""
    repo = api.repo(req)
    ref = req.query.get("ref") or repo.default_branch
    sha = repo.resolve(ref)
    if sha is None:
        raise ApiError(404, f"No commit found for the ref {ref}")
    path = req.params["path"].strip("/")
    files = repo.objects[sha].files
    media = _media(req.accept)
    if path in files:
        text = files[path]
        if media == RAW:
            return Reply(200, text.encode(), media=RAW)
        large = len(text.encode()) > CONTENTS_LIMIT
        if large and media != OBJECT:
            raise ApiError(
                403, TOO_LARGE, [{"resource": "Blob", "field": "data", "code": "too_large"}]
            )
        body = api.shapes.content_file(repo, ref, path, text)
        if large:
            body.update(content="", encoding="none")
        return Reply(200, body, media=media)
    listing = api.shapes.directory(repo, ref, path, files)
    if not listing:
        raise ApiError(404, "Not Found")
    if media == OBJECT:
        return Reply(200, api.shapes.directory_object(repo, ref, path, files), media=OBJECT)
    return Reply(200, listing)


@route("PUT", "/repos/{owner}/{repo}/contents/{path}")
def put_contents(api: Api, req: Request) -> Reply:
    body = require(req.body, "message", "content")
    repo = api.repo(req)
    branch = body.get("branch") or repo.default_branch
    repo = api.pushable(req, branch)
    if branch not in repo.branches:
        raise ApiError(404, f"Branch {branch} not found")
    try:
        text = base64.b64decode(str(body["content"]), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ApiError(422, "content is not valid Base64") from None
    path = req.params["path"].strip("/")
    current = repo.objects[repo.branches[branch]].files.get(path)
    given = body.get("sha")
    if current is not None and given is None:
        raise ApiError(422, 'Invalid request.\n\n"sha" wasn\'t supplied.')
    if given is not None and (current is None or given != blob_sha(current)):
        raise ApiError(409, f"{path} does not match {given}")
    author = (body.get("committer") or body.get("author") or {}).get("name", api.state.bot_login)
    repo.commit(branch, {path: text}, message=str(body["message"]), author=author)
    commit = repo.objects[repo.branches[branch]]
    return Reply(
        201 if current is None else 200, api.shapes.file_commit(repo, branch, path, commit)
    )


# ----- commits, comparisons, git data ------------------------------------------------------
@route("GET", "/repos/{owner}/{repo}/commits/{ref}")
def get_commit(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    commit = repo.objects[api.sha(repo, req.params["ref"])]
    parent = repo.objects[commit.parents[0]].files if commit.parents else {}
    changes, headers = api.page(req, diff_snapshots(parent, commit.files), 300, 300)
    return Reply(200, api.shapes.commit(repo, commit, changes), headers)


@route("GET", "/repos/{owner}/{repo}/commits/{commit_sha}/pulls")
def list_commit_pulls(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    sha = api.sha(repo, req.params["commit_sha"])
    chunk, headers = api.page(req, repo.pulls_for_commit(sha))
    return Reply(200, [api.shapes.pull_request_simple(pr) for pr in chunk], headers)


@route("GET", "/repos/{owner}/{repo}/compare/{basehead}")
def compare(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    parts = re.split(r"\.\.\.?", req.params["basehead"], maxsplit=1)
    if len(parts) != 2:
        raise ApiError(404, "Not Found")
    base, head = (repo.objects[api.sha(repo, ref)] for ref in parts)
    ancestor = repo.merge_base(base.sha, head.sha)
    merge_base = repo.objects[ancestor] if ancestor else None
    commits = repo.commits_between(base.sha, head.sha)
    behind = len(repo.commits_between(head.sha, base.sha))
    chunk, headers = api.page(req, commits, 250, 1000)
    old = merge_base.files if merge_base else {}
    changes = diff_snapshots(old, head.files)
    body = api.shapes.comparison(repo, base, head, merge_base, chunk, len(commits), behind, changes)
    return Reply(200, body, headers)


@route("GET", "/repos/{owner}/{repo}/git/ref/{ref}")
def get_ref(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    ref = req.params["ref"]
    branch = ref.removeprefix("heads/")
    if not ref.startswith("heads/") or branch not in repo.branches:
        raise ApiError(404, "Not Found")
    return Reply(200, api.shapes.git_ref(repo, branch))


@route("POST", "/repos/{owner}/{repo}/git/refs")
def create_ref(api: Api, req: Request) -> Reply:
    body = require(req.body, "ref", "sha")
    branch = str(body["ref"]).removeprefix("refs/heads/")
    repo = api.pushable(req, branch)
    if branch in repo.branches:
        raise ApiError(422, "Reference already exists")
    repo.branches[branch] = api.sha(repo, str(body["sha"]))
    return Reply(201, api.shapes.git_ref(repo, branch))


@route("PATCH", "/repos/{owner}/{repo}/git/refs/{ref}")
def update_ref(api: Api, req: Request) -> Reply:
    body = require(req.body, "sha")
    branch = req.params["ref"].removeprefix("heads/")
    repo = api.pushable(req, branch)
    if branch not in repo.branches:
        raise ApiError(422, "Reference does not exist")
    new = str(body["sha"])
    if new not in repo.objects:
        raise ApiError(422, "Object does not exist")
    if not body.get("force") and repo.branches[branch] not in repo.ancestors(new):
        raise ApiError(422, "Update is not a fast forward")
    repo.branches[branch] = new
    return Reply(200, api.shapes.git_ref(repo, branch))


@route("GET", "/repos/{owner}/{repo}/git/blobs/{file_sha}")
def get_blob(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    text = repo.blob(req.params["file_sha"])
    if text is None:
        raise ApiError(404, "Not Found")
    return Reply(200, api.shapes.blob(repo, text))


@route("POST", "/repos/{owner}/{repo}/git/blobs")
def create_blob(api: Api, req: Request) -> Reply:
    body = require(req.body, "content")
    repo = api.repo(req)
    content = str(body["content"])
    if body.get("encoding", "utf-8") == "base64":
        content = base64.b64decode(content).decode()
    sha = blob_sha(content)
    repo.blobs[sha] = content
    return Reply(201, api.shapes.short_blob(repo, sha))


@route("POST", "/repos/{owner}/{repo}/git/trees")
def create_tree(api: Api, req: Request) -> Reply:
    body = require(req.body, "tree")
    repo = api.repo(req)
    files: dict[str, str] = {}
    if body.get("base_tree"):
        base = api.snapshot_of_tree(repo, str(body["base_tree"]))
        if base is None:
            raise ApiError(422, "Invalid tree info", ["base_tree is not a valid tree"])
        files = dict(base)
    for entry in body["tree"]:
        path = entry.get("path")
        if "content" in entry:
            files[path] = str(entry["content"])
        elif entry.get("sha") is None:
            files.pop(path, None)
        elif entry["sha"] in repo.blobs:
            files[path] = repo.blobs[entry["sha"]]
        else:
            raise ApiError(
                422, "Invalid tree info", [f"tree.sha {entry['sha']} is not a valid blob"]
            )
    sha = tree_sha(files)
    repo.trees[sha] = files
    return Reply(201, api.shapes.git_tree(repo, sha, files))


@route("POST", "/repos/{owner}/{repo}/git/commits")
def create_git_commit(api: Api, req: Request) -> Reply:
    body = require(req.body, "message", "tree")
    repo = api.repo(req)
    files = api.snapshot_of_tree(repo, str(body["tree"]))
    if files is None:
        raise ApiError(422, "Tree SHA does not exist")
    parents = [str(p) for p in body.get("parents", [])]
    if any(p not in repo.objects for p in parents):
        raise ApiError(422, "Parent SHA does not exist or is not a commit object")
    author = (body.get("author") or {}).get("name", api.state.bot_login)
    commit = repo.add_commit(parents, dict(files), str(body["message"]), author)
    return Reply(201, api.shapes.git_commit(repo, commit))


@route("GET", "/repos/{owner}/{repo}/git/trees/{tree_sha}")
def get_tree(api: Api, req: Request) -> Reply:
    """A tree by its sha, or the tree of a commit (a tree-ish, as git reads it): the top
    level, or every entry with ``recursive`` (any value but absent / empty, as GitHub)."""
    repo = api.repo(req)
    sha = req.params["tree_sha"]
    commit = repo.objects.get(sha.lower())
    files = commit.files if commit is not None else api.snapshot_of_tree(repo, sha)
    if files is None:
        raise ApiError(404, "Not Found")
    tree = commit.tree if commit is not None else sha
    recursive = bool(req.query.get("recursive"))
    body, subtrees = api.shapes.tree_listing(repo, tree, files, recursive=recursive)
    repo.trees.update(subtrees)  # a sub-tree listed can be read in turn
    return Reply(200, body)


@route("GET", "/repos/{owner}/{repo}/git/commits/{commit_sha}")
def get_git_commit(api: Api, req: Request) -> Reply:
    repo = api.repo(req)
    commit: Commit | None = repo.objects.get(req.params["commit_sha"])
    if commit is None:
        raise ApiError(404, "Not Found")
    return Reply(200, api.shapes.git_commit(repo, commit))
