"""Never green without evidence (issue #11): gates whose metric no run has, histories with
nested summaries or numbers written as text, and histories that cannot be read, through the
real ``threshold-bot review`` command, the real W&B client against the fake W&B, and the
App's ``review_pull`` against the recording GitHub."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from bot.adapters.history.cache import SyncResult
from bot.adapters.locks import DEFAULT_TTL
from bot.adapters.locks.rows import RowLocks
from bot.adapters.store import tracked
from bot.adapters.store.db import init_db, make_engine
from bot.cli.main import app
from bot.core.history.sources import HistoryUnavailable
from bot.core.models import History, Run, SourceSpec
from bot.features.review.approval import gate_values
from bot.features.review.approve import not_applied
from bot.features.review.pull import read_thresholds, review_pull
from bot.features.review.recheck import recheck, review_and_track
from tests.fakes.recording_github import RecordingGitHub
from tests.fakes.wandb_server import API_KEY, FakeRun, FakeWandb, serve

pytestmark = pytest.mark.servers

EVAL, TRAIN = "eval/all/avg_score", "loss/avg_final_rewards"
RUNS = 40
T0 = datetime(2026, 7, 1, 8, tzinfo=UTC)


def script(eval_min: str = "0.56", train_min: str = "0.20", eval_metric: str = EVAL) -> str:
    return (
        "#!/bin/bash\n"
        f"EVAL_ACC_MIN_VALUE={eval_min}\n"
        f"TRAIN_ACC_MIN_VALUE={train_min}\n"
        f'check --asserts "{eval_metric} >= $EVAL_ACC_MIN_VALUE" '
        f'"{TRAIN} >= $TRAIN_ACC_MIN_VALUE"\n'
    )


def scores(i: int) -> tuple[float, float]:
    """Run ``i``'s eval score and reward: always above 0.56 and 0.20."""
    return round(0.60 + (i % 7) / 1000, 4), round(0.25 + (i % 5) / 1000, 4)


def records(summary: Callable[[float, float], dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"r{i:03d}",
            "created_at": (T0 + timedelta(days=i)).isoformat(),
            "summary": summary(*scores(i)),
        }
        for i in range(RUNS)
    ]


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def review(tmp: Path, history: str, head: str, base: str | None, *extra: str) -> Result:
    (tmp / "runs.jsonl").write_text(history)
    (tmp / "head.sh").write_text(head)
    args = ["review", "--history", str(tmp / "runs.jsonl"), "--file", str(tmp / "head.sh")]
    if base is not None:
        (tmp / "base.sh").write_text(base)
        args += ["--base", str(tmp / "base.sh")]
    return CliRunner().invoke(app, [*args, *extra])


def as_json(result: Result) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(result.stdout)
    return data


TYPO = records(lambda e, t: {"eval/all/avg_scor": e, TRAIN: t})


# --------------------------------------------------------------------------- no data


def test_a_changed_gate_without_data_requires_action(tmp_path: Path) -> None:
    result = review(tmp_path, jsonl(TYPO), script("0.50"), script("0.56"), "--format", "json")
    assert result.exit_code == 0, result.output
    data = as_json(result)
    assert data["conclusion"] == "action_required"
    eval_gate, train_gate = data["gates"]
    assert (eval_gate["verdict"], eval_gate["changed"]) == ("no_data", True)
    assert eval_gate["classification"] == "no_data"
    assert eval_gate["explanation"].startswith(f"cannot verify: no run has `{EVAL}`")
    assert "did you mean `eval/all/avg_scor`?" in eval_gate["explanation"]
    assert f"{RUNS} runs read" in eval_gate["explanation"]
    assert eval_gate["closest_keys"] == ["eval/all/avg_scor"]
    assert train_gate["verdict"] == "unchanged"


def test_an_unchanged_gate_without_data_is_neutral_and_fails_on_neutral(tmp_path: Path) -> None:
    result = review(tmp_path, jsonl(TYPO), script(), None, "--format", "json")
    assert as_json(result)["conclusion"] == "neutral"
    assert result.exit_code == 0
    strict = review(tmp_path, jsonl(TYPO), script(), None, "--fail-on", "neutral")
    assert strict.exit_code == 1
    text = strict.stdout
    headline = text.splitlines()[1]
    assert "No action needed" not in headline and "✅" not in headline
    assert "1 of 2 gates cannot be verified" in headline
    assert "Nothing: the thresholds fit" not in text
    assert "did you mean <code>eval/all/avg\\_scor</code>?" in text


