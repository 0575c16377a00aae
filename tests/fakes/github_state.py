"""In-memory state of the fake GitHub: repositories, commits, pull requests, issues, comments,
checks, and GitHub Actions' workflows, runs and artifacts.

Pure bookkeeping with no HTTP: the server in ``github_api`` reads and changes it under
``GitHubState.lock``, and tests arrange scenarios through the helper methods of ``Repo``.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

PERMISSIONS = ("admin", "maintain", "write", "triage", "read", "none")
EPOCH = datetime(2026, 7, 1, tzinfo=UTC)


def blob_sha(text: str) -> str:
    """Git's object id of a blob holding ``text``."""
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def tree_sha(files: dict[str, str]) -> str:
    """A stable id for a snapshot (not git's tree encoding, but unique per content)."""
    listing = "".join(f"{path}\0{blob_sha(text)}\n" for path, text in sorted(files.items()))
    return hashlib.sha1(b"tree " + listing.encode()).hexdigest()


@dataclass
class Commit:
    """A commit with its full snapshot of files (path -> text)."""

    sha: str
    parents: list[str]
    message: str
    author: str
    date: datetime
    files: dict[str, str]

    @property
    def tree(self) -> str:
        return tree_sha(self.files)


@dataclass
class FileChange:
    """One entry of a diff between two snapshots."""

    path: str
    status: str  # added | removed | modified
    additions: int
    deletions: int
    patch: str
    text: str | None  # content on the new side (None when removed)


@dataclass
class PullRequest:
    """A pull request; ``head_repo`` is a fork when the PR comes from one."""

    number: int
    id: int
    title: str
    body: str
    user: str
    repo: Repo
    head_repo: Repo
    head_ref: str
    base_ref: str
    maintainer_can_modify: bool
    draft: bool
    created_at: datetime
    state: str = "open"
    merged: bool = False
    merge_commit_sha: str | None = None
    merged_at: datetime | None = None
    closed_at: datetime | None = None
    base_at_merge: str | None = None  # the base tip the PR was merged onto
    labels: list[str] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    app_id: int | None = None  # the App that opened it (``performed_via_github_app``)
    updated_at: datetime | None = None  # None: its last state change

    @property
    def head_sha(self) -> str:
        return self.head_repo.branches[self.head_ref]

    @property
    def base_sha(self) -> str:
        """The base branch tip; for a merged PR, the tip it was merged onto (as GitHub keeps
        showing the PR's own commits and files after the merge)."""
        return self.base_at_merge or self.repo.branches[self.base_ref]


@dataclass
class Issue:
    """A plain issue (not a PR); numbers are shared with PRs.  ``app_id``: the App that
    opened it (``performed_via_github_app``)."""

    number: int
    id: int
    title: str
    body: str
    user: str
    created_at: datetime
    updated_at: datetime
    state: str = "open"
    state_reason: str | None = None
    closed_at: datetime | None = None
    labels: list[str] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    app_id: int | None = None


@dataclass
class Reaction:
    id: int
    user: str
    content: str
    created_at: datetime


@dataclass
class IssueComment:
    """An issue comment; ``app_id``: the App that wrote it (``performed_via_github_app``)."""

    id: int
    issue_number: int
    user: str
    body: str
    created_at: datetime
    updated_at: datetime
    reactions: list[Reaction] = field(default_factory=list)
    app_id: int | None = None


@dataclass
class CheckRun:
    id: int
    head_sha: str
    name: str
    status: str
    conclusion: str | None
    started_at: datetime
    completed_at: datetime | None
    output: dict[str, Any] = field(default_factory=dict)
    actions: list[dict[str, str]] = field(default_factory=list)
    external_id: str | None = None
    details_url: str | None = None


@dataclass
class HookDelivery:
    """One attempt at delivering a webhook to the App, as GitHub lists it: ``guid`` is the
    ``X-GitHub-Delivery`` (kept by redeliveries), ``status_code`` 0 when nothing answered."""

    id: int
    guid: str
    event: str
    action: str | None
    installation_id: int | None
    repository_id: int | None
    delivered_at: datetime
    redelivery: bool
    status_code: int
    duration: float
    body: bytes
    headers: dict[str, str]

    @property
    def status(self) -> str:
        """GitHub's description of the answer: ``OK`` for a 2xx."""
        if self.status_code == 0:
            return "failed to connect to host"
        if 200 <= self.status_code < 300:
            return "OK"
        return f"Invalid HTTP Response: {self.status_code}"


