"""The fields of GitHub's webhook payloads that the bot uses, on one lenient base.

Real deliveries carry more fields than these, and older ones fewer cosmetic ones: every
model ignores unknown fields and requires only what a handler reads.  A payload missing
a required field fails validation, and the delivery fails permanently (it would fail
the same way again).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Payload(BaseModel):
    """Base of every payload model: unknown fields ignored, values frozen."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class User(Payload):
    """A GitHub user or bot (``sender``, ``comment.user``)."""

    login: str
    type: str = "User"


class Repository(Payload):
    """A repository: ``owner/name``."""

    full_name: str


class Numbered(Payload):
    """Anything the bot knows only by number (a PR in ``check_run.pull_requests``)."""

    number: int


class PullRequestChanges(Payload):
    """What a ``pull_request`` ``edited`` delivery says changed: ``base`` is set when the PR
    was retargeted (``{"ref": {"from": …}, "sha": {"from": …}}``), else title or body."""

    base: dict[str, Any] | None = None


class PullRequestEvent(Payload):
    """A ``pull_request`` delivery."""

    action: str
    pull_request: Numbered
    repository: Repository
    changes: PullRequestChanges = PullRequestChanges()


class Issue(Payload):
    """The issue (or PR) a comment is on; ``pull_request`` is set for PRs."""

    number: int
    pull_request: dict[str, Any] | None = None


class Comment(Payload):
    """An issue comment."""

    id: int
    body: str | None = None
    user: User


class IssueCommentEvent(Payload):
    """An ``issue_comment`` delivery."""

    action: str
    issue: Issue
    comment: Comment
    repository: Repository
    sender: User


class EditedIssue(Payload):
    """An issue as an ``issues`` delivery carries it: who wrote it, its body now."""

    number: int
    body: str | None = None
    user: User
    pull_request: dict[str, Any] | None = None


class BodyChange(Payload):
    """The body an edit replaced (``changes.body.from``)."""

    before: str = Field(default="", alias="from")


class IssueChanges(Payload):
    """What an ``issues`` ``edited`` delivery says changed: ``body`` when the body did."""

    body: BodyChange | None = None


class IssuesEvent(Payload):
    """An ``issues`` delivery (``edited``: ``changes`` says what the edit replaced)."""

    action: str
    issue: EditedIssue
    repository: Repository
    sender: User
    changes: IssueChanges = IssueChanges()


class App(Payload):
    """The GitHub App that owns a check run."""

    id: int


class CheckRun(Payload):
    """A check run, with the PRs GitHub associates with it (none for fork branches)."""

    id: int
    name: str
    head_sha: str
    external_id: str | None = None
    pull_requests: tuple[Numbered, ...] = ()
    app: App | None = None


class CheckRunEvent(Payload):
    """A ``check_run`` delivery."""

    action: str
    check_run: CheckRun
    repository: Repository


class RunRepository(Payload):
    """A repository by id and name (a workflow run's ``repository``/``head_repository``)."""

    id: int
    full_name: str


class WorkflowRun(Payload):
    """A workflow run: which workflow, which trigger, which branch of which repository."""

    id: int
    event: str
    head_branch: str | None = None
    workflow_id: int
    path: str = ""  # the workflow file, sometimes with ``@ref``
    repository: RunRepository
    head_repository: RunRepository | None = None  # null when the fork is gone


class Workflow(Payload):
    """The workflow of a run: its id and file (``.github/workflows/nightly.yml``)."""

    id: int
    path: str


class WorkflowRunRepository(Payload):
    """The delivery's repository: its name, id and default branch."""

    id: int
    full_name: str
    default_branch: str


class WorkflowRunEvent(Payload):
    """A ``workflow_run`` delivery."""

    action: str
    workflow_run: WorkflowRun
    workflow: Workflow | None = None
    repository: WorkflowRunRepository


class RequestedAction(Payload):
    """The button pressed on a check run."""

    identifier: str


class RequestedActionEvent(CheckRunEvent):
    """A ``check_run`` ``requested_action`` delivery."""

    requested_action: RequestedAction
    sender: User


class Account(Payload):
    """The account an installation belongs to."""

    login: str = ""


class InstallationRef(Payload):
    """An installation, by id."""

    id: int
    account: Account = Account()


class Hook(Payload):
    """The webhook a ``ping`` is about."""

    type: str = ""
    app_id: int | None = None
    events: tuple[str, ...] = ()


class PingEvent(Payload):
    """A ``ping`` delivery."""

    zen: str = ""
    hook_id: int | None = None
    hook: Hook = Hook()


class InstallationEvent(Payload):
    """An ``installation`` delivery."""

    action: str
    installation: InstallationRef
    repositories: tuple[Repository, ...] | None = None


class InstallationRepositoriesEvent(Payload):
    """An ``installation_repositories`` delivery."""

    action: str
    installation: InstallationRef
    repositories_added: tuple[Repository, ...] = ()
    repositories_removed: tuple[Repository, ...] = ()


class ClosedPull(Payload):
    """The PR of a ``pull_request`` ``closed`` delivery: merged or not."""

    number: int
    merged: bool = False
    merged_at: datetime | None = None


class ClosedPullEvent(Payload):
    """A ``pull_request`` ``closed`` delivery."""

    pull_request: ClosedPull
    repository: Repository


class PushRepository(Payload):
    """The repository of a ``push``: its name, default branch and visibility."""

    full_name: str
    default_branch: str = "main"
    private: bool = False
    archived: bool = False
    html_url: str = ""


class PushCommit(Payload):
    """One commit of a ``push``: the paths it touched."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


class PushEvent(Payload):
    """A ``push`` delivery (GitHub lists at most 20 commits, ``commits`` may be cut)."""

    ref: str
    after: str = ""
    deleted: bool = False
    repository: PushRepository
    commits: tuple[PushCommit, ...] = ()


class Owned(Payload):
    """A repository of a ``repository`` delivery: its full and short name, its visibility."""

    full_name: str
    name: str
    private: bool = False
    archived: bool = False


class PreviousOwner(Payload):
    """The account a transferred repository came from: a user or an organization."""

    user: Account | None = None
    organization: Account | None = None


class OwnerChange(Payload):
    """``changes.owner`` of a ``repository`` ``transferred`` delivery."""

    previous: PreviousOwner = Field(default=PreviousOwner(), alias="from")


class RepositoryChanges(Payload):
    """What a ``repository`` delivery says changed (``owner`` for a transfer)."""

    owner: OwnerChange | None = None


class RepositoryEvent(Payload):
    """A ``repository`` delivery (privatized, deleted, transferred, archived …)."""

    action: str
    repository: Owned
    changes: RepositoryChanges = RepositoryChanges()

    def former_name(self) -> str | None:
        """A transferred repository's ``owner/name`` before the transfer; None when the
        delivery does not say."""
        previous = self.changes.owner.previous if self.changes.owner else None
        account = previous and (previous.organization or previous.user)
        return f"{account.login}/{self.repository.name}" if account and account.login else None