def test_an_empty_history_is_never_green(tmp_path: Path) -> None:
    result = review(tmp_path, "", script("0.50"), script("0.56"), "--fail-on", "neutral")
    assert result.exit_code == 1  # action_required is worse than neutral
    text = result.stdout
    headline = text.splitlines()[1]
    assert headline.startswith("❌ **Action required:** 1 of 2 gates needs attention")
    assert "cannot be verified" in headline
    assert "Nothing: the thresholds fit" not in text
    data = as_json(review(tmp_path, "", script("0.50"), script("0.56"), "--format", "json"))
    assert data["conclusion"] == "action_required"
    assert [g["verdict"] for g in data["gates"]] == ["no_data", "no_data"]
    assert all("the history is empty (no run read)" in g["explanation"] for g in data["gates"])
    assert [g["no_data_reason"] for g in data["gates"]] == ["empty_history", "empty_history"]


def what_to_do(markdown: str) -> str:
    return markdown.split("#### What to do", 1)[1]


NOT_NUMBERS = records(lambda e, t: {EVAL: "n/a", TRAIN: t})
CRASHED = [{**r, "state": "crashed"} for r in records(lambda e, t: {EVAL: e, TRAIN: t})]


@pytest.mark.parametrize(
    ("history", "reason", "explanation", "action"),
    [
        (
            "",
            "empty_history",
            "cannot verify: the history is empty (no run read)",
            "against: the history is empty. Fix the history source",
        ),
        (
            jsonl(CRASHED),
            "no_finished_runs",
            f"cannot verify: the history has no finished run ({len(CRASHED)} runs read)",
            "against: the history has no finished run, and only finished runs are judged",
        ),
    ],
)
def test_a_history_without_finished_runs_says_so_not_check_the_metric(
    tmp_path: Path, history: str, reason: str, explanation: str, action: str
) -> None:
    data = as_json(review(tmp_path, history, script("0.50"), script("0.56"), "--format", "json"))
    assert [g["no_data_reason"] for g in data["gates"]] == [reason, reason]
    assert [g["explanation"] for g in data["gates"]] == [explanation, explanation]
    comment = review(tmp_path, history, script("0.50"), script("0.56"), "--format", "markdown")
    todo = what_to_do(comment.stdout)
    assert action in todo and "Check the metric" not in todo
    table = review(tmp_path, history, script("0.50"), script("0.56"), "--format", "table")
    words = " ".join(table.stdout.split())  # the table wraps at 80 columns
    assert explanation in words and action in words and "Check the metric" not in words


def test_values_that_are_not_numbers_are_named(tmp_path: Path) -> None:
    data = as_json(review(tmp_path, jsonl(NOT_NUMBERS), script(), None, "--format", "json"))
    csv = tmp_path / "runs.csv"
    csv.write_text(
        f"id,created_at,{EVAL},{TRAIN}\n"
        + "".join(f"{r['id']},{r['created_at']},n/a,{r['summary'][TRAIN]}\n" for r in NOT_NUMBERS)
    )
    from_csv = CliRunner().invoke(
        app,
        ["review", "--history", str(csv), "--file", str(tmp_path / "head.sh"), "--format", "json"],
    )
    data = as_json(review(tmp_path, jsonl(NOT_NUMBERS), script(), None, "--format", "json"))
    assert from_csv.exit_code == 0, from_csv.output
    for reviewed in (data, as_json(from_csv)):
        eval_gate, train_gate = reviewed["gates"]
        assert (eval_gate["verdict"], eval_gate["no_data_reason"]) == ("no_data", "not_numbers")
        assert eval_gate["explanation"] == (
            f"cannot verify: the values of `{EVAL}` are not numbers ({len(NOT_NUMBERS)} values:"
            f" text, null or NaN; {len(NOT_NUMBERS)} runs read)"
        )
        assert train_gate["no_data_reason"] is None and train_gate["verdict"] == "unchanged"
    comment = review(tmp_path, jsonl(NOT_NUMBERS), script(), None, "--format", "markdown").stdout
    assert "(<code>EVAL\\_ACC\\_MIN\\_VALUE</code>: values not numbers)" in comment.splitlines()[1]
    assert "Record numbers for the metric of each gate whose values are not numbers:" in (
        what_to_do(comment)
    )
    assert "Check the metric" not in what_to_do(comment)
    table = review(tmp_path, jsonl(NOT_NUMBERS), script(), None, "--format", "table").stdout
    assert f"the values of `{EVAL}` are not numbers" in " ".join(table.split())


