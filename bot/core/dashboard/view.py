"""What a repository's threshold dashboard shows, as plain data.

The shell (``bot.features.dashboard``) builds a ``RepoView`` from the drift watch's
evaluation of every threshold file at the default branch's head and from the store (open
drift items, merged rebaseline PRs); ``bot.core.dashboard.sections`` places each gate and
``bot.core.dashboard.body`` renders it.  Nothing here reads the clock: a view holds every
date it shows, so the same view always renders the same body.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from bot.core.analysis.drift import DriftReport
from bot.core.models import Frozen, Gate, UnboundVariable

BODY_LIMIT = 65536
"""GitHub's limit on an issue body, in characters: the dashboard's body stays within it, and
its checkboxes are never read past it."""

Section = Literal["attention", "flaky", "looser", "healthy"]
SECTIONS: tuple[Section, ...] = ("attention", "flaky", "looser", "healthy")  # most urgent first


class ItemLink(Frozen):
    """The open drift item of a file: its issue, or its rebaseline PR."""

    number: int
    is_pull: bool = False


class Rebaselined(Frozen):
    """A file's last rebaseline by the App: its PR, and when it was merged."""

    pull: int
    at: datetime


class FileView(Frozen):
    """One threshold file the App reads at the head, and its evaluation."""

    path: str
    source: str = ""  # the history it reads, described (``SourceSpec.describe()``); "": none
    gates: tuple[Gate, ...] = ()  # as read at the head
    hints: tuple[UnboundVariable, ...] = ()  # literals it did not bind
    report: DriftReport | None = None  # None: not evaluated, ``problem`` says why
    problem: str = ""
    item: ItemLink | None = None  # its open drift issue or PR
    rebaselined: Rebaselined | None = None


class RepoView(Frozen):
    """Everything one repository's dashboard shows."""

    repo: str  # owner/name
    branch: str  # the default branch
    sha: str  # its head, where the files were read
    url: str = ""  # the repository's web address (``html_url``): links to files and PRs
    files: tuple[FileView, ...] = ()
    report_url: str = ""  # the page with the whole dashboard ("": not configured)
    notes: tuple[str, ...] = ()  # what was asked through its checkboxes, newest first