@dataclass
class Workflow:
    """A workflow file of ``.github/workflows``; requests name it by id or file name."""

    id: int
    path: str
    name: str
    created_at: datetime
    state: str = "active"

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass
class WorkflowRun:
    """One run of a workflow in the repository that owns it; ``head_repo`` is a fork for a
    pull request from one (its ``head_branch`` is the fork's branch name)."""

    id: int
    workflow: Workflow
    run_number: int
    event: str
    head_branch: str | None
    head_sha: str
    head_repo: Repo
    status: str
    conclusion: str | None
    created_at: datetime
    updated_at: datetime
    actor: str = "octocat"


@dataclass
class Artifact:
    """An artifact uploaded by a run: ``data`` is the zip archive GitHub serves;
    ``size_in_bytes`` what the API reports (by default the archive's size)."""

    id: int
    name: str
    run: WorkflowRun
    data: bytes
    size_in_bytes: int
    created_at: datetime
    expires_at: datetime
    expired: bool = False


@dataclass
class ReviewComment:
    id: int
    review_id: int
    path: str
    body: str
    line: int | None
    start_line: int | None
    side: str
    commit_id: str
    user: str
    created_at: datetime


@dataclass
class Review:
    id: int
    pr_number: int
    user: str
    body: str
    state: str
    commit_id: str
    submitted_at: datetime
    comments: list[ReviewComment] = field(default_factory=list)


def diff_snapshots(old: dict[str, str], new: dict[str, str]) -> list[FileChange]:
    """File-by-file differences from ``old`` to ``new``, sorted by path, with unified patches."""
    changes = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        lines = list(
            difflib.unified_diff(
                (before or "").splitlines(), (after or "").splitlines(), lineterm="", n=3
            )
        )[2:]
        additions = sum(1 for line in lines if line.startswith("+"))
        deletions = sum(1 for line in lines if line.startswith("-"))
        status = "added" if before is None else "removed" if after is None else "modified"
        changes.append(FileChange(path, status, additions, deletions, "\n".join(lines), after))
    return changes


