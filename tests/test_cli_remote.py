"""``review --wandb`` (real wandb client, fake W&B) and ``review --repo`` (real PyGithub, fake
GitHub) through the real ``threshold-bot`` command."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.cli.review import web_url
from bot.core.analysis.limits import recompute_limit
from bot.core.models import RuleSettings
from demo.data import build_example, dump_jsonl
from tests.fakes.github_api import FakeGitHub
from tests.fakes.wandb_server import API_KEY, FakeWandb, nightly_run, serve

pytestmark = pytest.mark.servers

SCRIPT = """#!/bin/bash
export ACC_MIN=0.40
export TOKENS_MAX=300
python check.py --project_name gsm8k_ci \\
  --asserts "eval/acc >= $ACC_MIN" "tokens <= $TOKENS_MAX"
"""
RUNS = 30


@pytest.fixture()
def wandb_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeWandb, str]]:
    fake = FakeWandb()
    for i in range(RUNS):
        fake.add_run("acme", "gsm8k_ci", nightly_run(i))
    with serve(fake) as url:
        monkeypatch.setenv("WANDB_API_KEY", API_KEY)
        monkeypatch.setenv("WANDB_BASE_URL", url)
        monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
        monkeypatch.chdir(tmp_path)
        yield fake, url


def test_review_from_wandb(wandb_url: tuple[FakeWandb, str], tmp_path: Path) -> None:
    fake, _ = wandb_url
    script = tmp_path / "nightly.sh"
    script.write_text(SCRIPT)
    result = CliRunner().invoke(
        app, ["review", "--wandb", "acme/gsm8k_ci", "--file", str(script), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    review = json.loads(result.stdout)
    finished = sorted(
        (r for r in fake.projects[("acme", "gsm8k_ci")].values() if r.state == "finished"),
        key=lambda r: r.created_at,
    )
    window = finished[-20:]
    acc = [r.summary["eval"]["acc"] for r in window]
    gate = next(g for g in review["gates"] if g["name"] == "ACC_MIN")
    assert gate["metric"] == "eval/acc"
    assert gate["window"]["runs"] == len(window)
    assert gate["window_min"] == pytest.approx(min(acc))
    expected = recompute_limit(acc, ">=", "0.40", RuleSettings())
    assert expected is not None and gate["recomputed"] == pytest.approx(expected[0])


def test_wandb_outage_gives_a_neutral_review(
    wandb_url: tuple[FakeWandb, str], tmp_path: Path
) -> None:
    fake, _ = wandb_url
    fake.fail(status=503, count=1000)
    script = tmp_path / "nightly.sh"
    script.write_text(SCRIPT)
    result = CliRunner().invoke(
        app, ["review", "--wandb", "acme/gsm8k_ci", "--file", str(script), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    review = json.loads(result.stdout)
    assert review["conclusion"] == "neutral"
    assert {g["verdict"] for g in review["gates"]} == {"no_data"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no W&B entity given for project 'gsm8k_ci'"),  # the script's own, no entity
        (["--wandb", "acme/gsm8k_ci", "--history", "x.jsonl"], "not both"),
        (["--wandb", "not-a-path/"], "ENTITY/PROJECT"),
        (["--wandb", "acme/missing"], "missing"),
    ],
)
def test_bad_history_choice_exits_2(
    wandb_url: tuple[FakeWandb, str], tmp_path: Path, args: list[str], message: str
) -> None:
    script = tmp_path / "nightly.sh"
    script.write_text(SCRIPT)
    result = CliRunner().invoke(app, ["review", "--file", str(script), *args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output


def test_review_links_regime_changes_to_pull_requests(tmp_path: Path) -> None:
    example = build_example()
    with FakeGitHub() as fake:
        repo = fake.add_repo("octo/rl", installation_id=5, files={"README.md": "x\n"})
        shas = {example.repo.initial_commit: repo.head("main")}
        for pull in example.repo.pulls:
            pr = repo.open_pr(pull.number, head=f"pr-{pull.number}", head_files={"f": "x"})
            sha = repo.commit("main", {f"c/{pull.number}": "x"}, message=pull.title)
            pr.state, pr.merged, pr.merge_commit_sha = "closed", True, sha
            pr.merged_at = pr.closed_at = repo.objects[sha].date
            repo.associate(sha, pull.number)
            shas[pull.merge_commit] = sha
        records = [
            {**r, "commit": shas.get(str(r.get("commit")), r.get("commit"))}
            for r in example.records
        ]
        history = tmp_path / "history.jsonl"
        history.write_text(dump_jsonl(records))
        script = tmp_path / "nightly.sh"
        script.write_text(example.head_script)
        token = fake.integration().get_access_token(5).token
        args = ["review", "--history", str(history), "--file", str(script), "--repo", "octo/rl"]
        env = {"GITHUB_TOKEN": token, "GITHUB_API_URL": fake.base_url}
        as_json = CliRunner().invoke(app, [*args, "--format", "json"], env=env)
        assert as_json.exit_code == 0, as_json.output
        review = json.loads(as_json.stdout)
        effects = set(example.repo.effect_pulls)
        linked = {n for change in review["changes"] for n in change["pulls"]}
        assert effects <= linked, (effects, linked)
        comment = CliRunner().invoke(app, [*args, "--format", "markdown"], env=env)
        assert comment.exit_code == 0, comment.output
        number = min(effects)
        assert f"/octo/rl/pull/{number}" in comment.stdout
        missing = CliRunner().invoke(app, args, env={"GITHUB_TOKEN": ""})
        assert missing.exit_code == 2 and "GitHub token" in missing.stderr


def test_web_url() -> None:
    assert web_url("https://api.github.com", "o/r") == "https://github.com/o/r"
    assert web_url("https://ghe.corp/api/v3", "o/r") == "https://ghe.corp/o/r"
