"""The GitHub Action: ``threshold-bot action`` run as the runner runs it, and ``action.yml``.

The command runs in a subprocess with only the runner's environment: ``GITHUB_*`` variables,
the inputs as ``INPUT_*``, an event payload file made from GitHub's own ``pull_request``
webhook payload (tests/fixtures/github), ``GITHUB_STEP_SUMMARY`` a temp file, and a workspace
holding the PR's head files.  GitHub is the local fake (real PyGithub over HTTP), seeded with
the base commit, and acting as the GitHub Actions App: its token writes as
``github-actions[bot]``, like the workflow's ``GITHUB_TOKEN``.  Expected reviews come from
``threshold-bot review``'s own functions over the same files (the base as seeded).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from bot.adapters.history.files import read_history
from bot.cli.action import workflow_command
from bot.cli.main import app
from bot.cli.review import review_files
from bot.core.analysis.limits import recompute_limit
from bot.core.analysis.review import merge_reviews
from bot.core.models import RuleSettings
from bot.core.render.review import MARKER, render_comment
from demo.data import GATED_METRICS, SCRIPT_PATH, build_example, dump_jsonl
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_state import IssueComment, Repo
from tests.fakes.wandb_server import FakeWandb
from tests.webhooks import fixture, patched

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parents[1]
REPO = "octo/ml"
INSTALLATION = 9
ACTIONS_APP = (15368, "github-actions")  # the App behind a workflow's GITHUB_TOKEN
HISTORY = "ci/history.jsonl"
NEW_SCRIPT = "ci/long_context.sh"
NEW_TEXT = """#!/usr/bin/env bash
LONG_ACC_MIN_VALUE=0.40
python eval.py --project_name "gsm8k_fully_async_ci" \\
  --asserts "eval/all/avg_score >= $LONG_ACC_MIN_VALUE"
"""
REPO_URL = "https://github.com/octo/ml"
BIN = Path(sys.executable).with_name("threshold-bot")


@dataclass
class World:
    """The fake GitHub, the base repository with an open PR, and the runner's files."""

    fake: FakeGitHub
    repo: Repo
    token: str
    tmp: Path
    workspace: Path
    history: str  # the history file's text
    base_script: str
    head_script: str

    def env(self, event: str = "pull_request", **inputs: str) -> dict[str, str]:
        """The environment of the action's step: the runner's variables and the inputs."""
        pr = self.repo.pr(1)
        payload = patched(
            fixture("pull_request.opened"),
            {
                "number": 1,
                "pull_request.number": 1,
                "pull_request.base.sha": self.repo.head("main"),
                "pull_request.base.ref": "main",
                "pull_request.head.sha": pr.head_sha,
                "pull_request.head.ref": pr.head_ref,
                "repository.full_name": REPO,
                "repository.name": "ml",
                "repository.owner.login": "octo",
            },
        )
        if event == "push":
            payload = patched(fixture("push"), {"repository.full_name": REPO})
        event_path = self.tmp / "event.json"
        event_path.write_text(json.dumps(payload), encoding="utf-8")
        summary = self.tmp / "summary.md"
        summary.write_text("", encoding="utf-8")  # each step gets its own, empty
        values = {"files": f"{SCRIPT_PATH} ci/*.sh", "history": HISTORY, "fail-on": "none"}
        values |= inputs
        return {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.tmp),
            "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(event_path),
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": self.fake.base_url,
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_TOKEN": self.token,
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(self.tmp / "output.txt"),
            "GITHUB_WORKSPACE": str(self.workspace),
            **{f"INPUT_{name.upper().replace('-', '_')}": v for name, v in values.items()},
        }

    def comments(self) -> list[str]:
        return [c.body for c in self.repo.comments(1)]


