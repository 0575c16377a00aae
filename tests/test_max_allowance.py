"""``rule.max_allowance`` caps the allowance: the config's own, ``/rebaseline --allowance``
(against the config at the PR's base) and the CLI's ``--allowance``."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.config import ConfigError, parse_config
from bot.features.comments import on_comment
from demo.data import write_example
from tests.fakes.recording_github import RecordingGitHub
from tests.test_comments_handler import (
    PROJECT,
    STEADY,
    audit_rows,
    comment_payload,
    context,
)
from tests.test_review_pr import CONFIG, SCRIPT, script

DEFAULT_CAP = 0.25


def rule_value(allowance: float) -> str:
    """The lower bound the rule gives over the steady runs, at the gate's two decimals."""
    return f"{math.floor((STEADY - allowance * abs(STEADY)) * 100) / 100:.2f}"


@pytest.fixture
def gh() -> RecordingGitHub:
    fake = RecordingGitHub()
    fake.commit({SCRIPT: script("0.56", project=PROJECT)})
    fake.open_pull(7, {SCRIPT: script("0.58", project=PROJECT)})
    fake.levels.update(wes="write")
    return fake


def test_the_config_cannot_set_an_allowance_over_its_cap() -> None:
    assert parse_config("").rule.max_allowance == DEFAULT_CAP
    assert parse_config("rule: {allowance: 0.25}\n").rule.allowance == DEFAULT_CAP
    raised = parse_config("rule:\n  max_allowance: 0.5\n  allowance: 0.4\n").rule
    assert (raised.allowance, raised.max_allowance) == (0.4, 0.5)
    with pytest.raises(ConfigError) as over:
        parse_config("rule:\n  window: 20\n  allowance: 0.3\n")
    assert (
        str(over.value)
        == ".github/threshold-bot.yml:3: rule.allowance: 30% is over max_allowance (25%)"
    )
    with pytest.raises(ConfigError) as below_default:
        parse_config("rule: {max_allowance: 0.01}\n")  # the default 5% is over it
    assert "rule.allowance: 5% is over max_allowance (1%)" in str(below_default.value)
    with pytest.raises(ConfigError, match=r"rule\.max_allowance"):
        parse_config("rule: {max_allowance: 2}\n")


@pytest.mark.parametrize("allowance", ["100%", "1", "26%", "0.2501"])
def test_rebaseline_over_the_cap_is_refused_naming_it(
    tmp_path: Path, gh: RecordingGitHub, allowance: str
) -> None:
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload(f"/rebaseline --allowance {allowance}", sender="wes"))

    (body,) = gh.replies.values()
    assert "**/rebaseline** did not run" in body
    assert "over this repository's cap of 25% (`rule.max_allowance` in" in body
    assert gh.called("commit_file") == [] and gh.reviews == []
    assert audit_rows(ctx) == [("wes", "rebaseline", "failed")]


def test_rebaseline_at_the_cap_runs(tmp_path: Path, gh: RecordingGitHub) -> None:
    ctx = context(tmp_path, gh, "issue_comment")

    on_comment(ctx, comment_payload("/rebaseline --allowance 25% --dry-run", sender="wes"))

    (body,) = gh.replies.values()
    assert f"0.58 → **{rule_value(DEFAULT_CAP)}**" in body and "25% allowance" in body


def test_the_cap_comes_from_the_base_not_the_pr(tmp_path: Path, gh: RecordingGitHub) -> None:
    raised = "rule:\n  max_allowance: 1\n"
    gh.open_pull(9, {SCRIPT: script("0.58", project=PROJECT), CONFIG: raised})
    ctx = context(tmp_path, gh, "issue_comment")
    command = "/rebaseline --allowance 100% --dry-run"

    on_comment(ctx, comment_payload(command, sender="wes", changes={"issue.number": 9}))
    assert "cap of 25%" in next(iter(gh.replies.values()))

    gh.commit({CONFIG: raised})  # the same config on the base branch does raise it
    gh.pulls[7] = replace(gh.pulls[7], base_sha=gh.commits[-1])
    on_comment(
        replace(ctx, delivery=replace(ctx.delivery, id="d2")),
        comment_payload(command, sender="wes"),
    )

    reply = next(b for b in gh.replies.values() if "d2:" in b)
    assert f"0.58 → **{rule_value(1.0)}**" in reply and "100% allowance" in reply


def test_the_cli_allowance_is_capped_by_the_config(tmp_path: Path) -> None:
    paths = write_example(tmp_path)
    args = ["review", "--history", str(paths.history), "--file", str(paths.head)]
    config = tmp_path / "threshold-bot.yml"
    config.write_text("rule:\n  max_allowance: 0.5\n")

    refused = CliRunner().invoke(app, [*args, "--allowance", "0.3"])
    allowed = CliRunner().invoke(
        app, [*args, "--allowance", "0.3", "--config", str(config), "--format", "json"]
    )

    assert refused.exit_code == 2 and "30% is over max_allowance (25%)" in refused.output
    assert allowed.exit_code == 0, allowed.output
    assert '"allowance": 0.3' in allowed.output
