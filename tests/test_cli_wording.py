"""The CLI speaks as the CLI: in every situation that gives instructions, ``review --format
markdown`` says what a command-line user does (edit the value at ``file:line``, or run
``threshold-bot rebaseline``) and never what only the App offers; the App's comment keeps
its own wording."""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app
from bot.cli.review import review_files
from bot.core.analysis.limits import recompute_limit
from bot.core.models import RuleSettings
from bot.core.render.markdown import code
from bot.core.render.review import render_comment
from demo.data import GATED_METRICS, ExamplePaths, write_example
from tests.fakes.wandb_server import API_KEY, FakeWandb, nightly_run, serve

pytestmark = pytest.mark.servers

APP_PHRASES = (
    "/rebaseline",
    "Approve thresholds",
    "on the server",
    "/threshold-bot retry",
    "/threshold-bot help",
    "Comment ",
    "check run",
    "This comment updates itself",
)
REBASELINE = "threshold-bot rebaseline --file"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> ExamplePaths:
    return write_example(tmp_path_factory.mktemp("example"))


def markdown(*args: str | Path) -> str:
    result: Result = CliRunner().invoke(
        app, ["review", *(str(a) for a in args), "--format", "markdown"]
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def what_to_do(comment: str) -> str:
    return comment.split("#### What to do", 1)[1]


def assert_cli_words(comment: str) -> None:
    found = [phrase for phrase in APP_PHRASES if phrase in comment]
    assert not found, found


def _rule_value(example: ExamplePaths, name: str, literal: str) -> str:
    """The limit rule's value for gate ``name``, from the history's last 20 finished runs."""
    metric, op = GATED_METRICS[name]
    runs = [json.loads(line) for line in example.history.read_text().splitlines()]
    finished = sorted((r for r in runs if r["state"] == "finished"), key=lambda r: r["created_at"])
    values = [r["summary"].get(metric) for r in finished]
    window = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)][-20:]
    value = recompute_limit(window, op, literal, RuleSettings())
    assert value is not None
    return f"{value[0]:.{value[1]}f}"


def _literal(text: str, name: str) -> tuple[int, str]:
    for i, line in enumerate(text.splitlines(), start=1):
        left, _, value = line.removeprefix("export ").partition("=")
        if left == name:
            return i, value
    raise AssertionError(name)


@pytest.mark.parametrize("audit", [False, True], ids=["too-tight-and-looser", "unchanged-failing"])
def test_fixes_are_worded_for_the_command_line(example: ExamplePaths, audit: bool) -> None:
    base = [] if audit else ["--base", example.base]
    args = ["--history", example.history, "--file", example.head, *base]
    comment = markdown(*args)
    assert_cli_words(comment)
    steps = what_to_do(comment)
    review = review_files(example.history, example.head, None if audit else example.base)
    flagged = [
        g
        for g in review.gates
        if g.verdict in ("too_tight", "looser_than_rule", "unchanged_failing")
    ]
    assert {g.verdict for g in flagged} == (
        {"unchanged_failing"} if audit else {"too_tight", "looser_than_rule"}
    )
    text = example.head.read_text()
    head = example.head.as_posix()
    for g in flagged:
        line, literal = _literal(text, g.name)
        value = _rule_value(example, g.name, literal)
        assert code(f"{g.name} = {value}") in steps
        assert code(f"{head}:{line}") in steps
    argv = [*REBASELINE.split(), head, "--history", example.history.as_posix()]
    argv += [g.name for g in flagged]
    assert f"\n  ```sh\n  {shlex.join(argv)}\n  ```\n" in steps  # a block to copy
    app_steps = what_to_do(render_comment(review, app_mode=True))
    assert "/rebaseline" in app_steps and "Approve thresholds" in app_steps
    assert REBASELINE not in app_steps
    # the layout is the App's: the same sections, in the same order
    sections = [line for line in comment.splitlines() if line.startswith("#### ")]
    app_comment = render_comment(review, app_mode=True)
    assert sections == [line for line in app_comment.splitlines() if line.startswith("#### ")]
    assert comment.splitlines()[0] == app_comment.splitlines()[0]


def test_review_options_are_carried_into_the_command(example: ExamplePaths) -> None:
    comment = markdown(
        "--history",
        example.history,
        "--file",
        example.head,
        "--window",
        "regime",
        "--allowance",
        "0.1",
    )
    assert_cli_words(comment)
    assert "--window regime --allowance 0.1 " in what_to_do(comment)


def test_a_gate_without_data(example: ExamplePaths, tmp_path: Path) -> None:
    script = tmp_path / "check.sh"
    script.write_text('GHOST_MIN=0.10\npython check.py --asserts "eval/ghost >= $GHOST_MIN"\n')
    comment = markdown("--history", example.history, "--file", script)
    assert_cli_words(comment)
    assert "Check the metric of each gate without data" in what_to_do(comment)


SCRIPT = """#!/bin/bash
export ACC_MIN=0.40
python check.py --project_name gsm8k_ci --asserts "eval/acc >= $ACC_MIN"
"""


@pytest.fixture()
def wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWandb]:
    fake = FakeWandb()
    for i in range(30):
        fake.add_run("acme", "gsm8k_ci", nightly_run(i))
    with serve(fake) as url:
        monkeypatch.setenv("WANDB_API_KEY", API_KEY)
        monkeypatch.setenv("WANDB_BASE_URL", url)
        monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
        monkeypatch.chdir(tmp_path)
        (tmp_path / "nightly.sh").write_text(SCRIPT)
        yield fake


def test_history_unavailable_w_and_b_outage(wandb: FakeWandb) -> None:
    wandb.fail(status=503, count=1000)
    comment = markdown("--wandb", "acme/gsm8k_ci", "--file", "nightly.sh")
    assert_cli_words(comment)
    assert "Run the review again once it can be." in what_to_do(comment)