# --------------------------------------------------------------------------- values


NESTED = records(lambda e, t: {"eval": {"all": {"avg_score": e}}, "loss": {"avg_final_rewards": t}})


@pytest.mark.parametrize("metric", [EVAL, "eval.all.avg_score"])
def test_nested_summaries_are_flattened_and_counted(tmp_path: Path, metric: str) -> None:
    head = script(eval_metric=metric)
    data = as_json(review(tmp_path, jsonl(NESTED), head, None, "--format", "json"))
    assert data["conclusion"] == "success"
    eval_gate, train_gate = data["gates"]
    assert eval_gate["metric"] == metric
    window = [scores(i)[0] for i in range(RUNS)][-20:]
    assert (eval_gate["window_min"], eval_gate["window_max"]) == (min(window), max(window))
    assert eval_gate["old_failures"] == {"failed": 0, "total": 30}
    rewards = [scores(i)[1] for i in range(RUNS)][-20:]
    assert train_gate["window_min"] == min(rewards)
    assert data["history"]["flattened_values"] == 2 * RUNS
    assert data["history"]["non_numeric_values"] == 0
    text = review(tmp_path, jsonl(NESTED), head, None).stdout
    assert f"{RUNS} runs: {RUNS} finished; read {2 * RUNS} nested values as flat keys." in text


def test_numbers_written_as_text_are_read_and_counted(tmp_path: Path) -> None:
    rows = records(lambda e, t: {EVAL: str(e), TRAIN: t, "note": "n/a", "ok": True})
    data = as_json(review(tmp_path, jsonl(rows), script(), None, "--format", "json"))
    assert data["conclusion"] == "success"
    window = [scores(i)[0] for i in range(RUNS)][-20:]
    assert data["gates"][0]["window_min"] == min(window)
    assert data["history"]["numeric_strings"] == RUNS
    assert data["history"]["non_numeric_values"] == 2 * RUNS  # "n/a" and true
    text = review(tmp_path, jsonl(rows), script(), None).stdout
    assert f"read {RUNS} numbers written as text; ignored {2 * RUNS} non-numeric values" in text


# --------------------------------------------------------------------------- W&B


@pytest.fixture()
def wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWandb]:
    fake = FakeWandb()
    for i in range(RUNS):
        e, t = scores(i)
        summary = {"eval": {"all": {"avg_score": str(e)}}, TRAIN: t, "_step": i}
        fake.add_run("acme", "ci", FakeRun(f"run{i:03d}", T0 + timedelta(days=i), summary=summary))
    with serve(fake) as url:
        monkeypatch.setenv("WANDB_API_KEY", API_KEY)
        monkeypatch.setenv("WANDB_BASE_URL", url)
        monkeypatch.chdir(tmp_path)
        yield fake


