"""End to end: the dashboard's checkboxes, ticked by a maintainer, a reader, the App itself,
and on an issue that only looks like the dashboard.

The real App (uvicorn + worker + store) against the GitHub fake and fake W&B
(``tests/drift_world.py``), on SQLite and on PostgreSQL + Redis; the nightly is the seed's
(``tests/test_drift_e2e.py``'s story: ``TRAIN_ACC_MIN_VALUE`` failing since the drop).  The
dashboard issue is made here as the App's writer would leave it: an issue written by the App
(the fake's state) whose number and body are in the store's record; its body is a short one
holding the boxes.  A tick is GitHub's ``issues`` ``edited`` delivery, signed, with the issue
as the fake serves it and ``changes.body.from``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import select

from bot.adapters.store import dashboards, deliveries
from bot.adapters.store.audit import AuditEntry
from bot.adapters.store.dashboards import Dashboard
from bot.core.dashboard.body import DASHBOARD_MARKER, DASHBOARD_TITLE, dashboard_fingerprint
from bot.core.dashboard.boxes import Box
from bot.core.render.markdown import ZWSP
from tests.drift_world import (
    INSTALLATION,
    SCRIPT,
    Nightly,
    World,
    issues_by_app,
    lower_rule,
    open_world,
)
from tests.fakes.github_shapes import WEB
from tests.fakes.github_state import Issue, Repo
from tests.live import SECRET, post_and_wait
from tests.test_dashboard_e2e import lines_naming, section, seed_repository, the_dashboard
from tests.test_dashboard_e2e import run as night
from tests.test_drift_e2e import (
    DECIMALS,
    DROP,
    LITERAL,
    MIN_FAILURES,
    PER_REGIME,
    REGIMES,
    TITLE,
    VARIABLE,
    Story,
    arrange,
)
from tests.webhooks import fixture, new_delivery_id, signed

pytestmark = pytest.mark.servers

GATE_BOX = Box(action="rebaseline-gate", file=SCRIPT, gate=VARIABLE)
FILE_BOX = Box(action="rebaseline-file", file=SCRIPT)
CHECK_BOX = Box(action="check")
GONE_BOX = Box(action="rebaseline-gate", file=SCRIPT, gate="REMOVED_MIN_VALUE")


def dashboard_body(*boxes: Box) -> str:
    """A dashboard body as the App writes it: marker, intro, a section of boxes."""
    lines = [f"- [ ] {box.marker} {box.action} {box.gate or box.file}" for box in boxes]
    return "\n".join(
        [
            DASHBOARD_MARKER,
            "The gates of this repository's threshold files. Tick a box to have threshold-bot act.",
            "",
            "## Needs attention",
            "",
            *lines,
            "",
        ]
    )


def tick(body: str, box: Box) -> str:
    """``body`` with ``box`` ticked, as GitHub's task list does."""
    ticked = body.replace(f"- [ ] {box.marker}", f"- [x] {box.marker}")
    assert ticked != body
    return ticked


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, module_backends: dict[str, str]
) -> Iterator[World]:
    with open_world(tmp_path_factory.mktemp("boxes"), **module_backends) as running:
        yield running


@dataclass
class Board:
    """A drifting repository and its dashboard issue."""

    story: Story
    issue: Issue
    body: str  # as the App wrote it (the record's)

    @property
    def repo(self) -> Repo:
        return self.story.repo


def drifting(world: World, name: str, failing: int = MIN_FAILURES) -> Story:
    """``name``: two passing regimes, then ``failing`` failing runs, a round after each."""
    story = arrange(world, name, REGIMES[-2:])
    story.first_failing = len(story.nightly.values)
    for _night in range(failing):
        story.nightly.run(DROP)
        world.watch()
    return story


def board(world: World, story: Story, *boxes: Box) -> Board:
    """The dashboard issue of ``story``'s repository, written by the App and recorded."""
    body = dashboard_body(*boxes)
    issue = story.repo.add_issue(DASHBOARD_TITLE, body, by_app=True)
    sessions, repo = world.runtime.sessions, story.repo.full_name
    held = dashboards.claim(sessions, repo=repo, installation_id=INSTALLATION, owner="t", seconds=9)
    assert held is not None
    assert dashboards.save(sessions, Dashboard(repo, INSTALLATION, issue.number, body), "t")
    dashboards.release(sessions, repo, "t")
    return Board(story, issue, body)


