"""The Action judges a PR by its base (issue 27, item 1): a PR cannot choose the rule or the runs.

``threshold-bot action`` runs as the runner runs it (tests/test_action.py's ``run_action``)
against the local fake GitHub, seeded with the base commit; the workspace is the PR's checkout.
The PR loosens a gate 0.75 → 0.10 and, to pass, also rewrites what the review would read in
its checkout: the history file, the config, the history the config names.  Each is read at
the PR's base instead, and the PR is marked as changing it: ``action_required``, exit 1
under ``fail-on: action_required``, the reason in the summary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.github_api import FakeGitHub
from tests.fakes.wandb_server import FakeWandb
from tests.test_action import ACTIONS_APP, INSTALLATION, REPO, World, run_action

pytestmark = pytest.mark.servers

GATE = "ci/gate.sh"
HISTORY = "ci/history.jsonl"
CONFIG = ".github/threshold-bot.yml"
FORGED = "ci/forged.jsonl"
WANDB_PROJECT = "gsm8k_fully_async_ci"  # the fake W&B project of async_ci_wandb


def script(value: str, project: str | None = None, metric: str = "eval/acc") -> str:
    """A nightly script with one gate, ``metric >= value``; ``project``: the W&B project
    it names (none: the gate reads what the config or the workflow gives it)."""
    named = f' --project_name "{project}"' if project else ""
    return (
        "#!/usr/bin/env bash\n"
        f"ACC_MIN_VALUE={value}\n"
        f'python eval.py{named} --asserts "{metric} >= $ACC_MIN_VALUE"\n'
    )


def history(acc: float, noise: float = 0.11, runs: int = 25) -> str:
    """``runs`` finished runs whose ``eval/acc`` is about ``acc`` (``eval/noise``, ``noise``)."""
    lines = []
    for i in range(runs):
        wobble = (i % 5) / 500
        summary = {"eval/acc": round(acc + wobble, 4), "eval/noise": round(noise + wobble, 4)}
        run = {
            "id": f"run{i:03d}",
            "name": f"run_{i:03d}",
            "created_at": f"2026-06-{1 + i:02d}T08:00:00Z",
            "state": "finished",
            "summary": summary,
        }
        lines.append(json.dumps(run))
    return "\n".join(lines) + "\n"


BASE_CONFIG = f"sources:\n  runs:\n    kind: file\n    path: {HISTORY}\ndefault_source: runs\n"
HONEST = history(0.80)  # 0.75 sits under every run by a 5% margin or so; 0.10 is far too loose
FORGED_RUNS = history(0.105)  # runs that make 0.10 look just right


@pytest.fixture(name="base")
def base_fixture() -> Iterator[FakeGitHub]:
    """The fake GitHub acting as the GitHub Actions App."""
    with FakeGitHub(app_id=ACTIONS_APP[0], app_slug=ACTIONS_APP[1]) as fake:
        yield fake
        fake.check()


def world(
    fake: FakeGitHub,
    tmp: Path,
    base_files: dict[str, str],
    head_files: dict[str, str | None],
) -> World:
    """The base repository with PR #1 (from a fork) making ``head_files`` of ``base_files``
    (None: the PR deletes it), and the workspace its checkout holds."""
    repo = fake.add_repo(REPO, installation_id=INSTALLATION, files=base_files)
    token = fake.integration().get_access_token(INSTALLATION).token
    repo.open_pr(1, head="loosen", head_files=head_files, fork=True, user="mallory")
    workspace = tmp / "workspace"
    merged = {**base_files, **head_files}
    for path, text in merged.items():
        if text is not None:
            (workspace / path).parent.mkdir(parents=True, exist_ok=True)
            (workspace / path).write_text(text, encoding="utf-8")
    return World(fake, repo, token, tmp, workspace, HONEST, base_files[GATE], script("0.10"))


def review(w: World, **inputs: str) -> tuple[int, str, str]:
    """Run the action under ``fail-on: action_required``: (status, summary, conclusion)."""
    values = {"files": GATE, "history": HISTORY, "fail-on": "action_required", "comment": "false"}
    env = w.env(**(values | inputs))
    result = run_action(env)
    assert result.returncode in (0, 1), result.stderr
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    found = re.search("conclusion=(.+)", Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8"))
    assert found is not None
    return result.returncode, summary, found.group(1)


def loose_row(summary: str) -> str:
    [row] = [line for line in summary.splitlines() if line.startswith("| <code>ACC\\_MIN")]
    return row


def test_the_loosening_alone_requires_action(base: FakeGitHub, tmp_path: Path) -> None:
    w = world(base, tmp_path, {GATE: script("0.75"), HISTORY: HONEST}, {GATE: script("0.10")})
    status, summary, conclusion = review(w)
    assert (status, conclusion) == (1, "action_required")
    assert "the PR changes" not in summary  # nothing but the gate: no other reason given


@pytest.mark.parametrize("through", ["input", "config"])
def test_honest_tightening_passes(base: FakeGitHub, tmp_path: Path, through: str) -> None:
    files = {GATE: script("0.75"), HISTORY: HONEST}
    if through == "config":  # the config names the history: unchanged by the PR, no mark
        files[CONFIG] = BASE_CONFIG
    w = world(base, tmp_path, files, {GATE: script("0.76")})
    status, summary, conclusion = review(w, history=HISTORY if through == "input" else "")
    assert (status, conclusion) == (0, "success"), summary
    assert "the PR changes" not in summary


def test_a_rewritten_history_file_is_read_at_the_base(base: FakeGitHub, tmp_path: Path) -> None:
    w = world(
        base,
        tmp_path,
        {GATE: script("0.75"), HISTORY: HONEST},
        {GATE: script("0.10"), HISTORY: FORGED_RUNS},
    )
    status, summary, conclusion = review(w)
    assert (status, conclusion) == (1, "action_required")
    assert f"the PR changes {HISTORY}" in summary.replace("\\_", "_")
    # the base's runs were read: their smallest acc, not the forged one, is in the row
    assert "0.80" in loose_row(summary) and "0.105" not in loose_row(summary)
    # checked (the input), compared and read: one request, at the base
    asked = w.fake.requests("GET", f"/repos/{REPO}/contents/{HISTORY}")
    assert [c.query.get("ref") for c in asked] == [w.repo.head("main")]


def test_a_history_the_config_names_is_read_at_the_base(base: FakeGitHub, tmp_path: Path) -> None:
    w = world(
        base,
        tmp_path,
        {GATE: script("0.75"), HISTORY: HONEST, CONFIG: BASE_CONFIG},
        {GATE: script("0.10"), HISTORY: FORGED_RUNS},
    )
    status, summary, conclusion = review(w, history="")
    assert (status, conclusion) == (1, "action_required")
    assert f"the PR changes {HISTORY}" in summary.replace("\\_", "_")
    assert f"the PR changes {CONFIG}" not in summary.replace("\\_", "_")
    assert "0.105" not in loose_row(summary)


def test_a_config_pointing_at_a_history_the_pr_adds(base: FakeGitHub, tmp_path: Path) -> None:
    pointed = BASE_CONFIG.replace(HISTORY, FORGED)
    w = world(
        base,
        tmp_path,
        {GATE: script("0.75"), HISTORY: HONEST, CONFIG: BASE_CONFIG},
        {GATE: script("0.10"), CONFIG: pointed, FORGED: FORGED_RUNS},
    )
    status, summary, conclusion = review(w, history="")
    assert (status, conclusion) == (1, "action_required")
    text = summary.replace("\\_", "_")
    assert f"the PR changes {CONFIG}" in text
    assert FORGED not in loose_row(summary).replace("\\_", "_")
    # the file the PR adds was never asked for: the base's config names none
    assert w.fake.requests("GET", f"/repos/{REPO}/contents/{FORGED}") == []


def test_a_rewritten_config_is_read_at_the_base(base: FakeGitHub, tmp_path: Path) -> None:
    # the PR maps the gate's metric onto another key of the same runs, one 0.10 fits
    remapped = BASE_CONFIG + "metrics:\n  eval/acc: eval/noise\n"
    w = world(
        base,
        tmp_path,
        {GATE: script("0.75"), HISTORY: HONEST, CONFIG: BASE_CONFIG},
        {GATE: script("0.10"), CONFIG: remapped},
    )
    status, summary, conclusion = review(w, history="")
    assert (status, conclusion) == (1, "action_required")
    assert f"the PR changes {CONFIG}" in summary.replace("\\_", "_")
    assert "0.80" in loose_row(summary)


def test_the_config_input_is_read_at_the_base_too(base: FakeGitHub, tmp_path: Path) -> None:
    other = "ci/threshold-bot.yml"
    remapped = BASE_CONFIG + "metrics:\n  eval/acc: eval/noise\n"
    w = world(
        base,
        tmp_path,
        {GATE: script("0.75"), HISTORY: HONEST, other: BASE_CONFIG},
        {GATE: script("0.10"), other: remapped},
    )
    status, summary, conclusion = review(w, history="", config=other)
    assert (status, conclusion) == (1, "action_required")
    assert f"the PR changes {other}" in summary.replace("\\_", "_")


def test_a_history_the_pr_deletes_is_still_read_at_the_base(
    base: FakeGitHub, tmp_path: Path
) -> None:
    # the workspace need not hold the base's files (a shallow checkout, a deletion): the
    # base is read from GitHub at the event's base SHA, never from the checkout
    w = world(
        base,
        tmp_path,
        {GATE: script("0.75"), HISTORY: HONEST},
        {GATE: script("0.76"), HISTORY: None},
    )
    status, summary, conclusion = review(w)
    assert (status, conclusion) == (1, "action_required")
    assert f"the PR changes {HISTORY}" in summary.replace("\\_", "_")
    asked = w.fake.requests("GET", f"/repos/{REPO}/contents/{HISTORY}")
    assert {c.query.get("ref") for c in asked} == {w.repo.head("main")}


def test_a_project_the_pr_names_is_not_read(
    base: FakeGitHub,
    tmp_path: Path,
    async_ci_wandb: tuple[FakeWandb, dict[str, str]],
) -> None:
    fake, settings = async_ci_wandb
    w = world(
        base,
        tmp_path,
        {GATE: script("0.40", WANDB_PROJECT, "eval/all/avg_score")},
        {GATE: script("0.41", "mallory_project", "eval/all/avg_score")},
    )
    env = {**w.env(files=GATE, history="", comment="false"), **settings}
    result = run_action(env)
    assert result.returncode == 0, result.stderr
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "mallory\\_project" in summary and "not read until a maintainer approves" in summary
    assert "conclusion=action_required" in Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8")
    asked = {project for _, project in fake.projects_asked}
    assert WANDB_PROJECT in asked and "mallory_project" not in asked


def test_a_pr_that_changes_only_the_config(base: FakeGitHub, tmp_path: Path) -> None:
    # no threshold file changes; the rule it would judge the next PR by does
    loosened = BASE_CONFIG + "rule:\n  max_allowance: 1.0\n"
    w = world(
        base,
        tmp_path,
        {GATE: script("0.75"), HISTORY: HONEST, CONFIG: BASE_CONFIG},
        {CONFIG: loosened},
    )
    status, summary, conclusion = review(w, history="")
    assert (status, conclusion) == (1, "action_required")
    assert f"the PR changes {CONFIG}" in summary.replace("\\_", "_")


def test_a_history_replaced_by_a_link_out_of_the_checkout(base: FakeGitHub, tmp_path: Path) -> None:
    w = world(base, tmp_path, {GATE: script("0.75"), HISTORY: HONEST}, {GATE: script("0.76")})
    outside = tmp_path / "forged.jsonl"
    outside.write_text(FORGED_RUNS, encoding="utf-8")
    (w.workspace / HISTORY).unlink()
    (w.workspace / HISTORY).symlink_to(outside)
    status, summary, conclusion = review(w)
    assert (status, conclusion) == (1, "action_required")
    assert f"the PR changes {HISTORY}" in summary.replace("\\_", "_")
    assert "0.80" in loose_row(summary)
    assert str(tmp_path) not in summary


def test_a_history_input_naming_a_file_the_pr_adds(base: FakeGitHub, tmp_path: Path) -> None:
    # under pull_request the PR's workflow file runs: it may name a history file it adds
    w = world(
        base,
        tmp_path,
        {GATE: script("0.75"), HISTORY: HONEST},
        {GATE: script("0.10"), FORGED: FORGED_RUNS},
    )
    env = w.env(files=GATE, history=FORGED, comment="false", **{"fail-on": "action_required"})
    result = run_action(env)
    assert result.returncode == 2
    assert (
        result.stderr == f"threshold-bot: error: history {FORGED}: no such file at the PR's base\n"
    )


def test_an_invalid_config_at_the_base_gives_the_defaults_and_says_so(
    base: FakeGitHub, tmp_path: Path
) -> None:
    broken = "rule:\n  allowance: 5\n"
    w = world(
        base,
        tmp_path,
        {GATE: script("0.75"), HISTORY: HONEST, CONFIG: broken},
        {GATE: script("0.76")},
    )
    status, summary, conclusion = review(w)
    assert (status, conclusion) == (0, "success")  # the default rule: 0.76 follows it
    assert "rule.allowance" in summary and "using the default settings" in summary
    assert "the PR changes" not in summary