def test_wandb_summaries_nested_and_as_text(wandb: FakeWandb, tmp_path: Path) -> None:
    (tmp_path / "head.sh").write_text(script(eval_metric="eval.all.avg_score"))
    args = ["review", "--wandb", "acme/ci", "--file", str(tmp_path / "head.sh"), "--format"]
    result = CliRunner().invoke(app, [*args, "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["conclusion"] == "success"
    window = [scores(i)[0] for i in range(RUNS)][-20:]
    assert data["gates"][0]["window_min"] == min(window)
    assert data["history"]["flattened_values"] == RUNS
    assert data["history"]["numeric_strings"] == RUNS


# --------------------------------------------------------------------------- the App

CONFIG = ".github/threshold-bot.yml"
SCRIPT = "tests/ci/nightly.sh"


def app_repo(history: str | None) -> RecordingGitHub:
    path = "ci/runs.jsonl"
    gh = RecordingGitHub()
    files = {SCRIPT: script(), CONFIG: f"sources:\n  ci:\n    kind: file\n    path: {path}\n"}
    files[CONFIG] += "default_source: ci\n"
    if history is not None:
        files[path] = history
    gh.commit(files)
    return gh


def test_app_changed_gate_with_unreadable_history_requires_action() -> None:
    gh = app_repo(None)
    pull = gh.open_pull(3, {SCRIPT: script("0.50")})
    outcome = review_pull(gh, gh.repo, 3)
    assert outcome.review is not None and outcome.review.error is not None
    check = gh.check_for(pull.head_sha)
    assert (check.conclusion, [a.identifier for a in check.actions]) == (
        "action_required",
        ["approve"],
    )
    assert check.title == "Run history unavailable"
    body = gh.comments[3].body
    assert "/threshold-bot retry" in body and "ci/runs.jsonl" in body
    assert "❌ **Action required:** 1 of 2 gates needs attention" in body
    # a maintainer may vouch for what could not be verified: the approval turns it green
    values = gate_values(read_thresholds(gh, gh.repo, pull).files)
    assert len(values) == 2
    approval = SimpleNamespace(approver="maya", approved_at=T0, gate_values=values)
    again = review_pull(gh, gh.repo, 3, approvals=lambda _repo, _number: approval)
    assert gh.check_for(pull.head_sha).conclusion == "success"
    assert not_applied(again, pull.head_sha) is None


def test_app_unchanged_gates_with_unreadable_history_stay_neutral() -> None:
    gh = app_repo(None)
    pull = gh.open_pull(4, {SCRIPT: script() + "# a comment only\n"})
    review_pull(gh, gh.repo, 4)
    check = gh.check_for(pull.head_sha)
    assert (check.conclusion, check.actions) == ("neutral", ())
    assert "/threshold-bot retry" in gh.comments[4].body


def test_app_changed_gate_on_a_metric_the_history_lacks_requires_action() -> None:
    gh = app_repo(jsonl(TYPO))
    pull = gh.open_pull(5, {SCRIPT: script("0.50")})
    review_pull(gh, gh.repo, 5)
    check = gh.check_for(pull.head_sha)
    assert check.conclusion == "action_required"
    assert check.title == "1 of 2 gates needs attention"
    body = gh.comments[5].body
    assert "did you mean <code>eval/all/avg\\_scor</code>?" in body
    assert "No action needed" not in body


def test_app_outage_of_a_changed_gate_is_retried_once_the_source_syncs(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'bot.db'}")
    sessions = init_db(engine)
    locks = RowLocks(engine, "tests", DEFAULT_TTL)
    gh = RecordingGitHub()
    on_wandb = 'check --project_name "ci" '  # the script names its W&B project
    gh.commit({SCRIPT: script().replace("check ", on_wandb)})
    pull = gh.open_pull(6, {SCRIPT: script("0.58").replace("check ", on_wandb)})
    up = False

    class Flaky:
        def fetch(self, spec: SourceSpec) -> History:
            if not up:
                raise HistoryUnavailable("W&B answered 503")
            runs = tuple(
                Run(
                    id=f"r{i}",
                    created_at=T0 + timedelta(days=i),
                    summary=dict(zip((EVAL, TRAIN), scores(i), strict=True)),
                )
                for i in range(RUNS)
            )
            return History(runs=runs, source=spec.describe())

    review_and_track(gh, sessions, 1, gh.repo, 6, lambda spec: Flaky(), locks=locks)
    assert gh.check_for(pull.head_sha).conclusion == "action_required"
    with sessions() as session:
        (row,) = tracked.tracked(session)
    assert row.conclusion == "neutral"  # marks the unread history for the re-check

    up = True
    quiet = {spec.key(): SyncResult(spec.describe()) for spec in row.sources}  # no new runs
    report = recheck(
        sessions, lambda _id: gh, lambda spec: Flaky(), lambda specs, clients: quiet, locks
    )
    assert report.reviewed == (f"{gh.repo}#6",)
    assert gh.check_for(pull.head_sha).conclusion == "success"