class Repo:
    """A repository and the test helpers that arrange its history, PRs and permissions."""

    def __init__(
        self,
        state: GitHubState,
        full_name: str,
        *,
        installation_id: int | None,
        default_branch: str,
        private: bool,
        objects: dict[str, Commit] | None = None,
        fork_of: Repo | None = None,
    ) -> None:
        self.state = state
        self.owner, self.name = full_name.split("/")
        self.id = state.next_id()
        self.installation_id = installation_id
        self.default_branch = default_branch
        self.private = private
        self.fork_of = fork_of
        self.objects: dict[str, Commit] = {} if objects is None else objects  # shared by forks
        self.branches: dict[str, str] = {}
        self.pulls: dict[int, PullRequest] = {}
        self.issues: dict[int, Issue] = {}  # plain issues; PRs are in ``pulls``
        self.labels: dict[str, int] = {}  # label name -> id (created when first used)
        self.archived = False
        self.issue_comments: dict[int, IssueComment] = {}
        self.check_runs_by_id: dict[int, CheckRun] = {}
        self.reviews_by_id: dict[int, Review] = {}
        self.permissions: dict[str, str] = {}
        self.associations: dict[str, set[int]] = {}
        self.blobs: dict[str, str] = {}  # created through the git data API
        self.trees: dict[str, dict[str, str]] = {}
        self.created_at = EPOCH
        self.workflows: dict[int, Workflow] = {}
        self.workflow_runs: dict[int, WorkflowRun] = {}
        self.artifacts: dict[int, Artifact] = {}

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    # ----- history -------------------------------------------------------------------------
    def resolve(self, ref: str) -> str | None:
        """The commit sha a branch name, ``heads/<branch>``, or a (full) sha refers to."""
        name = ref.removeprefix("refs/").removeprefix("heads/")
        if name in self.branches:
            return self.branches[name]
        ref = ref.lower()  # git reads hex in either case
        if ref in self.objects:
            return ref
        matches = [sha for sha in self.objects if len(ref) >= 7 and sha.startswith(ref)]
        return matches[0] if len(matches) == 1 else None

    def add_commit(
        self,
        parents: list[str],
        files: dict[str, str],
        message: str,
        author: str = "octocat",
        date: datetime | None = None,
    ) -> Commit:
        """Store a commit (no branch moves)."""
        with self.state.lock:
            when = date or self.state.tick()
            seed = (
                f"{parents}|{message}|{when.isoformat()}|{tree_sha(files)}|{self.state.next_id()}"
            )
            commit = Commit(
                hashlib.sha1(seed.encode()).hexdigest(), parents, message, author, when, files
            )
            self.objects[commit.sha] = commit
            return commit

    def commit(
        self,
        branch: str,
        files: dict[str, str | None],
        *,
        message: str = "Update files",
        date: datetime | None = None,
        author: str = "octocat",
        from_branch: str | None = None,
    ) -> str:
        """Commit ``files`` (path -> text, None deletes) on ``branch`` and return the new sha.

        A missing branch is created from ``from_branch`` (default branch by default).
        """
        with self.state.lock:
            if branch not in self.branches:
                self.branches[branch] = self.branches[from_branch or self.default_branch]
            parent = self.branches[branch]
            snapshot = dict(self.objects[parent].files)
            for path, text in files.items():
                if text is None:
                    snapshot.pop(path, None)
                else:
                    snapshot[path] = text
            new = self.add_commit([parent], snapshot, message, author, date)
            self.branches[branch] = new.sha
            return new.sha

    def file_at(self, ref: str, path: str) -> str | None:
        """The text of ``path`` at a branch or sha, or None when absent."""
        with self.state.lock:
            sha = self.resolve(ref)
            return None if sha is None else self.objects[sha].files.get(path)

    def blob(self, sha: str) -> str | None:
        """The text of blob ``sha``: created through the git data API, or in any commit."""
        with self.state.lock:
            if sha in self.blobs:
                return self.blobs[sha]
            texts = {text for commit in self.objects.values() for text in commit.files.values()}
            return next((text for text in texts if blob_sha(text) == sha), None)

    def head(self, branch: str) -> str:
        """The sha a branch points at."""
        return self.branches[branch]

    def ancestors(self, sha: str) -> list[str]:
        """``sha`` and every commit reachable from it, nearest first (breadth-first)."""
        seen: dict[str, None] = {}
        queue = [sha]
        while queue:
            current = queue.pop(0)
            if current in seen or current not in self.objects:
                continue
            seen[current] = None
            queue.extend(self.objects[current].parents)
        return list(seen)

    def merge_base(self, base: str, head: str) -> str | None:
        """The nearest common ancestor of two commits."""
        reachable = set(self.ancestors(head))
        return next((sha for sha in self.ancestors(base) if sha in reachable), None)

    def commits_between(self, base: str, head: str) -> list[Commit]:
        """Commits reachable from ``head`` but not from ``base``, oldest first."""
        excluded = set(self.ancestors(base))
        found = [self.objects[s] for s in self.ancestors(head) if s not in excluded]
        return sorted(found, key=lambda c: (c.date, len(self.ancestors(c.sha))))

    # ----- pull requests --------------------------------------------------------------------
    def fork(self, owner: str, *, private: bool = False) -> Repo:
        """The fork ``owner/<name>`` of this repository (created once, shares commit objects)."""
        with self.state.lock:
            full = f"{owner}/{self.name}"
            if full not in self.state.repos:
                fork = Repo(
                    self.state,
                    full,
                    installation_id=None,
                    default_branch=self.default_branch,
                    private=private,
                    objects=self.objects,
                    fork_of=self,
                )
                fork.branches = dict(self.branches)
                self.state.repos[full] = fork
            return self.state.repos[full]

    def open_pr(
        self,
        number: int | None = None,
        *,
        head: str = "feature",
        base: str | None = None,
        head_files: dict[str, str | None] | None = None,
        fork: bool = False,
        maintainer_can_modify: bool = False,
        user: str = "alice",
        title: str = "Update thresholds",
        body: str = "",
        draft: bool = False,
        message: str = "Change thresholds",
        date: datetime | None = None,
    ) -> PullRequest:
        """Open a PR from ``head`` (in this repo or in ``user``'s fork) into ``base``.

        ``head_files`` are committed on the head branch first (created from ``base``).
        """
        with self.state.lock:
            base = base or self.default_branch
            number = number or self.next_number()
            head_repo = self.fork(user) if fork else self
            if head_files is not None:
                if head not in head_repo.branches:
                    head_repo.branches[head] = self.branches[base]
                head_repo.commit(head, head_files, message=message, author=user, date=date)
            pr = PullRequest(
                number=number,
                id=self.state.next_id(),
                title=title,
                body=body,
                user=user,
                repo=self,
                head_repo=head_repo,
                head_ref=head,
                base_ref=base,
                maintainer_can_modify=maintainer_can_modify,
                draft=draft,
                created_at=self.state.tick(),
            )
            self.pulls[number] = pr
            return pr

    def next_number(self) -> int:
        """The number of the next issue or PR (one sequence for both, as on GitHub)."""
        return max([0, *self.pulls, *self.issues]) + 1

    def add_issue(
        self,
        title: str,
        body: str = "",
        *,
        user: str = "alice",
        state: str = "open",
        labels: tuple[str, ...] = (),
        by_app: bool = False,
    ) -> Issue:
        """An issue written by ``user``, or by this App's bot user (``by_app``)."""
        with self.state.lock:
            now = self.state.tick()
            app_id = self.state.app_id if by_app else None
            user = self.state.bot_login if by_app else user
            issue = Issue(
                self.next_number(), self.state.next_id(), title, body, user, now, now, app_id=app_id
            )
            issue.labels = [self.label(name) for name in labels]
            if state == "closed":
                issue.state, issue.state_reason, issue.closed_at = "closed", "completed", now
            self.issues[issue.number] = issue
            return issue

    def label(self, name: str) -> str:
        """The label ``name``, created if new (as GitHub does for labels set on an issue)."""
        with self.state.lock:
            known = next((label for label in self.labels if label.lower() == name.lower()), None)
            if known is None:
                self.labels[name] = self.state.next_id()
            return known or name

    def pr_commits(self, pr: PullRequest) -> list[Commit]:
        """The commits a PR brings (head not in base), oldest first."""
        return self.commits_between(pr.base_sha, pr.head_sha)

    def pr_files(self, pr: PullRequest) -> list[FileChange]:
        """The PR's diff: merge base of base and head against the head."""
        base = self.merge_base(pr.base_sha, pr.head_sha)
        old = self.objects[base].files if base else {}
        return diff_snapshots(old, self.objects[pr.head_sha].files)

    def merge_pr(self, number: int, *, date: datetime | None = None, user: str = "octocat") -> str:
        """Merge a PR with a merge commit on its base branch; associate its commits with it."""
        with self.state.lock:
            pr = self.pulls[number]
            for commit in self.pr_commits(pr):
                self.associations.setdefault(commit.sha, set()).add(number)
            base_tip, head_tip = pr.base_sha, pr.head_sha
            ancestor = self.merge_base(base_tip, head_tip)
            merged = dict(self.objects[base_tip].files)
            old = self.objects[ancestor].files if ancestor else {}
            for change in diff_snapshots(old, self.objects[head_tip].files):
                if change.text is None:
                    merged.pop(change.path, None)
                else:
                    merged[change.path] = change.text
            message = f"Merge pull request #{number} from {pr.head_repo.owner}/{pr.head_ref}"
            commit = self.add_commit([base_tip, head_tip], merged, message, user, date)
            pr.base_at_merge = base_tip
            self.branches[pr.base_ref] = commit.sha
            self.associations.setdefault(commit.sha, set()).add(number)
            pr.state, pr.merged, pr.merge_commit_sha = "closed", True, commit.sha
            pr.merged_at = pr.closed_at = commit.date
            return commit.sha

    def close_pr(self, number: int) -> None:
        """Close a PR without merging it."""
        with self.state.lock:
            pr = self.pulls[number]
            pr.state, pr.closed_at = "closed", self.state.tick()

    def associate(self, sha: str, number: int) -> None:
        """Record that commit ``sha`` came in through PR ``number``."""
        with self.state.lock:
            self.associations.setdefault(sha, set()).add(number)

    def pulls_for_commit(self, sha: str) -> list[PullRequest]:
        """PRs that brought ``sha`` (merged associations) or whose open head contains it."""
        numbers = set(self.associations.get(sha, set()))
        for pr in self.pulls.values():
            if pr.state == "open" and sha in {c.sha for c in self.pr_commits(pr)}:
                numbers.add(pr.number)
        return [self.pulls[n] for n in sorted(numbers)]

    # ----- GitHub Actions ---------------------------------------------------------------------
    def add_workflow(
        self, file_name: str, *, name: str | None = None, workflow_id: int | None = None
    ) -> Workflow:
        """The workflow ``.github/workflows/<file_name>`` (id given or new)."""
        with self.state.lock:
            workflow = Workflow(
                workflow_id or self.state.next_id(),
                f".github/workflows/{file_name}",
                name or file_name.rsplit(".", 1)[0],
                self.state.tick(),
            )
            self.workflows[workflow.id] = workflow
            return workflow

    def workflow(self, id_or_file_name: str) -> Workflow | None:
        """The workflow a request names by id or by file name."""
        for workflow in self.workflows.values():
            if id_or_file_name in (str(workflow.id), workflow.file_name):
                return workflow
        return None

    def add_workflow_run(
        self,
        workflow: Workflow,
        *,
        event: str = "schedule",
        branch: str | None = None,
        head_sha: str | None = None,
        head_repo: Repo | None = None,
        status: str = "completed",
        conclusion: str | None = "success",
        created_at: datetime | None = None,
        actor: str = "octocat",
    ) -> WorkflowRun:
        """A run of ``workflow`` in this repository, on ``branch`` (default: the default
        branch) of ``head_repo`` (default: this repository; a fork for a PR from one) at
        ``head_sha`` (default: that branch's tip, or this repository's default branch tip)."""
        with self.state.lock:
            source = head_repo or self
            branch = branch or self.default_branch
            sha = head_sha or source.branches.get(branch) or self.branches[self.default_branch]
            when = created_at or self.state.tick()
            number = 1 + sum(1 for r in self.workflow_runs.values() if r.workflow is workflow)
            run = WorkflowRun(
                self.state.next_id(),
                workflow,
                number,
                event,
                branch,
                sha,
                source,
                status,
                conclusion if status == "completed" else None,
                when,
                when + timedelta(minutes=30) if status == "completed" else when,
                actor,
            )
            self.workflow_runs[run.id] = run
            return run

    def add_artifact(
        self,
        run: WorkflowRun,
        name: str,
        data: bytes,
        *,
        expired: bool = False,
        size_in_bytes: int | None = None,
        retention_days: int = 90,
    ) -> Artifact:
        """An artifact ``name`` of ``run`` whose archive is ``data`` (zip bytes); an
        ``expired`` one is still listed but its download answers 410."""
        with self.state.lock:
            created = run.updated_at
            artifact = Artifact(
                self.state.next_id(),
                name,
                run,
                data,
                len(data) if size_in_bytes is None else size_in_bytes,
                created,
                created + timedelta(days=retention_days),
                expired,
            )
            self.artifacts[artifact.id] = artifact
            return artifact

    # ----- people and read accessors ---------------------------------------------------------
    def set_permission(self, user: str, permission: str) -> None:
        """Give ``user`` a collaborator role: admin, maintain, write, triage, read or none."""
        if permission not in PERMISSIONS:
            raise ValueError(f"unknown permission {permission!r}; one of {PERMISSIONS}")
        with self.state.lock:
            self.permissions[user] = permission

    def permission_of(self, user: str) -> str:
        """The role of ``user``; non-collaborators read public repositories and nothing else."""
        return self.permissions.get(user, "none" if self.private else "read")

    def pr(self, number: int) -> PullRequest:
        return self.pulls[number]

    def issue(self, number: int) -> Issue:
        """The plain issue ``number`` (KeyError for a PR or no such issue)."""
        return self.issues[number]

    def assignable(self, login: str) -> bool:
        """Whether ``login`` may be assigned: the owner or a collaborator with any role."""
        return login == self.owner or self.permissions.get(login, "none") != "none"

    def comments(self, number: int) -> list[IssueComment]:
        """Issue comments on PR/issue ``number``, oldest first."""
        with self.state.lock:
            return [c for c in self.issue_comments.values() if c.issue_number == number]

    def add_comment(
        self, number: int, body: str, *, user: str = "alice", app: tuple[int, str] | None = None
    ) -> IssueComment:
        """A comment on PR or issue ``number`` by ``user``, or by another App ``(id, slug)``
        (its bot user ``slug[bot]`` writes it, as a CI bot echoing a PR's description
        would)."""
        with self.state.lock:
            if app is not None:
                app_id, slug = app
                self.state.apps[app_id] = slug
                user = f"{slug}[bot]"
            now = self.state.tick()
            comment = IssueComment(
                self.state.next_id(), number, user, body, now, now, app_id=app and app[0]
            )
            self.issue_comments[comment.id] = comment
            return comment

    def check_runs(self, sha: str) -> list[CheckRun]:
        """Check runs on commit ``sha``, oldest first."""
        with self.state.lock:
            return [r for r in self.check_runs_by_id.values() if r.head_sha == sha]

    def reviews(self, number: int) -> list[Review]:
        """PR reviews (with their comments) on PR ``number``."""
        with self.state.lock:
            return [r for r in self.reviews_by_id.values() if r.pr_number == number]


