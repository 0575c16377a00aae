"""Boundaries a mutation probe found unpinned: each test asserts the exact edge, both sides
where there are two, through the public behaviour of the module that owns it."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest

from bot.adapters.locks import make_locks
from bot.adapters.store import deliveries
from bot.adapters.store.db import init_db, make_engine
from bot.adapters.store.deliveries import NewDelivery
from bot.app.runtime import build
from bot.app.web import create_app
from bot.core.analysis.failures import diagnose
from bot.core.analysis.review import build_review
from bot.core.commands import HELP_TEXT
from bot.core.models import Failures, Gate, GateChange, History, RuleSettings, Run, WindowSpec
from bot.core.signature import sign
from bot.core.thresholds.edit import replace_literals
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.shell.script import parse_shell
from bot.features.comments import on_comment
from bot.features.context import DeliveryInfo, HandlerContext
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import IssueComment
from tests.fakes.recording_github import RecordingGitHub
from tests.live import SECRET, Recorder, live_server, make_settings
from tests.webhooks import fixture, new_delivery_id, patched, signed_fixture

pytestmark = pytest.mark.servers

T0 = datetime(2026, 3, 1, tzinfo=UTC)


# (a) ------------------------------------------------------------- one failing run is too tight


def _gate(literal: str) -> Gate:
    return Gate(
        name="ACC_MIN",
        file="ci/nightly.sh",
        line=1,
        metric="acc",
        op=">=",
        value=float(literal),
        literal=literal,
        start=0,
        end=len(literal),
    )


@pytest.mark.parametrize("proposed", ["0.55", "0.54"])
def test_a_proposed_value_failing_exactly_one_window_run_is_too_tight(proposed: str) -> None:
    values = [0.60] * 9 + [0.54] + [0.60] * 10  # one run dips to 0.54
    runs = tuple(
        Run(id=f"r{i}", created_at=T0 + timedelta(days=i), summary={"acc": v})
        for i, v in enumerate(values)
    )
    rule = RuleSettings(window=WindowSpec(kind="last", runs=len(values)))
    change = GateChange(head=_gate(proposed), base=_gate("0.50"))

    (gate,) = build_review([change], History(runs=runs), rule=rule).gates

    failing = sum(v < float(proposed) for v in values)  # the gate is ``acc >= proposed``
    assert gate.proposed_failures == Failures(failed=failing, total=len(values))
    # 0.55 fails the one dip and nothing else; 0.54 fails no run and is stricter than the rule
    assert (failing, gate.verdict) == ((1, "too_tight") if proposed == "0.55" else (0, "ok"))


# (b) ------------------------------------------------- each command of a comment has its reply


COMMANDS = ("/threshold-bot help", "/threshold-bot help", "/rebaseline", "/rebaseline --dry-run")


def test_each_command_of_a_comment_gets_its_own_reply(tmp_path: Path) -> None:
    gh = RecordingGitHub()
    gh.commit({"README.md": "# ml\n"})
    gh.open_pull(7, {"ci/nightly.sh": "EVAL_ACC_MIN_VALUE=0.5\n"})
    settings = make_settings(tmp_path)
    engine = make_engine(settings.database_url)
    ctx = HandlerContext(
        settings=settings,
        sessions=init_db(engine),
        delivery=DeliveryInfo(id="d1", event="issue_comment", action="created", installation_id=3),
        github=lambda installation: gh,
        history=lambda spec: pytest.fail("no history is read"),
        locks=make_locks(settings, engine, "tests"),
        log=logging.LoggerAdapter(logging.getLogger("test")),
    )
    payload = patched(
        fixture("issue_comment.created"),
        {
            "issue.number": 7,
            "comment.body": "\n".join(COMMANDS),
            "comment.user.login": "rita",
            "sender.login": "rita",
            "repository.full_name": "owner/repo",
        },
    )

    on_comment(ctx, payload)
    on_comment(ctx, payload)  # a retried delivery edits both replies, posts none more

    assert len(gh.called("reply")) == 2 * len(COMMANDS)
    assert len(gh.replies) == len(COMMANDS)  # one per command line, whatever its kind
    first, second, *refusals = gh.replies.values()
    assert first.endswith(HELP_TEXT) and second.endswith(HELP_TEXT)
    for refusal in refusals:
        assert "Sorry @rita" in refusal and "needs **write** permission" in refusal


# (c) ---------------------------------------------------- the oldest marked comment is edited

MARKER = "<!-- threshold-bot:review -->"


def test_the_oldest_of_two_marked_comments_is_the_one_edited() -> None:
    with FakeGitHub() as fake:
        repo = fake.add_repo("octo/ml", installation_id=7, files={"README.md": "# ml\n"})
        repo.open_pr(5, head="tune", head_files={"README.md": "# tuned\n"})
        now = datetime.now(UTC)
        for comment_id, text in ((11, "older"), (12, "newer")):  # listed oldest first
            repo.issue_comments[comment_id] = IssueComment(
                comment_id, 5, fake.state.bot_login, f"{MARKER}\n{text}", now, now
            )
        assert fake.private_key is not None
        app = fake.github_app()

        ref = app.installation(7).upsert_comment("octo/ml", 5, f"{MARKER}\nreview", MARKER)

        assert ref.id == 11
        bodies = {c.id: c.body for c in repo.comments(5)}
        assert bodies == {11: f"{MARKER}\nreview", 12: f"{MARKER}\nnewer"}
        fake.check()


# (d) ---------------------------------------- a duplicate leaves a delivery waiting to retry alone


def test_a_duplicate_of_a_delivery_waiting_to_retry_changes_nothing(tmp_path: Path) -> None:
    sessions = init_db(make_engine(f"sqlite:///{tmp_path / 'bot.db'}"))
    payload = fixture("pull_request.opened")
    new = NewDelivery(
        id=new_delivery_id(),
        event="pull_request",
        action="opened",
        installation_id=payload["installation"]["id"],
        body=json.dumps(payload),
    )
    assert deliveries.add(sessions, new).accepted
    claimed = deliveries.claim(sessions, new.id, "worker-a", lease=60)
    assert claimed is not None and claimed.attempts == 1
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    deliveries.schedule_retry(sessions, new.id, "TransientError: later", at)

    one = deliveries.add(sessions, new)
    many = deliveries.add_many(sessions, [new, NewDelivery(**{**vars(new), "id": "other"})])

    assert (one.accepted, one.status, one.duplicate) == (False, "retry", True)
    assert [(r.accepted, r.status, r.duplicate) for r in many] == [
        (False, "retry", True),
        (True, "queued", False),
    ]
    stored = deliveries.get(sessions, new.id)
    assert stored is not None
    assert (stored.status, stored.attempts, stored.next_attempt_at) == ("retry", 1, at)
    assert stored.last_error == "TransientError: later"


# (e) --------------------------------------------------- no webhook secret: every request is 401


def test_an_app_without_a_webhook_secret_refuses_every_request(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, webhook_secret=None)
    assert settings.webhook_secrets == ()
    recorder = Recorder(("pull_request", ()))
    runtime = build(settings, router=recorder.router)
    try:
        with live_server(create_app(settings, runtime)) as url, httpx.Client(base_url=url) as c:
            body, headers = signed_fixture("pull_request.opened", SECRET)
            unkeyed = {**headers, "X-Hub-Signature-256": sign(body, b"")}
            for sent in (headers, unkeyed):
                response = c.post("/webhook", content=body, headers=sent)
                assert response.status_code == 401, response.text
        assert deliveries.count_by_status(runtime.sessions) == {}
        assert recorder.calls == []
    finally:
        runtime.close()


# (f) ------------------------------------------------------ "shifted": at least half since a change


@pytest.mark.parametrize(("failing", "expected"), [(5, "shifted"), (4, "flaky")])
def test_shifted_needs_at_least_half_of_the_runs_since_the_change(
    failing: int, expected: str
) -> None:
    before = [False] * 10
    after = [True] * failing + [False] * (10 - failing)  # 10 runs since the change at run 10
    fails = np.array(before + after, dtype=np.bool_)
    index = np.arange(fails.size)

    assert sum(after) / len(after) == (0.5 if failing == 5 else 0.4)
    found = diagnose(fails, index, lookback=30, toward=[10])  # the change moved toward failing
    assert found.classification == expected
    assert found.change == (10 if expected == "shifted" else None)


# (g) ----------------------------------------- one literal, two texts of one value: a conflict

SCRIPT = (Path(__file__).resolve().parent / "data" / "nightly_gsm8k.sh").read_text(encoding="utf-8")


def test_two_texts_of_one_value_for_one_literal_are_a_conflict() -> None:
    parsed = parse_shell("ci/nightly.sh", SCRIPT)
    gates = [g for g in parsed.gates if g.name == "EVAL_ACC_MIN_VALUE"]
    assert len(gates) == 2 and len({(g.start, g.end) for g in gates}) == 1  # one literal
    first, second = gates

    with pytest.raises(
        ThresholdFileError, match=re.escape("conflicting new values '0.5' and '0.50'")
    ):
        replace_literals(SCRIPT, [(first, "0.5"), (second, "0.50")])
    same = replace_literals(SCRIPT, [(first, "0.50"), (second, "0.50")])
    assert same == SCRIPT[: first.start] + "0.50" + SCRIPT[first.end :]
