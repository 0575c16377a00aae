"""A missing credential is the same usage problem in every command that reads W&B or MLflow.

``review``, ``rebaseline``, ``drift``, ``backtest`` and ``export`` run through the real
``threshold-bot`` entry point; W&B is the local fake (``tests/fakes/wandb_server.py``) read by
the real wandb client, MLflow the recording stand-in (``tests/fakes/mlflow_listener.py``) read
by the real MLflow client.  Without ``WANDB_API_KEY`` (unset, or empty as a fork PR's
workflow has ``${{ secrets.X }}``) each command exits 2 with the one line naming the variable
and asks nothing of W&B; with it, each reads the fake's runs.  ``action`` is in
tests/test_action.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app
from bot.core.analysis.limits import recompute_limit
from bot.core.models import RuleSettings
from tests.fakes.mlflow_listener import MlflowListener, listen, mlflow_run
from tests.fakes.wandb_server import API_KEY, FakeWandb, nightly_run, serve

pytestmark = pytest.mark.servers

ENTITY, PROJECT = "acme", "gsm8k_ci"
RUNS = 30
SCRIPT = f"""#!/bin/bash
export ACC_MIN=0.40
python check.py --project_name {PROJECT} --asserts "eval/acc >= $ACC_MIN"
"""
NO_KEY = (
    "threshold-bot: error: W&B: WANDB_API_KEY is not set (give it in the environment; "
    "a fork PR's workflow gets no secrets: docs/cli.md#fork-prs)\n"
)
WANDB = ["--wandb", f"{ENTITY}/{PROJECT}"]
# every way a command reads W&B: the option, or the project the script names
COMMANDS: dict[str, list[str]] = {
    "review --wandb": ["review", "--file", "nightly.sh", *WANDB, "--format", "json"],
    "review (the script's project)": ["review", "--file", "nightly.sh", "--format", "json"],
    "rebaseline --wandb": ["rebaseline", "--file", "nightly.sh", *WANDB, "--dry-run"],
    "rebaseline (the script's project)": ["rebaseline", "--file", "nightly.sh", "--dry-run"],
    "drift --wandb": ["drift", "--file", "nightly.sh", *WANDB, "--format", "json"],
    "drift (the script's project)": ["drift", "--file", "nightly.sh", "--format", "json"],
    "backtest --wandb": ["backtest", "--file", "nightly.sh", *WANDB, "--format", "json"],
    "backtest (the script's project)": ["backtest", "--file", "nightly.sh", "--format", "json"],
    "export --wandb": ["export", *WANDB],
}


def run(args: list[str], **env: str | None) -> Result:
    return CliRunner().invoke(app, args, env=env)


@pytest.fixture()
def wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWandb]:
    """A fake W&B holding the project the script names; the checkout is the current directory."""
    fake = FakeWandb()
    for i in range(RUNS):
        fake.add_run(ENTITY, PROJECT, nightly_run(i))
    with serve(fake) as url:
        monkeypatch.setenv("WANDB_BASE_URL", url)
        monkeypatch.setenv("WANDB_ENTITY", ENTITY)
        monkeypatch.delenv("WANDB_API_KEY", raising=False)
        monkeypatch.chdir(tmp_path)
        (tmp_path / "nightly.sh").write_text(SCRIPT)
        yield fake


@pytest.mark.parametrize("key", [None, "", "  "], ids=["unset", "empty", "blank"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_without_the_key_every_command_exits_2_naming_it(
    wandb: FakeWandb, tmp_path: Path, command: str, key: str | None
) -> None:
    result = run(COMMANDS[command], WANDB_API_KEY=key)
    assert result.exit_code == 2, result.output
    assert result.stderr == NO_KEY
    assert result.stdout == ""
    assert wandb.total_requests == 0  # decided before any request
    assert (tmp_path / "nightly.sh").read_text() == SCRIPT


def _window(fake: FakeWandb) -> list[float]:
    """The accuracy of the runs the default rule looks at: the last 20 finished."""
    runs = sorted(fake.projects[(ENTITY, PROJECT)].values(), key=lambda r: r.created_at)
    return [r.summary["eval"]["acc"] for r in runs if r.state == "finished"][-20:]


def _finished(fake: FakeWandb) -> int:
    return sum(r.state == "finished" for r in fake.projects[(ENTITY, PROJECT)].values())


def _review(fake: FakeWandb, result: Result) -> None:
    gate = next(g for g in json.loads(result.stdout)["gates"] if g["name"] == "ACC_MIN")
    assert gate["window_min"] == pytest.approx(min(_window(fake)))


def _rebaseline(fake: FakeWandb, result: Result) -> None:
    limit = recompute_limit(_window(fake), ">=", "0.40", RuleSettings())
    assert limit is not None
    assert f"+export ACC_MIN={limit[0]:.{limit[1]}f}\n" in result.stdout


def _drift(fake: FakeWandb, result: Result) -> None:
    [gate] = json.loads(result.stdout)["files"][0]["gates"]
    runs = fake.projects[(ENTITY, PROJECT)].values()
    assert min(r.summary["eval"]["acc"] for r in runs) >= 0.40  # so no run ever failed it
    assert (gate["name"], gate["status"]) == ("ACC_MIN", "passing")


def _backtest(fake: FakeWandb, result: Result) -> None:
    document = json.loads(result.stdout)
    assert document["history"]["runs"] == _finished(fake)
    assert [g["name"] for g in document["gates"]] == ["ACC_MIN"]


def _export(fake: FakeWandb, result: Result) -> None:
    ids = sorted(json.loads(line)["id"] for line in result.stdout.splitlines())
    assert ids == sorted(r.name for r in fake.projects[(ENTITY, PROJECT)].values())


CHECKS: dict[str, Callable[[FakeWandb, Result], None]] = {
    "review --wandb": _review,
    "review (the script's project)": _review,
    "rebaseline --wandb": _rebaseline,
    "rebaseline (the script's project)": _rebaseline,
    "drift --wandb": _drift,
    "drift (the script's project)": _drift,
    "backtest --wandb": _backtest,
    "backtest (the script's project)": _backtest,
    "export --wandb": _export,
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_with_the_key_every_command_reads_wandb(wandb: FakeWandb, command: str) -> None:
    result = run(COMMANDS[command], WANDB_API_KEY=API_KEY)
    assert result.exit_code == 0, result.output
    assert wandb.total_requests > 0
    CHECKS[command](wandb, result)


def test_review_reads_the_project_the_script_names_as_wandb_names_it(wandb: FakeWandb) -> None:
    own = run(COMMANDS["review (the script's project)"], WANDB_API_KEY=API_KEY)
    named = run(COMMANDS["review --wandb"], WANDB_API_KEY=API_KEY)
    assert own.exit_code == named.exit_code == 0, own.output + named.output
    gates = [json.loads(r.stdout)["gates"] for r in (own, named)]
    assert gates[0] == gates[1]


def test_fail_on_no_longer_passes_a_review_without_the_key(wandb: FakeWandb) -> None:
    # before: exit 0 with a "Not reviewed" review, which --fail-on action_required let pass
    args = [*COMMANDS["review --wandb"], "--fail-on", "action_required"]
    result = run(args, WANDB_API_KEY="")
    assert (result.exit_code, result.stderr) == (2, NO_KEY)


# --------------------------------------------------------------------------- MLflow

CONFIG = """sources:
  tracking: {kind: mlflow, experiment: gsm8k}
