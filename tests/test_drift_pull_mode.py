"""``drift: {mode: pull_request}``: the watch writes the rebaseline PR itself, and keeps it up
to date, reviewed and, once the gate passes again, closed.  Then the kill -9 judgement: a
``threshold-bot watch`` process killed while GitHub holds the answer to the commit or to the
PR's creation leaves, after a restart, one branch, one PR and one record.

The world (FakeGitHub, real SQLite, a history file in the repository) is the one of
``tests/test_drift_watch.py``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.adapters.store import drift as records
from bot.adapters.store import installations
from bot.adapters.store.db import init_db, make_engine
from bot.core.config import parse_config
from bot.core.render.drift import branch_name, drift_marker, pull_title
from bot.core.render.review import MARKER
from bot.features.drift.items import CLOSED_MARKER
from tests.browser_harness import markdown_html
from tests.conftest import ROOT
from tests.drift_world import lower_rule
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import PullRequest, Repo
from tests.test_drift_watch import (
    ACC,
    ACC_LITERAL,
    CONFIG,
    HEALTHY,
    LOSS,
    SCRIPT,
    Runs,
    World,
    actions,
    drifted,
    open_world,
    script,
)

pytestmark = pytest.mark.servers

BRANCH = "threshold-bot/rebaseline/ci/nightly.sh"
MODE = "mode: pull_request"
BIN = Path(sys.executable).with_name("threshold-bot")


def rule_value(runs: Runs, since: int) -> str:
    """The rule's new ``ACC_MIN_VALUE``: 5% under the minimum of the runs since the drop."""
    return lower_rule(runs.metric(ACC, since=since), decimals=2)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    yield from open_world(tmp_path, monkeypatch)


def check_pull(repo: Repo, pr: PullRequest, value: str) -> None:
    """The PR is one commit on top of the default branch that changes only the literal of
    ``ACC_MIN_VALUE`` to ``value``, with the provenance comment; its own review is green."""
    main = repo.head(repo.default_branch)
    head = repo.objects[pr.head_sha]
    assert (pr.head_ref, pr.base_ref, pr.head_repo) == (BRANCH, "main", repo)
    assert head.parents == [main]
    before, after = repo.objects[main].files, head.files
    assert {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)} == {SCRIPT}
    old, new = before[SCRIPT].splitlines(), after[SCRIPT].splitlines()
    removed = [line for line in old if line not in new]
    added = [line for line in new if line not in old]
    assert removed == [f"ACC_MIN_VALUE={ACC_LITERAL}"]
    assert [line for line in added if not line.startswith("#")] == [f"ACC_MIN_VALUE={value}"]
    assert added[0].startswith("# threshold-bot: rebaselined")
    checks = [(r.name, r.status, r.conclusion) for r in repo.check_runs(pr.head_sha)]
    assert checks == [("threshold-bot", "completed", "success")]


def test_pull_request_mode_opens_updates_and_closes_the_rebaseline_pr(world: World) -> None:
    runs = drifted()
    repo = world.repo("octo/pulls", runs, drift=MODE)
    assert branch_name(SCRIPT) == BRANCH

    opened = world.round()
    (pr,) = repo.pulls.values()
    assert actions(opened) == [(SCRIPT, "opened")] and opened.acted[0].number == pr.number
    first = rule_value(runs, since=30)
    check_pull(repo, pr, first)
    assert pr.title == pull_title(SCRIPT) and pr.body.startswith(drift_marker(SCRIPT))
    assert f"**{first}**" in pr.body and "Merge this PR" in pr.body
    assert repo.issues == {}
    item = records.get(world.sessions, repo.full_name, SCRIPT)
    assert item is not None
    assert (item.state, item.mode, item.pull, item.branch) == (
        "open",
        "pull_request",
        pr.number,
        BRANCH,
    )
    assert item.values == {"ACC_MIN_VALUE": first}

    runs.add({ACC: 0.40, LOSS: 1.00}, 3)  # lower still: the rule's value moves
    world.night(repo, runs)
    updated = world.round()
    second = rule_value(runs, since=30)
    assert second != first
    assert actions(updated) == [(SCRIPT, "updated")]
    assert list(repo.pulls) == [pr.number] and pr.state == "open"
    check_pull(repo, pr, second)  # still one commit, now on top of the new head of main
    assert f"**{second}**" in pr.body and f"**{first}**" not in pr.body
    item = records.get(world.sessions, repo.full_name, SCRIPT)
    assert item is not None and item.values == {"ACC_MIN_VALUE": second}

    runs.add(HEALTHY, 10)  # the gate passes again
    world.night(repo, runs)
    assert actions(world.round()) == [(SCRIPT, "closed")]
    assert pr.state == "closed" and not pr.merged
    (comment,) = repo.comments(pr.number)[-1:]
    assert CLOSED_MARKER in comment.body and comment.app_id == repo.state.app_id
    item = records.get(world.sessions, repo.full_name, SCRIPT)
    assert item is not None and (item.state, item.pull) == ("idle", pr.number)
    assert len(repo.pulls) == 1


