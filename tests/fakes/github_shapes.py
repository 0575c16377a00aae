"""Response bodies of the fake GitHub, built from GitHub's own examples.

Every builder deep-copies an example (``fixtures/github/rest/*.json``, or
``components/examples`` of the OpenAPI description when ``rest/`` has none), fills in the fake's
real values and its own URLs, so bodies carry every field GitHub sends and PyGithub can follow
their links (``FakeGitHub`` also rewrites any URL left pointing at api.github.com).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import urllib.parse
from datetime import datetime
from typing import Any, TypeVar, cast

from tests.fakes.github_state import (
    Artifact,
    CheckRun,
    Commit,
    FileChange,
    GitHubState,
    Issue,
    IssueComment,
    PullRequest,
    Reaction,
    Repo,
    Review,
    ReviewComment,
    Workflow,
    WorkflowRun,
    blob_sha,
    tree_sha,
)
from tests.fakes.openapi_check import FIXTURES, load_openapi

API = "https://api.github.com"
WEB = "https://github.com"
Json = dict[str, Any]
T = TypeVar("T")


@functools.cache
def _load_rest(name: str) -> Any:
    with (FIXTURES / "rest" / f"{name}.json").open(encoding="utf-8") as handle:
        return json.load(handle)


def _spec_raw(name: str) -> Any:
    return load_openapi().spec["components"]["examples"][name]["value"]


def _first(value: Any) -> Json:
    return value[0] if isinstance(value, list) else value  # type: ignore[no-any-return]


def rest_example(name: str) -> Json:
    """A fresh copy of ``fixtures/github/rest/<name>.json`` (its first item if a list)."""
    return retarget(_first(_load_rest(name)), [])


def spec_example(name: str) -> Json:
    """A fresh copy of ``components/examples/<name>`` (its first item if a list)."""
    return retarget(_first(_spec_raw(name)), [])


def _retarget(value: Any, pairs: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        if "/" in value:
            for old, new in pairs:
                value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {key: _retarget(item, pairs) for key, item in value.items()}
    if isinstance(value, list):
        return [_retarget(item, pairs) for item in value]
    return value


def retarget(value: T, pairs: list[tuple[str, str]]) -> T:
    """A copy of JSON ``value`` with each substring ``old`` replaced by ``new`` in its strings."""
    return cast(T, _retarget(value, pairs))


def iso(moment: datetime | None) -> str | None:
    """GitHub's timestamp format (UTC, seconds, ``Z``)."""
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def stable_id(text: str) -> int:
    """A positive id derived from ``text`` (the same user always gets the same id)."""
    return int(hashlib.sha1(text.encode()).hexdigest()[:7], 16) + 1


def node_id(kind: str, number: int) -> str:
    return base64.b64encode(f"0:{kind}{number}".encode()).decode()


