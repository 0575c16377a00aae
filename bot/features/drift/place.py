"""What the drift watch's acting modules share: where a repository's items live, and
what was done for one file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from sqlalchemy.orm import Session, sessionmaker

from bot.adapters.github.api import GitHubAPI
from bot.core.models import ThresholdFile
from bot.features.drift.evaluate import FileDrift

Action = Literal[
    "opened", "updated", "closed", "unchanged", "skipped", "busy", "forbidden", "dismissed"
]
NO_ISSUES = "the App may not open issues here (no `issues` permission)"


@dataclass(frozen=True)
class Acted:
    """What ``act`` did for one file."""

    file: str
    action: Action
    number: int | None = None  # the issue or PR written
    detail: str = ""
    # the item record's stamp as ``act`` let go of it (``bot.adapters.store.drift.stamps``;
    # None: not claimed, or the lease was lost)
    stamp: datetime | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Place:
    """Where a repository's items live, and how to reach them."""

    gh: GitHubAPI
    sessions: sessionmaker[Session]
    installation_id: int
    repo: str
    branch: str  # the default branch
    sha: str  # its head, where the files were read
    files: Mapping[str, ThresholdFile]
    texts: Mapping[str, str]
    owner: str  # this worker's lease owner id
    lease_seconds: float
    review_pull: Callable[[int], None]  # review a PR the watch opened (its comment and check)


def dismissal(drift: FileDrift) -> str:
    """What a maintainer dismissed by closing an item: its drifting gates and their onsets."""
    report = drift.report
    shown = (
        []
        if report is None
        else [(g.gate.name, (g.change.at if g.change else g.since)) for g in report.drifting]
    )
    return hashlib.sha256(json.dumps(shown, default=str).encode()).hexdigest()[:16]