def edited(
    world: World, repo: Repo, issue: Issue, user: str, body: str, delivery_id: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """``user`` edits ``issue``'s body to ``body`` on GitHub: GitHub's signed delivery."""
    with repo.state.lock:
        before, issue.body = issue.body, body
        issue.updated_at = repo.state.tick()
        shown = world.github.shapes.issue(repo, issue)
    payload = fixture("issue_comment.created.on-issue")
    del payload["comment"]
    payload.update(
        action="edited",
        issue=shown,
        changes={"body": {"from": before}},
        sender=world.github.shapes.user(user),
        installation={"id": INSTALLATION},
    )
    payload["repository"].update(
        full_name=repo.full_name,
        name=repo.name,
        default_branch=repo.default_branch,
        private=repo.private,
    )
    payload["repository"]["owner"]["login"] = repo.owner
    return signed("issues", payload, SECRET, delivery_id)


def deliver(world: World, signed_delivery: tuple[bytes, dict[str, str]]) -> None:
    body, headers = signed_delivery
    found = post_and_wait(world.url, world.runtime.sessions, body, headers, what="issues.edited")
    assert (found.status, found.last_error) == ("done", None), found.last_error


def record(world: World, repo: Repo) -> Dashboard:
    found = dashboards.get(world.runtime.sessions, repo.full_name)
    assert found is not None
    return found


def audit_of(world: World, repo: Repo) -> list[tuple[str, str, str]]:
    """The dashboard's audit entries of ``repo``: (actor, outcome, message), oldest first."""
    with world.runtime.sessions() as session:
        rows = session.scalars(
            select(AuditEntry)
            .where(AuditEntry.repo == repo.full_name, AuditEntry.action == "dashboard")
            .order_by(AuditEntry.id)
        ).all()
        return [(r.actor, r.outcome, r.message) for r in rows]


def shown_note(note: str) -> str:
    """A note as the body shows it: the login's mention defused (no one is pinged)."""
    return "> " + note.replace("@", f"@{ZWSP}", 1)


# --------------------------------------------------------------------------- tests
def test_a_maintainer_ticking_rebaseline_gets_one_pull_request_and_the_box_unticked(
    world: World,
) -> None:
    story = drifting(world, "octo/ticked")
    dash = board(world, story, GATE_BOX, CHECK_BOX)
    repo = dash.repo
    pulls, main_text = set(repo.pulls), repo.file_at("main", SCRIPT)
    assert main_text is not None
    value = lower_rule(story.loss()[story.first_failing - PER_REGIME :], DECIMALS)
    delivery = edited(world, repo, dash.issue, "alice", tick(dash.body, GATE_BOX))

    deliver(world, delivery)

    (number,) = set(repo.pulls) - pulls
    pr = repo.pr(number)
    (changed,) = repo.pr_files(pr)
    assert changed.path == SCRIPT
    removed = [ln[1:] for ln in changed.patch.splitlines() if ln.startswith("-")]
    added = [ln[1:] for ln in changed.patch.splitlines() if ln.startswith("+")]
    assert removed == [f"{VARIABLE}={LITERAL}"]
    assert added[-1] == f"{VARIABLE}={value}"
    note = f"@alice asked to rebaseline {VARIABLE} in {SCRIPT}: opened #{number}"
    body = repo.issue(dash.issue.number).body
    assert f"- [ ] {GATE_BOX.marker}" in body and "[x]" not in body  # unticked
    assert shown_note(note).replace("_", "\\_") in body.splitlines()
    assert record(world, repo).notes == (note,)
    assert record(world, repo).body == body  # what the App wrote, to revert others' edits
    assert audit_of(world, repo) == [("alice", "opened", GATE_BOX.key)]

    # the same delivery again, and the same edit delivered again under a new id: acted once
    httpx.post(f"{world.url}/webhook", content=delivery[0], headers=delivery[1], timeout=30)
    body_again, headers = delivery
    deliver(world, (body_again, {**headers, "X-GitHub-Delivery": new_delivery_id()}))

    assert set(repo.pulls) == pulls | {number}
    assert repo.issue(dash.issue.number).body == body
    assert record(world, repo).notes == (note,)
    assert audit_of(world, repo) == [("alice", "opened", GATE_BOX.key)]


def test_a_reader_ticking_a_box_is_reverted_and_nothing_is_done(world: World) -> None:
    story = drifting(world, "octo/reader")
    dash = board(world, story, GATE_BOX, FILE_BOX, CHECK_BOX)
    repo = dash.repo
    pulls, branches = set(repo.pulls), set(repo.branches)
    ticked = tick(tick(dash.body, GATE_BOX), FILE_BOX) + "\nbob was here\n"

    deliver(world, edited(world, repo, dash.issue, "bob", ticked))

    assert repo.issue(dash.issue.number).body == dash.body
    assert (set(repo.pulls), set(repo.branches)) == (pulls, branches)
    assert record(world, repo) == Dashboard(
        repo.full_name, INSTALLATION, dash.issue.number, dash.body
    )
    assert audit_of(world, repo) == [("bob", "reverted", "revert")]


def test_check_again_now_runs_the_repositorys_watch(world: World) -> None:
    story = drifting(world, "octo/check", failing=MIN_FAILURES - 1)
    assert issues_by_app(story.repo, TITLE) == []  # two failures: no drift issue yet
    story.nightly.run(DROP)  # the third, with no round after it
    dash = board(world, story, GATE_BOX, CHECK_BOX)
    repo = dash.repo

    deliver(world, edited(world, repo, dash.issue, "alice", tick(dash.body, CHECK_BOX)))

    (opened,) = issues_by_app(repo, TITLE)  # the watch ran: the third failure opens it
    assert opened.state == "open"
    body = repo.issue(dash.issue.number).body
    assert "[x]" not in body
    (note,) = record(world, repo).notes
    assert (
        note == "@alice asked to check again now: done, 1 threshold file checked, 1 item(s) written"
    )
    assert shown_note(note) in body.splitlines()
    assert audit_of(world, repo) == [("alice", "done", CHECK_BOX.key)]


def test_a_box_of_a_gate_that_is_gone_says_so(world: World) -> None:
    story = drifting(world, "octo/gone")
    dash = board(world, story, GONE_BOX, CHECK_BOX)
    repo = dash.repo
    pulls = set(repo.pulls)

    deliver(world, edited(world, repo, dash.issue, "alice", tick(dash.body, GONE_BOX)))

    assert set(repo.pulls) == pulls
    assert record(world, repo).notes == ("@alice ticked a box: no such gate any more",)
    assert "[x]" not in repo.issue(dash.issue.number).body
    assert audit_of(world, repo) == [("alice", "gone", GONE_BOX.key)]


def test_an_edit_by_the_app_itself_is_ignored(world: World) -> None:
    story = drifting(world, "octo/own")
    dash = board(world, story, GATE_BOX, CHECK_BOX)
    repo = dash.repo
    pulls = set(repo.pulls)
    ticked = tick(dash.body, GATE_BOX)
    body, headers = edited(world, repo, dash.issue, repo.state.bot_login, ticked)

    answer = httpx.post(f"{world.url}/webhook", content=body, headers=headers, timeout=30)

    assert answer.json()["status"] == "ignored"
    stored = deliveries.get(world.runtime.sessions, headers["X-GitHub-Delivery"])
    assert stored is not None and stored.status == "ignored"
    assert repo.issue(dash.issue.number).body == ticked  # neither unticked nor reverted
    assert set(repo.pulls) == pulls
    assert record(world, repo).notes == () and audit_of(world, repo) == []


def test_an_issue_that_only_looks_like_the_dashboard_is_ignored(world: World) -> None:
    story = drifting(world, "octo/lookalike")
    dash = board(world, story, GATE_BOX, CHECK_BOX)
    repo = dash.repo
    pulls = set(repo.pulls)
    fake = repo.add_issue(DASHBOARD_TITLE, dash.body, user="mallory")  # marker and boxes
    ticked = tick(dash.body, GATE_BOX)

    deliver(world, edited(world, repo, fake, "alice", ticked))
    deliver(world, edited(world, repo, fake, "mallory", ticked + "\n"))

    assert repo.issue(fake.number).body == ticked + "\n"  # not the App's: left alone
    assert repo.issue(dash.issue.number).body == dash.body
    assert set(repo.pulls) == pulls
    assert record(world, repo).notes == () and audit_of(world, repo) == []


def test_an_edit_while_the_dashboard_is_being_written_waits_for_the_lease(world: World) -> None:
    story = drifting(world, "octo/waits")
    dash = board(world, story, GATE_BOX, CHECK_BOX)
    repo, sessions = dash.repo, world.runtime.sessions
    pulls = set(repo.pulls)
    seconds = world.settings.lease_seconds
    held = dashboards.claim(
        sessions, repo=repo.full_name, installation_id=INSTALLATION, owner="writer", seconds=seconds
    )
    assert held is not None  # a round writing the dashboard, which then dies: never released
    started = time.monotonic()

    body, headers = edited(world, repo, dash.issue, "alice", tick(dash.body, GATE_BOX))
    found = post_and_wait(world.url, sessions, body, headers, what="issues.edited")

    assert found.status == "done" and found.attempts > 1  # retried while the lease was held
    assert time.monotonic() - started >= seconds * 0.9  # it waited for the lease to expire
    (number,) = set(repo.pulls) - pulls
    assert record(world, repo).notes == (
        f"@alice asked to rebaseline {VARIABLE} in {SCRIPT}: opened #{number}",
    )
    assert "[x]" not in repo.issue(dash.issue.number).body


def test_rebaseline_every_failing_gate_of_a_file_opens_its_pull_request(world: World) -> None:
    story = drifting(world, "octo/wholefile")
    dash = board(world, story, GATE_BOX, FILE_BOX, CHECK_BOX)
    repo = dash.repo
    pulls = set(repo.pulls)
    value = lower_rule(story.loss()[story.first_failing - PER_REGIME :], DECIMALS)

    deliver(world, edited(world, repo, dash.issue, "alice", tick(dash.body, FILE_BOX)))

    (number,) = set(repo.pulls) - pulls
    (changed,) = repo.pr_files(repo.pr(number))
    added = [ln[1:] for ln in changed.patch.splitlines() if ln.startswith("+")]
    assert added[-1] == f"{VARIABLE}={value}"  # the one failing gate of the file
    assert record(world, repo).notes == (
        f"@alice asked to rebaseline every failing gate of {SCRIPT}: opened #{number}",
    )
    body = repo.issue(dash.issue.number).body
    assert "[x]" not in body and f"- [ ] {GATE_BOX.marker}" in body  # the gate's box: untouched
    assert audit_of(world, repo) == [("alice", "opened", FILE_BOX.key)]


def test_a_failed_rebaseline_is_retried_then_said_in_its_note(world: World) -> None:
    story = drifting(world, "octo/fails")
    dash = board(world, story, GATE_BOX, CHECK_BOX)
    repo = dash.repo
    pulls = set(repo.pulls)
    refs = rf"^/repos/{repo.full_name}/git/refs$"
    world.github.fail_next("POST", refs, 502, times=2)  # the client tries twice: a retry
    body, headers = edited(world, repo, dash.issue, "alice", tick(dash.body, GATE_BOX))

    found = post_and_wait(world.url, world.runtime.sessions, body, headers, what="issues.edited")

    assert found.status == "done" and found.attempts == 2
    (number,) = set(repo.pulls) - pulls
    assert record(world, repo).notes[0].endswith(f": opened #{number}")

    never = world.settings.max_attempts
    world.github.fail_next("POST", rf"^/repos/{repo.full_name}/pulls$", 403, times=never)
    ticked = tick(repo.issue(dash.issue.number).body, CHECK_BOX)
    ticked = tick(ticked, GATE_BOX)
    repo.close_pr(number)  # so that a new branch and PR are wanted
    deliver(world, edited(world, repo, dash.issue, "alice", ticked))

    assert set(repo.pulls) == pulls | {number}
    notes = record(world, repo).notes
    assert notes[1] == (
        f"@alice asked to rebaseline {VARIABLE} in {SCRIPT}: failed: GitHubForbidden"
    )
    assert notes[0].startswith("@alice asked to check again now: done")
    shown = repo.issue(dash.issue.number).body
    assert "[x]" not in shown and "failed: GitHubForbidden" in shown
    assert [outcome for _actor, outcome, _key in audit_of(world, repo)] == [
        "opened",
        "failed",
        "done",
    ]


# ---------------------------------------------------------------- the dashboard after a box


def with_dashboard(
    world: World, name: str, failing: int = MIN_FAILURES
) -> tuple[Repo, Nightly, Issue]:
    """The seed-like repository ``name`` (``dashboard: on``) after ``failing`` failing nights,
    a round after each: its dashboard as the rounds wrote it."""
    repo, nightly = seed_repository(world, name)
    for _night in range(failing):
        night(nightly)
        world.watch()
    return repo, nightly, the_dashboard(repo)


def gate_line(body: str, heading: str) -> list[str]:
    """The lines of ``body``'s section ``heading`` that name ``VARIABLE``'s gate."""
    return lines_naming(section(body, heading), VARIABLE) if heading in body else []


def test_a_ticked_gate_box_puts_its_pull_request_on_the_dashboard_without_a_round(
    world: World,
) -> None:
    repo, _nightly, issue = with_dashboard(world, "octo/shown")
    (item,) = issues_by_app(repo, TITLE)
    (line,) = gate_line(issue.body, "## Needs attention")
    assert f"/issues/{item.number})" in line  # the drift issue, before
    pulls = set(repo.pulls)
    patch = f"/repos/{repo.full_name}/issues/{issue.number}"

    delivery = edited(world, repo, issue, "alice", tick(issue.body, GATE_BOX))
    deliver(world, delivery)

    (number,) = set(repo.pulls) - pulls
    body = repo.issue(issue.number).body
    (line,) = gate_line(body, "## Needs attention")
    assert f"]({WEB}/{repo.full_name}/pull/{number})" in line  # the PR, on the gate's line
    assert "[x]" not in body  # unticked
    assert record(world, repo).notes[0].endswith(f": opened #{number}")
    assert "asked to rebaseline" in body  # its note, kept by the rewrite
    stored = record(world, repo)
    assert stored.body == body and stored.fingerprint == dashboard_fingerprint(body)
    assert len(issues_by_app(repo, DASHBOARD_TITLE)) == 1

    # the same edit delivered again (a new delivery id): nothing done, nothing written
    before = len(world.github.requests("PATCH", patch))
    deliver(world, (delivery[0], {**delivery[1], "X-GitHub-Delivery": new_delivery_id()}))
    assert set(repo.pulls) == pulls | {number}
    assert len(world.github.requests("PATCH", patch)) == before
    assert repo.issue(issue.number).body == body


def test_check_again_now_shows_the_fresh_evaluation_on_the_dashboard(world: World) -> None:
    repo, nightly, issue = with_dashboard(world, "octo/recheck", failing=MIN_FAILURES - 1)
    assert not any("failing since" in ln for ln in gate_line(issue.body, "## Needs attention"))
    night(nightly)  # the third failure, with no round after it

    deliver(world, edited(world, repo, issue, "alice", tick(issue.body, CHECK_BOX)))

    body = repo.issue(issue.number).body
    (line,) = gate_line(body, "## Needs attention")
    assert "failing since" in line  # the gate moved section: it drifts now
    (item,) = issues_by_app(repo, TITLE)
    assert f"/issues/{item.number})" in line
    assert "[x]" not in body and "asked to check again now: done" in body
    assert record(world, repo).fingerprint == dashboard_fingerprint(body)