def run_action(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``threshold-bot action`` as the composite step runs it: its environment only."""
    return subprocess.run(
        [str(BIN), "action"], env=env, cwd=env["HOME"], capture_output=True, text=True, timeout=120
    )


def invoke(env: dict[str, str]) -> Result:
    """The same in this process (faster): the runner's variables replace this process's."""
    runner_env: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("GITHUB_", "INPUT_", "WANDB_", "MLFLOW_"))
    }
    return CliRunner().invoke(app, ["action"], env={**runner_env, **env})


@pytest.fixture(name="world")  # also tests/test_action_yml.py's
def world_fixture(tmp_path: Path) -> Iterator[World]:
    example = build_example()
    history = dump_jsonl(example.records)
    with FakeGitHub(app_id=ACTIONS_APP[0], app_slug=ACTIONS_APP[1]) as fake:
        repo = fake.add_repo(
            REPO,
            installation_id=INSTALLATION,
            files={SCRIPT_PATH: example.base_script, HISTORY: history, "README.md": "# ml\n"},
        )
        repo.open_pr(
            1,
            head="rebaseline",
            head_files={SCRIPT_PATH: example.head_script, NEW_SCRIPT: NEW_TEXT},
        )
        workspace = tmp_path / "workspace"  # actions/checkout of the PR
        for path, text in (
            (SCRIPT_PATH, example.head_script),
            (NEW_SCRIPT, NEW_TEXT),
            (HISTORY, history),
            ("README.md", "# ml\n"),
        ):
            (workspace / path).parent.mkdir(parents=True, exist_ok=True)
            (workspace / path).write_text(text, encoding="utf-8")
        token = fake.integration().get_access_token(INSTALLATION).token
        yield World(
            fake,
            repo,
            token,
            tmp_path,
            workspace,
            history,
            example.base_script,
            example.head_script,
        )
        fake.check()


def expected(world: World, *files: tuple[str, str, str]) -> str:
    """The comment ``threshold-bot review`` gives for ``(path, head, base)`` files, merged."""
    reviews = []
    history = read_history(world.workspace / HISTORY).model_copy(
        update={"source": f"file:{HISTORY}"}
    )
    for n, (path, head, base) in enumerate(files):
        head_file, base_file = world.tmp / f"head{n}", world.tmp / f"base{n}"
        head_file.write_text(head, encoding="utf-8")
        base_file.write_text(base, encoding="utf-8")
        reviews.append(review_files(history, head_file, base_file, label=path))
    options = f"--history {HISTORY}"  # the action repeats its own history in the command
    return render_comment(
        merge_reviews(reviews), repo_url=REPO_URL, app_mode=False, cli_options=options
    )


def ours(world: World) -> list[IssueComment]:
    """The PR's comments written by the workflow's token."""
    return [c for c in world.repo.comments(1) if c.user == "github-actions[bot]"]


def test_pull_request_review_goes_to_the_summary_and_one_comment(world: World) -> None:
    # someone quoting the marker: not the action's comment, never edited
    quoted = world.repo.add_comment(1, f"{MARKER}\nquoted", user="alice")
    env = world.env(files=SCRIPT_PATH)
    result = run_action(env)
    assert result.returncode == 0, result.stderr
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    # the base came from GitHub: the review is that of the base and head scripts
    want = expected(world, (SCRIPT_PATH, world.head_script, world.base_script))
    assert summary == want
    assert summary.splitlines()[0] == MARKER
    assert all(name.replace("_", "\\_") in summary for name in GATED_METRICS)
    assert "/rebaseline" not in summary and "Approve thresholds" not in summary
    [comment] = ours(world)
    assert comment.body == summary
    base = world.repo.head("main")
    reads = world.fake.requests("GET", f"/repos/{REPO}/contents/{SCRIPT_PATH}")
    assert [c.query.get("ref") for c in reads] == [base]
    conclusion = re.search("conclusion=(.+)", Path(env["GITHUB_OUTPUT"]).read_text())
    assert conclusion is not None and conclusion.group(1) == "action_required"
    gates = sum(line.startswith("| <code>") for line in summary.splitlines())
    said = f"threshold-bot: PR #1: action_required: {gates} gates in 1 file"
    assert said in result.stdout.splitlines()
    # the workflow's token is an installation token: it is never asked who it is (a 403)
    assert world.token.startswith("ghs_")

    # a second run (another window: another body) edits that comment in place
    again = run_action(world.env(files=SCRIPT_PATH, window="10"))
    assert again.returncode == 0, again.stderr
    [edited] = ours(world)
    assert edited.id == comment.id and edited.body != want
    assert world.repo.issue_comments[quoted.id].body == f"{MARKER}\nquoted"
    assert MARKER in edited.body and "10 runs" in edited.body
    assert len(world.fake.requests("PATCH", f"/repos/{REPO}/issues/comments/{comment.id}")) == 1
    assert len(world.fake.requests("POST", f"/repos/{REPO}/issues/1/comments")) == 1
    assert world.fake.requests("GET", "/user") == []


def test_a_personal_token_is_asked_for_its_login(world: World) -> None:
    token = "ghp_" + "a" * 36  # a personal token's prefix: GET /user names its user
    world.fake.state.tokens[token] = (INSTALLATION, datetime.now(UTC) + timedelta(hours=1))
    result = run_action({**world.env(files=SCRIPT_PATH, comment="false"), "GITHUB_TOKEN": token})
    assert result.returncode == 0, result.stderr
    assert len(world.fake.requests("GET", "/user")) == 1


def test_several_files_and_a_file_the_pr_adds(world: World) -> None:
    env = world.env(comment="false")
    result = run_action(env)
    assert result.returncode == 0, result.stderr
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    empty = "#!/usr/bin/env bash\n"  # no base: every gate of the new file is new
    want = expected(
        world,
        (NEW_SCRIPT, NEW_TEXT, empty),
        (SCRIPT_PATH, world.head_script, world.base_script),
    )
    assert summary == want
    rows = [line for line in summary.splitlines() if line.startswith("| <code>")]
    row = next(line for line in rows if "LONG\\_ACC\\_MIN\\_VALUE" in line)
    assert "**0.40** (new)" in row
    said = f"threshold-bot: PR #1: action_required: {len(rows)} gates in 2 files"
    assert said in result.stdout.splitlines()
    assert not any("(new)" in line for line in rows if "EVAL\\_ACC" in line)
    assert world.comments() == []  # comment: false
    # the added file was asked for at the base and GitHub had none
    asked = world.fake.requests("GET", f"/repos/{REPO}/contents/{NEW_SCRIPT}")
    assert [c.status for c in asked] == [404]


def test_fail_on(world: World) -> None:
    failed = run_action(world.env(files=SCRIPT_PATH, comment="false", **{"fail-on": "neutral"}))
    assert failed.returncode == 1, failed.stderr
    failed = run_action(
        world.env(files=SCRIPT_PATH, comment="false", **{"fail-on": "action_required"})
    )
    assert failed.returncode == 1, failed.stderr
    assert "action_required" in failed.stdout


def test_push_event_audits_to_the_summary_without_a_comment(world: World) -> None:
    env = world.env(event="push", files=SCRIPT_PATH)
    result = run_action(env)
    assert result.returncode == 0, result.stderr
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    head = world.workspace / SCRIPT_PATH
    history = read_history(world.workspace / HISTORY).model_copy(
        update={"source": f"file:{HISTORY}"}
    )
    audit = review_files(history, head, None, label=SCRIPT_PATH)
    options = f"--history {HISTORY}"
    assert summary == render_comment(audit, repo_url=REPO_URL, app_mode=False, cli_options=options)
    assert world.comments() == []
    calls = world.fake.requests()
    assert [c for c in calls if c.path.startswith("/repos/")] == []  # GitHub is not asked


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"files": "nothing/*.sh"}, "no file in the repository matches nothing/*.sh"),
        ({"files": "../outside.sh"}, "'..' segment"),
        ({"history": "ci/none.jsonl"}, "history ci/none.jsonl: no such file"),
        ({"wandb": "acme/proj", "history": ""}, "W&B: WANDB_API_KEY is not set"),
        # the project the script names at the base (and the head), needed without the input
        ({"files": SCRIPT_PATH, "history": ""}, "W&B: WANDB_API_KEY is not set (give it"),
        ({"fail-on": "sometimes"}, "fail-on: expected one of"),
        ({"comment": "maybe"}, "comment: expected true or false"),
        ({"config": "none.yml"}, "none.yml"),
    ],
)
def test_errors_are_one_line_in_the_log_and_the_summary(
    world: World, inputs: dict[str, str], message: str
) -> None:
    env = world.env(**inputs)
    result = invoke(env)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("threshold-bot: error: ") and message in line
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert message in summary and "Traceback" not in summary + result.stderr
    assert str(world.tmp) not in line  # no machine path
    assert world.comments() == []
    # and as an annotation on the run's page (no %, CR or LF here to escape)
    said = line.removeprefix("threshold-bot: error: ")
    assert result.stdout.splitlines()[-1] == f"::error::threshold-bot: {said}"


def test_an_error_annotation_escapes_what_would_end_it(world: World) -> None:
    # % is the escape character of workflow commands; CR and LF would end the command
    pattern = "100%/x/*.sh"
    result = invoke(world.env(files=pattern))
    assert result.exit_code == 2
    annotation = result.stdout.splitlines()[-1]
    assert annotation == (
        "::error::threshold-bot: files: no file in the repository matches 100%25/x/*.sh"
    )
    assert workflow_command("error", "a%b\rc\nd") == "::error::a%25b%0Dc%0Ad"


def test_a_pr_that_changes_no_matched_file(world: World) -> None:
    assert run_action(world.env(files=SCRIPT_PATH)).returncode == 0
    [comment] = world.repo.comments(1)
    env = world.env(files="README.md", **{"fail-on": "neutral"})
    result = invoke(env)
    assert result.exit_code == 0, result.output
    note = "threshold-bot: PR #1 changes no threshold file (1 file matched)"
    assert note in Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    [edited] = world.repo.comments(1)  # the earlier review no longer stands: it says so
    assert edited.id == comment.id and edited.body == f"{MARKER}\n{note}.\n"


def test_a_refused_comment_warns_and_keeps_the_summary(world: World) -> None:
    world.fake.fail_next("POST", r"/issues/1/comments$", status=403)
    env = world.env(files=SCRIPT_PATH)
    result = run_action(env)
    assert result.returncode == 0, result.stderr
    assert "::warning::could not post the PR comment" in result.stdout
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert summary.startswith(MARKER) and "could not post the PR comment" in summary


# --------------------------------------------------------------------------- action.yml


def test_action_yml_passes_every_input_through_env() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert steps[0]["uses"].startswith("actions/setup-python@")
    assert steps[0]["with"]["python-version"] == "${{ inputs.python-version }}"
    passed: set[str] = set()
    for step in steps:
        run = step.get("run", "")
        assert "${{" not in run, f"an expression in the script text of {step.get('name')}"
        for value in (step.get("env") or {}).values():
            passed |= set(re.findall(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", str(value)))
        passed |= set(re.findall(r"inputs\.([\w-]+)", json.dumps(step.get("with") or {})))
    assert passed == set(action["inputs"])
    install = next(s for s in steps if "pip install" in s.get("run", ""))
    assert install["env"]["ACTION_PATH"] == "${{ github.action_path }}"
    assert '"$ACTION_PATH"' in install["run"]
    review = next(s for s in steps if "threshold-bot" in s.get("run", ""))
    assert review["run"].strip() == "threshold-bot action"
    # every input the command reads, under the name the step gives it (the install's aside)
    env = review["env"]
    for name in set(action["inputs"]) - {"github-token", "python-version", "extras"}:
        assert env[f"INPUT_{name.upper().replace('-', '_')}"] == f"${{{{ inputs.{name} }}}}"
    assert env["GITHUB_TOKEN"] == "${{ inputs.github-token }}"
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"


def test_history_from_wandb_or_the_project_the_script_names(
    world: World, async_ci_wandb: tuple[FakeWandb, dict[str, str]]
) -> None:
    fake, settings = async_ci_wandb
    summaries = []
    for files, inputs in (
        (NEW_SCRIPT, {"wandb": "acme/gsm8k_fully_async_ci"}),
        (NEW_SCRIPT, {}),  # the project the PR's new script names: not the base's choice
        (SCRIPT_PATH, {}),  # the project the script names at the base and the head
    ):
        env = {**world.env(files=files, history="", comment="false", **inputs), **settings}
        result = run_action(env)
        assert result.returncode == 0, result.stderr
        summaries.append(Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8"))
    rows = [[line for line in s.splitlines() if line.startswith("| <code>")] for s in summaries]
    assert "<code>wandb:acme/gsm8k\\_fully\\_async\\_ci</code>, instead of" in summaries[0]
    # without the input a source the PR names is shown, not read (the App's rule)
    [proposed] = rows[1]
    assert "**0.40** (new)" in proposed and "reads a new source" in proposed
    assert "not read until a maintainer approves" in summaries[1]
    assert sum(fake.projects_asked.values()) == 2  # the first run's, then the third's
    assert (
        "W&B project <code>gsm8k\\_fully\\_async\\_ci</code>, named in the script" in (summaries[2])
    )
    finished = sorted(
        (r for r in fake.projects[("acme", "gsm8k_fully_async_ci")].values()),
        key=lambda r: r.created_at,
    )
    window = [r.summary["eval"]["all"]["avg_score"] for r in finished if r.state == "finished"]
    limit = recompute_limit(window[-20:], ">=", "0.40", RuleSettings())
    assert limit is not None
    [row] = rows[0]
    assert "LONG\\_ACC\\_MIN\\_VALUE" in row and "**0.40** (new)" in row
    assert f"| {limit[0]:.2f} |" in row


def test_a_file_with_only_hints_is_a_neutral_review_listing_them(world: World) -> None:
    path = "ci/nightly_ppl.sh"
    script = '#!/usr/bin/env bash\nPPL_CEILING=14.2\n./bin/score --max-ppl "$PPL_CEILING"\n'
    (world.workspace / path).write_text(script, encoding="utf-8")
    env = world.env(event="push", files=path)
    result = invoke(env)
    assert result.exit_code == 0, result.output
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "No gate bound" in summary and "no threshold gates found" not in summary
    assert "PPL\\_CEILING</code> = 14.2" in summary  # the hint, then the lines that bind it
    assert f"  - path: {path}\n    gates:\n      - key: PPL_CEILING\n" in summary
    assert "conclusion=neutral" in Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8")
    assert "audit: neutral: 0 gates, 1 hint in 1 file" in result.stdout
    failed = invoke(world.env(event="push", files=path, **{"fail-on": "neutral"}))
    assert failed.exit_code == 1


def nightly_archive(accuracy: float) -> bytes:
    """The nightly's artifact: a zip holding its results JSON."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("results.json", json.dumps({"accuracy": accuracy}))
    return out.getvalue()


ACTIONS_CONFIG = (
    "sources:\n  nightly:\n    kind: actions\n    workflow: nightly.yml\n"
    "    artifact: nightly-results\n    file: results.json\ndefault_source: nightly\n"
)


def test_the_workflows_token_reads_the_configs_actions_source(world: World) -> None:
    world.repo.commit("main", {".github/threshold-bot.yml": ACTIONS_CONFIG})  # at the base
    nightly = world.repo.add_workflow("nightly.yml")
    start = datetime(2026, 3, 1, 3, tzinfo=UTC)
    values = [round(0.80 + 0.003 * (i % 5), 4) for i in range(30)]
    for i, value in enumerate(values):
        run = world.repo.add_workflow_run(nightly, created_at=start + timedelta(days=i))
        world.repo.add_artifact(run, "nightly-results", nightly_archive(value))
    world.repo.branches["poison"] = world.repo.head("main")  # a PR's run: never history
    poisoned = world.repo.add_workflow_run(
        nightly, event="pull_request", branch="poison", created_at=start + timedelta(days=40)
    )
    world.repo.add_artifact(poisoned, "nightly-results", nightly_archive(0.10))
    path = "ci/acc.sh"
    (world.workspace / path).write_text(
        'ACC_MIN=0.79\npython check.py --asserts "accuracy >= $ACC_MIN"\n', encoding="utf-8"
    )
    env = world.env(files=path, history="", comment="false")

    result = invoke(env)

    assert result.exit_code == 0, result.output
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    window = values[-20:]
    limit = recompute_limit(window, ">=", "0.79", RuleSettings())
    assert limit is not None
    [row] = [line for line in summary.splitlines() if line.startswith("| <code>ACC")]
    assert "**0.79** (new)" in row and f"| {limit[0]:.2f} |" in row
    assert f"| {min(window):.3f} – {max(window):.3f} |" in row  # the poisoned 0.10 is not in it
    assert "30 runs: 30 finished" in summary
    assert any("/actions/workflows/nightly.yml" in c.path for c in world.fake.calls)


def test_a_tensorboard_artifact_without_the_actions_extra_says_which_extra(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ACTIONS_CONFIG.replace("results.json", "logs/events.out.tfevents.1")
    world.repo.commit("main", {".github/threshold-bot.yml": config})
    nightly = world.repo.add_workflow("nightly.yml")
    run = world.repo.add_workflow_run(nightly)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("logs/events.out.tfevents.1", b"")  # its reader is never reached
    world.repo.add_artifact(run, "nightly-results", out.getvalue())
    path = "ci/acc.sh"
    (world.workspace / path).write_text(
        'ACC_MIN=0.79\npython check.py --asserts "eval/acc >= $ACC_MIN"\n', encoding="utf-8"
    )
    for name in [m for m in sys.modules if m.split(".")[0] == "tensorboardX"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # the extra not installed
    env = world.env(files=path, history="", comment="false")

    result = invoke(env)

    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert 'pip install "threshold-bot[actions]"' in line and "TensorBoard" in line
    said = line.removeprefix("threshold-bot: error: ")
    assert said.startswith("GitHub Actions: ")
    assert result.stdout.splitlines()[-1] == f"::error::threshold-bot: {said}"
    assert said in Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