class Shapes:
    """Builders of response bodies for one fake server (its base URL and state)."""

    def __init__(self, state: GitHubState, base_url: str) -> None:
        self.state = state
        self.base = base_url
        self._users: dict[str, Json] = {}

    # ----- people and apps -------------------------------------------------------------------
    def user(self, login: str) -> Json:
        """A simple-user; ``<slug>[bot]`` logins are Bots."""
        if login not in self._users:
            self._users[login] = self._make_user(login)
        return retarget(self._users[login], [])

    def _make_user(self, login: str) -> Json:
        body: Json = retarget(
            _spec_raw("simple-user"),
            [(f"{API}/users/octocat", f"{self.base}/users/{login}"), (f"{WEB}/octocat", "")],
        )
        body["html_url"] = f"{WEB}/{login.removesuffix('[bot]')}"
        body.update(
            login=login,
            id=stable_id(login),
            node_id=node_id("User", stable_id(login)),
            type="Bot" if login.endswith("[bot]") else "User",
            site_admin=False,
            gravatar_id="",
        )
        return body

    def public_user(self, login: str) -> Json:
        """GET /users/{username}: the public profile."""
        body = spec_example("private-user")
        for key in set(body) - set(
            load_openapi().spec["components"]["schemas"]["public-user"]["properties"]
        ):
            body.pop(key)
        for key in (
            "private_gists",
            "total_private_repos",
            "owned_private_repos",
            "disk_usage",
            "collaborators",
            "plan",
            "notification_email",
        ):
            body.pop(key, None)
        body.update(self.user(login), user_view_type="public", name=login, email=None, bio=None)
        body.update(company=None, blog="", location=None, hireable=None, twitter_username=None)
        return body

    def association(self, repo: Repo, login: str) -> str:
        if login == repo.owner:
            return "OWNER"
        if repo.permission_of(login) in ("admin", "maintain", "write"):
            return "COLLABORATOR"
        return "NONE"

    def app(self, app_id: int | None = None) -> Json:
        """The integration (GET /app) for the fake's App, or another App of ``state.apps``."""
        app_id = self.state.app_id if app_id is None else app_id
        slug = self.state.apps[app_id]
        body = spec_example("integration")
        body.update(
            id=app_id,
            slug=slug,
            client_id=f"Iv1.{app_id:016x}",
            node_id=node_id("Integration", app_id),
            name=slug,
            owner=self.user("octo"),
            html_url=f"{WEB}/apps/{slug}",
            permissions={
                "actions": "read",
                "checks": "write",
                "contents": "write",
                "issues": "write",
                "metadata": "read",
                "pull_requests": "write",
            },
            events=["check_run", "issue_comment", "pull_request", "workflow_run"],
        )
        return body

    def installation(self, installation_id: int, account: str) -> Json:
        body = spec_example("installation")
        body.update(
            id=installation_id,
            account=self.user(account),
            repository_selection="selected",
            access_tokens_url=f"{self.base}/app/installations/{installation_id}/access_tokens",
            repositories_url=f"{self.base}/installation/repositories",
            html_url=f"{WEB}/settings/installations/{installation_id}",
            app_id=self.state.app_id,
            app_slug=self.state.app_slug,
            target_id=stable_id(account),
            target_type="User",
            permissions=self.app()["permissions"],
            events=self.app()["events"],
        )
        return body

    def installation_token(self, token: str, expires_at: datetime) -> Json:
        body = rest_example("apps.create-installation-access-token.201.installation-token")
        body.pop("repositories", None)
        body.update(
            token=token,
            expires_at=iso(expires_at),
            permissions=self.app()["permissions"],
            repository_selection="selected",
        )
        return body

    def permission(self, repo: Repo, login: str) -> Json:
        """A repository-collaborator-permission (``maintain`` reads as ``write``)."""
        role = repo.permission_of(login)
        legacy = {"maintain": "write", "triage": "read"}.get(role, role)
        body = rest_example(
            "repos.get-collaborator-permission-level.200."
            "repository-collaborator-permission-response-if-user-has-admin-permissions"
        )
        user = self.user(login)
        flags = ("admin", "maintain", "push", "triage", "pull")
        rank = {"admin": 5, "maintain": 4, "write": 3, "triage": 2, "read": 1, "none": 0}[role]
        user["permissions"] = {flag: rank >= 5 - i for i, flag in enumerate(flags)}
        user["role_name"] = role
        body.update(permission=legacy, role_name=role, user={**body["user"], **user})
        return body

    # ----- repositories -----------------------------------------------------------------------
    def _repo_pairs(self, repo: Repo) -> list[tuple[str, str]]:
        return [
            (f"{API}/repos/octocat/Hello-World", f"{self.base}/repos/{repo.full_name}"),
            ("octocat/Hello-World", repo.full_name),
            ("octocat/HelloWorld", repo.full_name),
        ]

    def _fill_repo(self, body: Json, repo: Repo) -> Json:
        body = retarget(body, self._repo_pairs(repo))
        tip = repo.objects.get(repo.branches.get(repo.default_branch, ""))
        body.update(
            id=repo.id,
            node_id=node_id("Repository", repo.id),
            name=repo.name,
            full_name=repo.full_name,
            owner=self.user(repo.owner),
            private=repo.private,
            fork=repo.fork_of is not None,
            description=None,
            homepage=None,
            language="Shell",
            default_branch=repo.default_branch,
            created_at=iso(repo.created_at),
            pushed_at=iso(tip.date if tip else repo.created_at),
            updated_at=iso(tip.date if tip else repo.created_at),
            topics=[],
            mirror_url=None,
            license=None,
            visibility="private" if repo.private else "public",
            archived=repo.archived,
        )
        body.pop("template_repository", None)
        body.pop("temp_clone_token", None)
        return body

    def repository(self, repo: Repo) -> Json:
        """A repository object as nested in pull requests."""
        template = _load_rest("pulls.get.200.pull-request")["head"]["repo"]
        return self._fill_repo(template, repo)

    def installation_repositories(self, page: list[Repo], total: int) -> Json:
        """GET /installation/repositories: one page of the installation's repositories."""
        return {
            "total_count": total,
            "repository_selection": "selected",
            "repositories": [self.repository(repo) for repo in page],
        }

    def full_repository(self, repo: Repo) -> Json:
        """GET /repos/{owner}/{repo}."""
        body = self._fill_repo(_spec_raw("full-repository"), repo)
        body["organization"] = None
        body["has_discussions"] = False
        body.pop("parent", None)
        body.pop("source", None)
        if repo.fork_of is not None:
            body["parent"] = body["source"] = self.repository(repo.fork_of)
        body["permissions"] = {
            "admin": False,
            "maintain": False,
            "push": False,
            "triage": False,
            "pull": True,
        }
        body["open_issues_count"] = body["open_issues"] = sum(
            1 for pr in repo.pulls.values() if pr.state == "open"
        )
        return body

    # ----- git objects --------------------------------------------------------------------------
    def _person(self, commit: Commit) -> Json:
        return {
            "name": commit.author,
            "email": f"{commit.author}@example.com",
            "date": iso(commit.date),
        }

    def git_commit(self, repo: Repo, commit: Commit) -> Json:
        """A git-commit (git data API, and the ``commit`` of a file-commit)."""
        body = rest_example("git.create-commit.201.git-commit")
        api = f"{self.base}/repos/{repo.full_name}"
        body.update(
            sha=commit.sha,
            node_id=node_id("Commit", stable_id(commit.sha)),
            url=f"{api}/git/commits/{commit.sha}",
            html_url=f"{WEB}/{repo.full_name}/commit/{commit.sha}",
            author=self._person(commit),
            committer=self._person(commit),
            message=commit.message,
            tree={"url": f"{api}/git/trees/{commit.tree}", "sha": commit.tree},
            parents=[
                {
                    "url": f"{api}/git/commits/{p}",
                    "html_url": f"{WEB}/{repo.full_name}/commit/{p}",
                    "sha": p,
                }
                for p in commit.parents
            ],
        )
        return body

    def commit(self, repo: Repo, commit: Commit, changes: list[FileChange] | None = None) -> Json:
        """A (REST) commit; with ``changes`` also its ``files`` and ``stats``."""
        body = (
            spec_example("commit")
            if changes is not None
            else (rest_example("pulls.list-commits.200.commit-items"))
        )
        api = f"{self.base}/repos/{repo.full_name}"
        body = retarget(body, self._repo_pairs(repo))
        body.update(
            url=f"{api}/commits/{commit.sha}",
            sha=commit.sha,
            node_id=node_id("Commit", stable_id(commit.sha)),
            html_url=f"{WEB}/{repo.full_name}/commit/{commit.sha}",
            comments_url=f"{api}/commits/{commit.sha}/comments",
            author=self.user(commit.author),
            committer=self.user(commit.author),
            parents=[
                {
                    "sha": p,
                    "url": f"{api}/commits/{p}",
                    "html_url": f"{WEB}/{repo.full_name}/commit/{p}",
                }
                for p in commit.parents
            ],
        )
        body["commit"].update(
            url=f"{api}/git/commits/{commit.sha}",
            author=self._person(commit),
            committer=self._person(commit),
            message=commit.message,
            tree={"url": f"{api}/git/trees/{commit.tree}", "sha": commit.tree},
            comment_count=0,
        )
        if changes is not None:
            additions = sum(c.additions for c in changes)
            deletions = sum(c.deletions for c in changes)
            body["stats"] = {
                "additions": additions,
                "deletions": deletions,
                "total": additions + deletions,
            }
            body["files"] = [self.diff_entry(repo, commit.sha, c) for c in changes]
        return body

    def diff_entry(self, repo: Repo, ref: str, change: FileChange) -> Json:
        body = rest_example("pulls.list-files.200.diff-entry-items")
        body.update(
            sha=blob_sha(change.text) if change.text is not None else "0" * 40,
            filename=change.path,
            status=change.status,
            additions=change.additions,
            deletions=change.deletions,
            changes=change.additions + change.deletions,
            blob_url=f"{WEB}/{repo.full_name}/blob/{ref}/{change.path}",
            raw_url=f"{WEB}/{repo.full_name}/raw/{ref}/{change.path}",
            contents_url=f"{self.base}/repos/{repo.full_name}/contents/{change.path}?ref={ref}",
            patch=change.patch,
        )
        return body

    def comparison(
        self,
        repo: Repo,
        base: Commit,
        head: Commit,
        merge_base: Commit | None,
        page: list[Commit],
        ahead: int,
        behind_by: int,
        changes: list[FileChange],
    ) -> Json:
        """A commit-comparison with one ``page`` of the ``ahead`` commits."""
        body = retarget(
            rest_example("repos.compare-commits-with-basehead.200.commit-comparison"),
            self._repo_pairs(repo),
        )
        spec = f"{base.sha}...{head.sha}"
        body.update(
            url=f"{self.base}/repos/{repo.full_name}/compare/{spec}",
            html_url=f"{WEB}/{repo.full_name}/compare/{spec}",
            permalink_url=f"{WEB}/{repo.full_name}/compare/{spec}",
            diff_url=f"{WEB}/{repo.full_name}/compare/{spec}.diff",
            patch_url=f"{WEB}/{repo.full_name}/compare/{spec}.patch",
            base_commit=self.commit(repo, base),
            merge_base_commit=self.commit(repo, merge_base or base),
            status=(
                "identical"
                if ahead == behind_by == 0
                else "ahead"
                if behind_by == 0
                else "behind"
                if ahead == 0
                else "diverged"
            ),
            ahead_by=ahead,
            behind_by=behind_by,
            total_commits=ahead,
            commits=[self.commit(repo, c) for c in page],
            files=[self.diff_entry(repo, head.sha, c) for c in changes],
        )
        return body

    def content_file(
        self, repo: Repo, ref: str, path: str, text: str, with_content: bool = True
    ) -> Json:
        """A content-file; without ``content``/``encoding`` for listings and file-commits."""
        body = rest_example("repos.get-content.200.content-file-response-if-content-is-a-file")
        data = text.encode()
        encoded = base64.b64encode(data).decode()
        api = f"{self.base}/repos/{repo.full_name}"
        sha = blob_sha(text)
        body.update(
            type="file",
            encoding="base64",
            size=len(data),
            name=path.rsplit("/", 1)[-1],
            path=path,
            content="\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60)) + "\n",
            sha=sha,
            url=f"{api}/contents/{path}?ref={ref}",
            git_url=f"{api}/git/blobs/{sha}",
            html_url=f"{WEB}/{repo.full_name}/blob/{ref}/{path}",
            download_url=f"https://raw.githubusercontent.com/{repo.full_name}/{ref}/{path}",
        )
        body["_links"] = {"self": body["url"], "git": body["git_url"], "html": body["html_url"]}
        if not with_content:
            for key in ("content", "encoding"):
                body.pop(key)
        return body

    def directory(self, repo: Repo, ref: str, path: str, files: dict[str, str]) -> list[Json]:
        """A content-directory: the files and folders right under ``path``."""
        prefix = f"{path}/" if path else ""
        children: dict[str, dict[str, str]] = {}
        for name, text in files.items():
            if name.startswith(prefix):
                head, _, rest = name[len(prefix) :].partition("/")
                children.setdefault(head, {})[rest] = text
        entries = []
        for name, below in sorted(children.items()):
            full = f"{prefix}{name}"
            if "" in below:  # a file
                entry = self.content_file(repo, ref, full, below[""], with_content=False)
            else:
                entry = self.content_file(repo, ref, full, "", with_content=False)
                sha = tree_sha(below)
                entry.update(type="dir", size=0, sha=sha, download_url=None)
                entry["git_url"] = entry["_links"]["git"] = (
                    f"{self.base}/repos/{repo.full_name}/git/trees/{sha}"
                )
                entry["html_url"] = entry["_links"]["html"] = (
                    f"{WEB}/{repo.full_name}/tree/{ref}/{full}"
                )
            entries.append(entry)
        return entries

    def directory_object(self, repo: Repo, ref: str, path: str, files: dict[str, str]) -> Json:
        """A directory in the ``object`` media type: a content-tree listing it in ``entries``."""
        prefix = f"{path}/" if path else ""
        below = {
            name[len(prefix) :]: text for name, text in files.items() if name.startswith(prefix)
        }
        body = self.content_file(repo, ref, path, "", with_content=False)
        sha = tree_sha(below)
        body.update(
            type="dir",
            size=0,
            sha=sha,
            download_url=None,
            entries=self.directory(repo, ref, path, files),
        )
        body["git_url"] = body["_links"]["git"] = (
            f"{self.base}/repos/{repo.full_name}/git/trees/{sha}"
        )
        return body

    def blob(self, repo: Repo, text: str) -> Json:
        """A blob of the git data API, its ``content`` in base64 (in lines, as GitHub sends it)."""
        data = text.encode()
        encoded = base64.b64encode(data).decode()
        sha = blob_sha(text)
        return {
            "sha": sha,
            "node_id": node_id("Blob", stable_id(sha)),
            "size": len(data),
            "url": f"{self.base}/repos/{repo.full_name}/git/blobs/{sha}",
            "content": "\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60)) + "\n",
            "encoding": "base64",
        }

    def file_commit(self, repo: Repo, branch: str, path: str, commit: Commit) -> Json:
        body = rest_example(
            "repos.create-or-update-file-contents.201.file-commit-example-for-creating-a-file"
        )
        content = self.content_file(repo, branch, path, commit.files[path], with_content=False)
        body.update(content=content, commit=self.git_commit(repo, commit))
        return body

    def git_ref(self, repo: Repo, branch: str) -> Json:
        body = spec_example("git-ref")
        sha = repo.branches[branch]
        api = f"{self.base}/repos/{repo.full_name}"
        body.update(
            ref=f"refs/heads/{branch}",
            node_id=node_id("Ref", stable_id(f"{repo.full_name}:{branch}")),
            url=f"{api}/git/refs/heads/{branch}",
            object={"type": "commit", "sha": sha, "url": f"{api}/git/commits/{sha}"},
        )
        return body

    def git_tree(self, repo: Repo, sha: str, files: dict[str, str]) -> Json:
        api = f"{self.base}/repos/{repo.full_name}"
        body = rest_example("git.create-tree.201.git-tree")
        body.update(
            sha=sha,
            url=f"{api}/git/trees/{sha}",
            truncated=False,
            tree=[
                {
                    "path": path,
                    "mode": "100644",
                    "type": "blob",
                    "sha": blob_sha(text),
                    "size": len(text.encode()),
                    "url": f"{api}/git/blobs/{blob_sha(text)}",
                }
                for path, text in sorted(files.items())
            ],
        )
        return body

    def tree_listing(
        self, repo: Repo, sha: str, files: dict[str, str], *, recursive: bool
    ) -> tuple[Json, dict[str, dict[str, str]]]:
        """GET git/trees/{sha}: the top level of the snapshot ``files``, or every entry
        (directories and files) with ``recursive``; and the sub-trees listed (sha -> files),
        so that they can be read in turn."""
        api = f"{self.base}/repos/{repo.full_name}"
        dirs: dict[str, dict[str, str]] = {}
        for path, text in files.items():
            parts = path.split("/")
            for depth in range(1, len(parts)):
                below = dirs.setdefault("/".join(parts[:depth]), {})
                below["/".join(parts[depth:])] = text
        entries: list[Json] = []
        for path, below in dirs.items():
            if recursive or "/" not in path:
                sub = tree_sha(below)
                entry = {"path": path, "mode": "040000", "type": "tree", "sha": sub}
                entries.append({**entry, "url": f"{api}/git/trees/{sub}"})
        for path, text in files.items():
            if recursive or "/" not in path:
                blob = blob_sha(text)
                entry = {"path": path, "mode": "100644", "type": "blob", "sha": blob}
                entries.append(
                    {**entry, "size": len(text.encode()), "url": f"{api}/git/blobs/{blob}"}
                )
        body = {
            "sha": sha,
            "url": f"{api}/git/trees/{sha}",
            "tree": sorted(entries, key=lambda e: str(e["path"])),
            "truncated": False,
        }
        return body, {tree_sha(below): below for below in dirs.values()}

    def short_blob(self, repo: Repo, sha: str) -> Json:
        return {"url": f"{self.base}/repos/{repo.full_name}/git/blobs/{sha}", "sha": sha}

    # ----- pull requests and issues -----------------------------------------------------------
    def _pr_pairs(self, pr: PullRequest) -> list[tuple[str, str]]:
        return [*self._repo_pairs(pr.repo), ("1347", str(pr.number))]

    def _branch(self, repo: Repo, ref: str, sha: str) -> Json:
        return {
            "label": f"{repo.owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.user(repo.owner),
            "repo": self.repository(repo),
        }

    def _fill_pr(self, body: Json, pr: PullRequest) -> Json:
        body = retarget(body, self._pr_pairs(pr))
        body["statuses_url"] = f"{self.base}/repos/{pr.repo.full_name}/statuses/{pr.head_sha}"
        body.update(
            id=pr.id,
            node_id=node_id("PullRequest", pr.id),
            number=pr.number,
            state=pr.state,
            locked=False,
            title=pr.title,
            user=self.user(pr.user),
            body=pr.body,
            labels=[self.label(pr.repo, name) for name in pr.labels],
            milestone=None,
            active_lock_reason=None,
            created_at=iso(pr.created_at),
            updated_at=iso(pr.updated_at or pr.closed_at or pr.created_at),
            closed_at=iso(pr.closed_at),
            merged_at=iso(pr.merged_at),
            merge_commit_sha=pr.merge_commit_sha,
            assignee=self.user(pr.assignees[0]) if pr.assignees else None,
            assignees=[self.user(login) for login in pr.assignees],
            requested_reviewers=[],
            requested_teams=[],
            head=self._branch(pr.head_repo, pr.head_ref, pr.head_sha),
            base=self._branch(pr.repo, pr.base_ref, pr.base_sha),
            author_association=self.association(pr.repo, pr.user),
            auto_merge=None,
            draft=pr.draft,
        )
        return body

    def pull_request(self, pr: PullRequest) -> Json:
        """GET /repos/{owner}/{repo}/pulls/{n}: the full pull-request."""
        body = self._fill_pr(_load_rest("pulls.get.200.pull-request"), pr)
        files = pr.repo.pr_files(pr)
        body.update(
            merged=pr.merged,
            mergeable=None if pr.merged else True,
            rebaseable=None if pr.merged else True,
            mergeable_state="unknown" if pr.merged else "clean",
            merged_by=self.user("octocat") if pr.merged else None,
            comments=len(pr.repo.comments(pr.number)),
            review_comments=sum(len(r.comments) for r in pr.repo.reviews(pr.number)),
            maintainer_can_modify=pr.maintainer_can_modify,
            commits=len(pr.repo.pr_commits(pr)),
            additions=sum(c.additions for c in files),
            deletions=sum(c.deletions for c in files),
            changed_files=len(files),
        )
        return body

    def pull_request_simple(self, pr: PullRequest) -> Json:
        """An item of PR lists (GET pulls, GET commits/{sha}/pulls)."""
        template = _load_rest(
            "repos.list-pull-requests-associated-with-commit.200.pull-request-simple-items"
        )[0]
        return self._fill_pr(template, pr)

    def pull_request_minimal(self, pr: PullRequest) -> Json:
        def part(repo: Repo, ref: str, sha: str) -> Json:
            url = f"{self.base}/repos/{repo.full_name}"
            return {"ref": ref, "sha": sha, "repo": {"id": repo.id, "url": url, "name": repo.name}}

        return {
            "id": pr.id,
            "number": pr.number,
            "url": f"{self.base}/repos/{pr.repo.full_name}/pulls/{pr.number}",
            "head": part(pr.head_repo, pr.head_ref, pr.head_sha),
            "base": part(pr.repo, pr.base_ref, pr.base_sha),
        }

    def label(self, repo: Repo, name: str) -> Json:
        label_id = repo.labels.get(name) or stable_id(name)
        return {
            "id": label_id,
            "node_id": node_id("Label", label_id),
            "url": f"{self.base}/repos/{repo.full_name}/labels/{urllib.parse.quote(name)}",
            "name": name,
            "description": None,
            "color": "ededed",
            "default": False,
        }

    def issue(self, repo: Repo, item: PullRequest | Issue) -> Json:
        """An issue (GET/POST/PATCH issues, the issues listing): a plain issue, or a pull
        request seen as an issue (with its ``pull_request`` links)."""
        pull = isinstance(item, PullRequest)
        pairs = [*self._repo_pairs(repo), ("1347", str(item.number))]
        body: Json = retarget(_spec_raw("issue"), pairs)
        api = f"{self.base}/repos/{repo.full_name}"
        web = f"{WEB}/{repo.full_name}/{'pull' if pull else 'issues'}/{item.number}"
        closed = item.state == "closed"
        reason = item.state_reason if isinstance(item, Issue) else "completed" if closed else None
        body.update(
            id=item.id + 1 if pull else item.id,
            node_id=node_id("Issue", item.id),
            url=f"{api}/issues/{item.number}",
            repository_url=api,
            labels_url=f"{api}/issues/{item.number}/labels{{/name}}",
            comments_url=f"{api}/issues/{item.number}/comments",
            events_url=f"{api}/issues/{item.number}/events",
            html_url=web,
            number=item.number,
            state=item.state,
            title=item.title,
            body=item.body,
            user=self.user(item.user),
            pinned_comment=None,
            labels=[self.label(repo, name) for name in item.labels],
            assignee=self.user(item.assignees[0]) if item.assignees else None,
            assignees=[self.user(login) for login in item.assignees],
            milestone=None,
            locked=False,
            active_lock_reason=None,
            comments=len(repo.comments(item.number)),
            closed_at=iso(item.closed_at),
            created_at=iso(item.created_at),
            updated_at=iso(item.updated_at or item.closed_at or item.created_at),
            closed_by=None,
            author_association=self.association(repo, item.user),
            state_reason=reason,
            performed_via_github_app=None if item.app_id is None else self.app(item.app_id),
        )
        body.pop("pull_request", None)
        if isinstance(item, PullRequest):
            body["pull_request"] = {
                "url": f"{api}/pulls/{item.number}",
                "html_url": web,
                "diff_url": f"{web}.diff",
                "patch_url": f"{web}.patch",
                "merged_at": iso(item.merged_at),
            }
        return body

    def issue_comment(self, repo: Repo, comment: IssueComment) -> Json:
        body = rest_example("issues.create-comment.201.issue-comment")
        api = f"{self.base}/repos/{repo.full_name}"
        kind = "issues" if comment.issue_number in repo.issues else "pull"
        body.update(
            id=comment.id,
            node_id=node_id("IssueComment", comment.id),
            url=f"{api}/issues/comments/{comment.id}",
            html_url=f"{WEB}/{repo.full_name}/{kind}/{comment.issue_number}"
            f"#issuecomment-{comment.id}",
            body=comment.body,
            user=self.user(comment.user),
            created_at=iso(comment.created_at),
            updated_at=iso(comment.updated_at),
            issue_url=f"{api}/issues/{comment.issue_number}",
            author_association=self.association(repo, comment.user),
            performed_via_github_app=(None if comment.app_id is None else self.app(comment.app_id)),
        )
        return body

    def reaction(self, reaction: Reaction) -> Json:
        body = rest_example("reactions.create-for-issue-comment.201.reaction")
        body.update(
            id=reaction.id,
            node_id=node_id("Reaction", reaction.id),
            user=self.user(reaction.user),
            content=reaction.content,
            created_at=iso(reaction.created_at),
        )
        return body

    def review(self, pr: PullRequest, review: Review) -> Json:
        body: Json = retarget(_spec_raw("pull-request-review"), self._pr_pairs(pr))
        api = f"{self.base}/repos/{pr.repo.full_name}"
        html = f"{WEB}/{pr.repo.full_name}/pull/{pr.number}#pullrequestreview-{review.id}"
        body.update(
            id=review.id,
            node_id=node_id("PullRequestReview", review.id),
            user=self.user(review.user),
            body=review.body,
            state=review.state,
            html_url=html,
            pull_request_url=f"{api}/pulls/{pr.number}",
            _links={"html": {"href": html}, "pull_request": {"href": f"{api}/pulls/{pr.number}"}},
            submitted_at=iso(review.submitted_at),
            commit_id=review.commit_id,
            author_association=self.association(pr.repo, review.user),
        )
        return body

    def review_comment(self, pr: PullRequest, comment: ReviewComment) -> Json:
        body: Json = retarget(_spec_raw("pull-request-review-comment"), self._pr_pairs(pr))
        api = f"{self.base}/repos/{pr.repo.full_name}"
        html = f"{WEB}/{pr.repo.full_name}/pull/{pr.number}#discussion_r{comment.id}"
        body.update(
            url=f"{api}/pulls/comments/{comment.id}",
            pull_request_review_id=comment.review_id,
            id=comment.id,
            node_id=node_id("PullRequestReviewComment", comment.id),
            path=comment.path,
            commit_id=comment.commit_id,
            original_commit_id=comment.commit_id,
            user=self.user(comment.user),
            body=comment.body,
            created_at=iso(comment.created_at),
            updated_at=iso(comment.created_at),
            html_url=html,
            pull_request_url=f"{api}/pulls/{pr.number}",
            author_association=self.association(pr.repo, comment.user),
            start_line=comment.start_line,
            original_start_line=comment.start_line,
            start_side=comment.side if comment.start_line else None,
            line=comment.line,
            original_line=comment.line,
            side=comment.side,
        )
        body.pop("in_reply_to_id", None)  # only replies carry it
        body["_links"] = {
            "self": {"href": body["url"]},
            "html": {"href": html},
            "pull_request": {"href": body["pull_request_url"]},
        }
        return body

    # ----- checks -------------------------------------------------------------------------------
    def check_run(self, repo: Repo, run: CheckRun) -> Json:
        body = rest_example("checks.create.201.check-run-example-of-completed-conclusion")
        api = f"{self.base}/repos/{repo.full_name}"
        output = run.output
        body.update(
            id=run.id,
            head_sha=run.head_sha,
            node_id=node_id("CheckRun", run.id),
            external_id=run.external_id,
            url=f"{api}/check-runs/{run.id}",
            html_url=f"{WEB}/{repo.full_name}/runs/{run.id}",
            details_url=run.details_url,
            status=run.status,
            conclusion=run.conclusion,
            started_at=iso(run.started_at),
            completed_at=iso(run.completed_at),
            output={
                "title": output.get("title"),
                "summary": output.get("summary"),
                "text": output.get("text"),
                "annotations_count": len(output.get("annotations", [])),
                "annotations_url": f"{api}/check-runs/{run.id}/annotations",
            },
            name=run.name,
            check_suite={"id": stable_id(f"{repo.full_name}:{run.head_sha}")},
            app=self.app(),
            pull_requests=[
                self.pull_request_minimal(pr)
                for pr in repo.pulls.values()
                if pr.state == "open" and pr.head_repo is repo and pr.head_sha == run.head_sha
            ],
        )
        return body

    # ----- GitHub Actions -----------------------------------------------------------------------
    def workflow(self, repo: Repo, workflow: Workflow) -> Json:
        """A workflow (GET actions/workflows/{workflow_id})."""
        body = spec_example("workflow")
        body.update(
            id=workflow.id,
            node_id=node_id("Workflow", workflow.id),
            name=workflow.name,
            path=workflow.path,
            state=workflow.state,
            created_at=iso(workflow.created_at),
            updated_at=iso(workflow.created_at),
            url=f"{self.base}/repos/{repo.full_name}/actions/workflows/{workflow.id}",
            html_url=f"{WEB}/{repo.full_name}/blob/{repo.default_branch}/{workflow.path}",
            badge_url=f"{WEB}/{repo.full_name}/workflows/{workflow.name}/badge.svg",
        )
        return body

    def workflow_run(self, repo: Repo, run: WorkflowRun, *, pulls: bool = True) -> Json:
        """A workflow-run; its ``pull_requests`` are the open PRs of this repository whose head
        is the run's commit on a branch of this repository (GitHub lists none for forks)."""
        body = spec_example("workflow-run")
        api = f"{self.base}/repos/{repo.full_name}"
        commit = run.head_repo.objects.get(run.head_sha)
        body.pop("referenced_workflows", None)
        body.update(
            id=run.id,
            name=run.workflow.name,
            node_id=node_id("WorkflowRun", run.id),
            check_suite_id=stable_id(f"suite:{run.id}"),
            check_suite_node_id=node_id("CheckSuite", stable_id(f"suite:{run.id}")),
            head_branch=run.head_branch,
            head_sha=run.head_sha,
            path=f"{run.workflow.path}@{run.head_branch}",
            run_number=run.run_number,
            event=run.event,
            display_title=commit.message.splitlines()[0] if commit else run.workflow.name,
            status=run.status,
            conclusion=run.conclusion,
            workflow_id=run.workflow.id,
            url=f"{api}/actions/runs/{run.id}",
            html_url=f"{WEB}/{repo.full_name}/actions/runs/{run.id}",
            pull_requests=[
                self.pull_request_minimal(pr)
                for pr in repo.pulls.values()
                if pulls
                and pr.state == "open"
                and pr.head_repo is repo
                and run.head_repo is repo
                and pr.head_sha == run.head_sha
            ],
            created_at=iso(run.created_at),
            updated_at=iso(run.updated_at),
            actor=self.user(run.actor),
            triggering_actor=self.user(run.actor),
            run_attempt=1,
            run_started_at=iso(run.created_at),
            jobs_url=f"{api}/actions/runs/{run.id}/jobs",
            logs_url=f"{api}/actions/runs/{run.id}/logs",
            check_suite_url=f"{api}/check-suites/{stable_id(f'suite:{run.id}')}",
            artifacts_url=f"{api}/actions/runs/{run.id}/artifacts",
            cancel_url=f"{api}/actions/runs/{run.id}/cancel",
            rerun_url=f"{api}/actions/runs/{run.id}/rerun",
            previous_attempt_url=None,
            workflow_url=f"{api}/actions/workflows/{run.workflow.id}",
            head_commit=None
            if commit is None
            else {
                "id": commit.sha,
                "tree_id": commit.tree,
                "message": commit.message,
                "timestamp": iso(commit.date),
                "author": self._person(commit),
                "committer": self._person(commit),
            },
            repository=self.repository(repo),
            head_repository=self.repository(run.head_repo),
            head_repository_id=run.head_repo.id,
        )
        return body

    def artifact(self, repo: Repo, artifact: Artifact) -> Json:
        """An artifact, with the ids, branch and commit of the run that uploaded it."""
        body = spec_example("artifact")
        api = f"{self.base}/repos/{repo.full_name}/actions/artifacts/{artifact.id}"
        run = artifact.run
        body.update(
            id=artifact.id,
            node_id=node_id("Artifact", artifact.id),
            name=artifact.name,
            size_in_bytes=artifact.size_in_bytes,
            url=api,
            archive_download_url=f"{api}/zip",
            expired=artifact.expired,
            created_at=iso(artifact.created_at),
            expires_at=iso(artifact.expires_at),
            updated_at=iso(artifact.created_at),
            digest="sha256:" + hashlib.sha256(artifact.data).hexdigest(),
            workflow_run={
                "id": run.id,
                "repository_id": repo.id,
                "head_repository_id": run.head_repo.id,
                "head_branch": run.head_branch,
                "head_sha": run.head_sha,
            },
        )
        return body

    # ----- errors -------------------------------------------------------------------------------
    @staticmethod
    def error(status: int, message: str, errors: list[Json] | None = None) -> Json:
        """GitHub's error body (basic-error; validation-error when ``errors`` is given)."""
        body: Json = {
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
            "status": str(status),
        }
        if errors is not None:
            body["errors"] = errors
        return body