class GitHubState:
    """Everything the fake knows: the App, its installations and tokens, and repositories."""

    def __init__(self, app_id: int, app_slug: str) -> None:
        self.lock = threading.RLock()
        self.app_id = app_id
        self.app_slug = app_slug
        self.apps: dict[int, str] = {app_id: app_slug}  # App id -> slug: this App and others
        self.repos: dict[str, Repo] = {}
        self.tokens: dict[str, tuple[int, datetime]] = {}  # token -> (installation, expiry)
        self.token_lifetime = timedelta(hours=1)  # of the installation tokens it hands out
        self.denied: dict[int, set[str]] = {}  # installation -> permissions it lacks
        self.webhook_url: str | None = None  # where the App's deliveries go
        self.hook_deliveries: list[HookDelivery] = []  # every attempt, oldest first
        # signed artifact-storage URLs handed out by downloads: token -> (artifact, expiry)
        self.blob_links: dict[str, tuple[Artifact, datetime]] = {}
        self._ids = itertools.count(1000)
        self._clock = EPOCH

    @property
    def bot_login(self) -> str:
        return f"{self.app_slug}[bot]"

    def next_id(self) -> int:
        with self.lock:
            return next(self._ids)

    def tick(self) -> datetime:
        """A strictly increasing timestamp for objects created without an explicit date."""
        with self.lock:
            self._clock = max(self._clock, datetime.now(UTC).replace(microsecond=0))
            self._clock += timedelta(seconds=1)
            return self._clock

    def add_repo(
        self,
        full_name: str,
        *,
        installation_id: int | None = 1,
        default_branch: str = "main",
        private: bool = False,
        files: dict[str, str] | None = None,
        date: datetime | None = None,
    ) -> Repo:
        """Create a repository whose default branch holds one initial commit of ``files``."""
        with self.lock:
            if full_name in self.repos:
                raise ValueError(f"repository {full_name} exists")
            repo = Repo(
                self,
                full_name,
                installation_id=installation_id,
                default_branch=default_branch,
                private=private,
            )
            self.repos[full_name] = repo
            initial = repo.add_commit(
                [], dict(files or {"README.md": "# ml\n"}), "Initial commit", date=date or EPOCH
            )
            repo.branches[default_branch] = initial.sha
            return repo

    def installations(self) -> set[int]:
        return {r.installation_id for r in self.repos.values() if r.installation_id is not None}
