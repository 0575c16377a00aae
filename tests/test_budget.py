"""``bot.core.budget``: shares charged to their parents, working time, and the time limit
seen by ``bot.core.deadline``'s checks (nested inside a job's own limit)."""

from __future__ import annotations

import time

import pytest

from bot.core import deadline
from bot.core.budget import Budget, BudgetSpent, Limits


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_childs_spending_counts_against_its_parent_and_the_first_limit_reached_is_named() -> None:
    clock = Clock()
    installation = Budget("installation 7", Limits(seconds=10, bytes=1000), clock=clock)
    first = installation.child("repository a", Limits(bytes=600))
    first.charge(files=1, bytes=500)
    assert first.spent() is None and (installation.files, installation.bytes) == (1, 500)
    first.charge(bytes=100)
    over = first.spent()
    assert over is not None and (over.scope, over.limit) == ("repository a", "bytes")
    assert installation.spent() is None  # 600 of its 1000

    second = installation.child("repository b", Limits(bytes=600))
    second.charge(bytes=400)  # its own 400 of 600, but the installation's 1000 of 1000
    over = second.spent()
    assert over is not None and (over.scope, over.limit) == ("installation 7", "bytes")
    assert over.reason == "its 1000 bytes"


def test_time_is_what_is_spent_working_not_what_passes_between_turns() -> None:
    clock = Clock()
    budget = Budget("repository a", Limits(seconds=5), clock=clock)
    with budget.counted():
        clock.now += 3
    clock.now += 60  # another installation's turn
    assert budget.seconds == 3 and budget.spent() is None
    assert budget.seconds_left() == 2
    with budget.counted():
        clock.now += 2
    over = budget.spent()
    assert over is not None and (over.limit, over.reason) == ("seconds", "its 5 s")


def test_enforced_stops_the_work_at_its_next_check_with_the_budget_that_ran_out() -> None:
    installation = Budget("installation 7", Limits(seconds=0.05))
    repository = installation.child("repository a", Limits(seconds=10))
    with pytest.raises(BudgetSpent) as stopped, repository.enforced():
        time.sleep(0.1)
        deadline.check("reading ci/nightly.sh")
    assert (stopped.value.scope, stopped.value.what) == ("installation 7", "reading ci/nightly.sh")
    assert installation.seconds >= 0.1 and repository.seconds == installation.seconds


def test_a_jobs_own_limit_still_holds_inside_a_budget() -> None:
    budget = Budget("repository a", Limits(seconds=10))
    with (
        pytest.raises(deadline.JobTimeout, match="JOB_TIMEOUT_SECONDS"),
        deadline.within(0.02),
        budget.enforced(),
    ):
        time.sleep(0.05)
        deadline.check("segmenting eval/acc")