def test_a_rebaseline_pr_a_maintainer_closed_is_not_opened_again(world: World) -> None:
    runs = drifted()
    repo = world.repo("octo/closedpr", runs, drift=MODE)
    assert actions(world.round()) == [(SCRIPT, "opened")]
    (pr,) = repo.pulls.values()
    repo.close_pr(pr.number)  # closed by hand; its webhook never reaches the App

    runs.add({ACC: 0.40, LOSS: 1.00}, 3)  # lower still: the item would be rewritten
    world.night(repo, runs)
    assert actions(world.round()) == [(SCRIPT, "dismissed")]
    runs.add({ACC: 0.40, LOSS: 1.00})
    world.night(repo, runs)
    assert actions(world.round()) == [(SCRIPT, "unchanged")]

    assert list(repo.pulls) == [pr.number] and pr.state == "closed"
    item = records.get(world.sessions, repo.full_name, SCRIPT)
    assert item is not None and item.state == "idle" and item.dismissed


def test_the_rebaseline_prs_review_shows_its_drift_window_note_with_code_not_backslashes(
    world: World,
) -> None:
    runs = drifted()
    repo = world.repo("octo/note", runs, drift=MODE)
    assert actions(world.round()) == [(SCRIPT, "opened")]
    (pr,) = repo.pulls.values()
    (review,) = [c for c in repo.comments(pr.number) if c.body.startswith(MARKER)]
    window = parse_config(repo.file_at("main", CONFIG) or "").drift.window
    assert "\\`" not in review.body  # no backslash-escaped backtick anywhere
    html = markdown_html(review.body)  # as GitHub shows it: CommonMark, tables, raw HTML
    (note,) = [line for line in html.splitlines() if "opened by the drift watch" in line]
    assert "<code>drift.window</code>" in note and "`" not in note and f"({window})" in note


# ----- kill -9 ----------------------------------------------------------------------------------

LEASE = 2.0


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as running:
        yield running
        running.check()


def watch_env(fake: FakeGitHub, tmp_path: Path) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "TMPDIR", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    assert fake.private_key is not None
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "APP_ID": str(fake.app_id),
            "PRIVATE_KEY": fake.private_key,
            "GITHUB_API_URL": fake.base_url,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}",
            "LEASE_SECONDS": str(LEASE),
            "BOT_LOGIN": fake.state.bot_login,
            "MAX_THRESHOLD_FILE_BYTES": "100000",
        }
    )
    return env


def watch_command(repo: Repo) -> list[str]:
    return [str(BIN), "watch", "--repo", repo.full_name]


@pytest.mark.parametrize(
    ("method", "path"),
    [("PUT", "/contents/"), ("POST", "/pulls$")],
    ids=["killed-while-committing", "killed-while-opening-the-pr"],
)
def test_kill_9_while_github_answers_then_restart_leaves_one_branch_pr_and_record(
    fake: FakeGitHub, tmp_path: Path, method: str, path: str
) -> None:
    runs = drifted()
    repo = fake.add_repo(
        "octo/kill",
        installation_id=7,
        files={
            SCRIPT: script(),
            "ci/history/runs.jsonl": runs.text(),
            ".github/threshold-bot.yml": (
                "sources:\n  runs:\n    kind: file\n    path: ci/history/runs.jsonl\n"
                f"default_source: runs\ndrift:\n  {MODE}\n"
            ),
        },
    )
    env = watch_env(fake, tmp_path)
    sessions = init_db(make_engine(env["DATABASE_URL"]))
    installations.upsert(sessions, 7, "octo", "active")  # as the installation event left it
    hold = fake.hold_next(method, f"^/repos/{repo.full_name}{path}", 60)
    log = (tmp_path / "first.log").open("wb")
    first = subprocess.Popen(
        watch_command(repo), env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        assert hold.reached.wait(60), (tmp_path / "first.log").read_text()
    finally:
        first.send_signal(signal.SIGKILL)
        assert first.wait(30) == -signal.SIGKILL
        log.close()
    killed_at = time.monotonic()
    assert BRANCH in repo.branches  # the effect landed; the answer never arrived
    if method == "POST":
        assert len(repo.pulls) == 1
    item = records.get(sessions, repo.full_name, SCRIPT)
    assert item is not None and item.state == "idle" and item.pull is None  # nothing recorded

    time.sleep(max(0.0, LEASE + 0.5 - (time.monotonic() - killed_at)))  # the lease expires
    second = subprocess.run(
        watch_command(repo), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stdout + second.stderr

    assert [b for b in repo.branches if b.startswith("threshold-bot/")] == [BRANCH]
    (pr,) = repo.pulls.values()
    assert pr.state == "open"
    check_pull(repo, pr, rule_value(runs, since=30))
    said = second.stdout + second.stderr  # the command's lines go through the JSON log
    assert f"{repo.full_name}: {SCRIPT}: opened #{pr.number}" in said
    with sqlite3.connect(tmp_path / "bot.db") as db:
        assert db.execute("SELECT count(*) FROM drift_items").fetchone() == (1,)
    item = records.get(sessions, repo.full_name, SCRIPT)
    assert item is not None
    assert (item.state, item.pull, item.branch) == ("open", pr.number, BRANCH)
    assert item.values == {"ACC_MIN_VALUE": rule_value(runs, since=30)}