default_source: tracking
"""
PLAIN_SCRIPT = 'ACC_MIN=0.40\npython check.py --asserts "eval/acc >= $ACC_MIN"\n'
TOKEN = "mlflow-token-1"


@pytest.fixture()
def mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MlflowListener, str]]:
    """A stand-in MLflow server with four finished runs; a config naming it as the default."""
    start = int(datetime(2026, 7, 1, 8, tzinfo=UTC).timestamp() * 1000)
    runs = [
        mlflow_run(f"r{i}", start + i * 3_600_000, {"eval/acc": 0.5 + i / 10}) for i in range(4)
    ]
    listener = MlflowListener(runs=runs)
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "check.sh").write_text(PLAIN_SCRIPT)
    (tmp_path / "config.yml").write_text(CONFIG)
    with listen(listener) as url:
        yield listener, url


REVIEW = ["review", "--file", "check.sh", "--config", "config.yml", "--format", "json"]


def test_mlflow_without_a_server_exits_2(mlflow: tuple[MlflowListener, str]) -> None:
    listener, _ = mlflow
    result = run(REVIEW)
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "threshold-bot: error: MLflow: MLFLOW_TRACKING_URI is not set (give it in the "
        "environment, or the source's tracking_uri in the config)\n"
    )
    assert listener.received == []


@pytest.mark.parametrize("variable", ["MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD"])
@pytest.mark.parametrize(
    "args",
    [REVIEW, ["export", "--mlflow", "gsm8k"]],
    ids=["review (the config's source)", "export --mlflow"],
)
def test_mlflow_with_an_empty_secret_exits_2(
    mlflow: tuple[MlflowListener, str], args: list[str], variable: str
) -> None:
    listener, url = mlflow
    result = run(args, MLFLOW_TRACKING_URI=url, **{variable: ""})
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"threshold-bot: error: MLflow: {variable} is empty (give it in the environment; "
        "a fork PR's workflow gets no secrets: docs/cli.md#fork-prs)\n"
    )
    assert listener.received == []


def test_mlflow_with_its_token_reads_the_runs(mlflow: tuple[MlflowListener, str]) -> None:
    listener, url = mlflow
    result = run(REVIEW, MLFLOW_TRACKING_URI=url, MLFLOW_TRACKING_TOKEN=TOKEN)
    assert result.exit_code == 0, result.output
    [gate] = json.loads(result.stdout)["gates"]
    accuracies = [m["value"] for r in listener.runs for m in r["data"]["metrics"]]
    assert gate["window"]["runs"] == len(accuracies)
    assert gate["window_min"] == pytest.approx(min(accuracies))
    assert listener.received
    assert {r.headers.get("authorization") for r in listener.received} == {f"Bearer {TOKEN}"}
