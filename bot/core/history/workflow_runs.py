"""Which GitHub Actions workflow runs belong to an ``actions`` source's history, and as what.

Only the default branch's own runs count (``counts``): the run's branch is the source's
(``spec.branch``, else the repository's default branch), its event one of ``spec.events``
(default schedule / push / workflow_dispatch) and its head repository the repository
itself.  A pull request, from a fork or not, can trigger the workflow and upload an
artifact of the same name: its runs fail at least the event test (``pull_request*``), a
fork's also the head repository test, so none of them enters the history.

``run_state`` maps a run's status and conclusion to a history state: a failed nightly is a
failed run (its metrics are still read), one not yet completed is running.

``bound_to`` reads a source for the repository reviewed: the App reads only that
repository's artifacts, never those of a repository a config names.
"""

from __future__ import annotations

from bot.core.models import RunState, SourceSpec

_CONCLUSIONS: dict[str, RunState] = {
    "success": "finished",
    "failure": "failed",
    "cancelled": "killed",
    "timed_out": "crashed",
}


def counts(
    *,
    branch: str | None,
    event: str,
    head_repo: str | None,
    want_branch: str,
    events: tuple[str, ...],
    repo: str,
) -> bool:
    """Whether a run of ``repo``'s workflow enters its history (see the module docstring);
    repository names compare case-insensitively, as GitHub's do."""
    return (
        branch == want_branch
        and event in events
        and head_repo is not None
        and head_repo.lower() == repo.lower()
    )


def run_state(status: str, conclusion: str | None) -> RunState:
    """The history state of a run with GitHub's ``status`` and ``conclusion``."""
    if status != "completed":
        return "running"
    return _CONCLUSIONS.get(conclusion or "", "crashed")


def bound_to(spec: SourceSpec, repo: str) -> SourceSpec | None:
    """``spec`` read from ``repo`` (its ``repo`` set, so two repositories' nightlies of one
    name are two sources); None when it names another repository (never read)."""
    if spec.repo and spec.repo.lower() != repo.lower():
        return None
    return spec.model_copy(update={"repo": repo})
