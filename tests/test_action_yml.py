"""action.yml run as GitHub's runner runs a composite action (issue 26, item 6).

Each ``run:`` step of action.yml is written to a script and run with ``bash --noprofile
--norc -eo pipefail``, in the workspace, with the runner's variables (``GITHUB_OUTPUT`` and
``GITHUB_STEP_SUMMARY`` fresh per step, ``GITHUB_EVENT_PATH``, ``GITHUB_WORKSPACE``,
``GITHUB_ACTION_PATH``, ``RUNNER_TEMP``…) and the step's ``env:``, whose expressions are
evaluated from the test's inputs by a small evaluator that knows ``inputs.*``,
``github.action_path``, ``github.token`` and ``steps.ID.outputs.NAME`` (any other expression
fails the test, so a new one is noticed).  The ``uses:`` steps are stood in for:
``actions/setup-python`` by a fresh virtualenv whose ``bin`` comes first on ``PATH``,
``actions/cache`` by pip's own cache (reused).  The action's checkout is a copy of the files
a clone would have (tests/clean_install.py), so the install step really installs the package
into that virtualenv and nothing of the developer's tree leaks in; pip may reach the registry.
The review step then runs against the local fake GitHub (tests/test_action.py's world).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tomllib
import uuid
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from tensorboardX import SummaryWriter

from bot.core.analysis.limits import recompute_limit
from bot.core.models import RuleSettings
from demo.data import SCRIPT_PATH
from tests.clean_install import copy_checkout
from tests.fakes.wandb_server import FakeWandb
from tests.test_action import HISTORY, NEW_SCRIPT, World, expected, ours
from tests.test_action import world_fixture as world_fixture  # the fixture "world"

ROOT = Path(__file__).resolve().parents[1]
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
# what the developer's pip needs to reach its registry, passed on to the steps' pip
PASSED_ON = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")

pytestmark = [
    pytest.mark.servers,
    pytest.mark.timeout(1200),  # a real pip install into a fresh virtualenv
]


@dataclass
class Step:
    """What running one step left: its exit status, output, step outputs and summary."""

    status: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str


@dataclass
class Run:
    """The steps run, by id (or name), in order; the first failing one ends the run."""

    steps: dict[str, Step] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)  # the action's own outputs

    @property
    def last(self) -> Step:
        return list(self.steps.values())[-1]


@dataclass(frozen=True)
class Runner:
    """The action's checkout (a copy of the tracked files) and the Python setup-python gives."""

    action_path: Path
    python_bin: Path


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """One action checkout and one virtualenv for the module (installs are then reused)."""
    base = tmp_path_factory.mktemp("runner")
    action_path = copy_checkout(base / "action")
    python = base / "hostedtoolcache" / "python"
    subprocess.run([sys.executable, "-m", "venv", str(python)], check=True)
    return Runner(action_path, python / "bin")


def _pip_cache() -> dict[str, str]:
    """This machine's pip cache, reused as actions/cache would restore it."""
    found = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True
    )
    return {"PIP_CACHE_DIR": found.stdout.strip()} if found.returncode == 0 else {}


def evaluate(
    text: str, inputs: Mapping[str, str], github: Mapping[str, str], steps: Mapping[str, Step]
) -> str:
    """``text`` with its ``${{ … }}`` expressions replaced; an unknown form fails the test."""

    def value(match: re.Match[str]) -> str:
        expression = match.group(1)
        if found := re.fullmatch(r"inputs\.([\w-]+)", expression):
            return inputs[found.group(1)]
        if found := re.fullmatch(r"github\.(action_path|token)", expression):
            return github[found.group(1)]
        if found := re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expression):
            step = steps.get(found.group(1))
            return step.outputs.get(found.group(2), "") if step else ""
        pytest.fail(f"action.yml: an expression the runner stand-in does not know: {expression}")

    return EXPRESSION.sub(value, text)


def _outputs(path: Path) -> dict[str, str]:
    """A step's outputs as written to ``GITHUB_OUTPUT``: ``name=value`` or heredoc lines."""
    outputs: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            for more in lines:
                if more == delimiter:
                    break
                body.append(more)
            outputs[name] = "\n".join(body)
        elif "=" in line:
            name, text = line.split("=", 1)
            outputs[name] = text
    return outputs


def run_action(
    runner: Runner,
    world: World,
    inputs: Mapping[str, str],
    job_env: Mapping[str, str] | None = None,
    stop_after: str | None = None,
) -> Run:
    """Run action.yml's steps in order, as the runner would, until one fails (or the step
    ``stop_after`` has run); ``job_env``: the environment the workflow gives the step."""
    action: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    declared = action["inputs"]
    assert set(inputs) <= set(declared), f"no such input: {set(inputs) - set(declared)}"
    github = {"action_path": str(runner.action_path), "token": world.token}
    values = {name: str(spec.get("default", "")) for name, spec in declared.items()}
    values = {name: evaluate(v, {}, github, {}) for name, v in values.items()} | dict(inputs)
    temp = world.tmp / "runner-temp"
    temp.mkdir(exist_ok=True)
    runner_env = {
        name: value for name, value in world.env().items() if not name.startswith("INPUT_")
    }
    runner_env.pop("GITHUB_TOKEN")  # not in a step's environment unless the step gives it
    environment = {
        **runner_env,
        **{k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in PASSED_ON},
        **_pip_cache(),
        "PATH": f"{runner.python_bin}{os.pathsep}{os.environ['PATH']}",  # setup-python's
        "CI": "true",
        "GITHUB_ACTION_PATH": str(runner.action_path),
        "RUNNER_TEMP": str(temp),
        **(job_env or {}),
    }
    result = Run()
    for number, step in enumerate(action["runs"]["steps"]):
        key = step.get("id") or step.get("name") or str(number)
        if "uses" in step:
            uses = step["uses"].split("@")[0]
            assert uses in ("actions/setup-python", "actions/cache"), f"no stand-in for {uses}"
            continue  # setup-python: runner.python_bin on PATH; cache: pip's cache, reused
        assert "if" not in step, f"{key}: a condition the stand-in does not evaluate"
        assert step.get("shell") == "bash", f"{key}: the runner's bash only"
        output, summary = temp / f"output-{number}", temp / f"summary-{number}"
        output.write_text("")
        summary.write_text("")
        script = temp / f"{uuid.uuid4()}.sh"
        script.write_text(step["run"], encoding="utf-8")
        env = {
            **environment,
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(summary),
            **{
                name: evaluate(str(text), values, github, result.steps)
                for name, text in (step.get("env") or {}).items()
            },
        }
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=world.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        result.steps[key] = Step(
            done.returncode, done.stdout, done.stderr, _outputs(output), summary.read_text()
        )
        if done.returncode != 0 or key == stop_after:
            break
    for name, spec in action.get("outputs", {}).items():
        result.outputs[name] = evaluate(spec["value"], values, github, result.steps)
    return result


def test_a_pull_request_reviewed_with_a_history_file(runner: Runner, world: World) -> None:
    run = run_action(runner, world, {"files": SCRIPT_PATH, "history": HISTORY})
    assert list(run.steps) == ["prepare", "Install threshold-bot", "review"]
    prepare = run.steps["prepare"]
    assert prepare.status == 0, prepare.stderr
    assert prepare.outputs["extras"] == ""  # a history file needs no client
    assert re.fullmatch(r"[0-9a-f]{32}", prepare.outputs["key"])
    install = run.steps["Install threshold-bot"]
    assert install.status == 0, install.stderr
    # installed into the fresh Python, from the action's copy, not the developer's tree
    where = subprocess.run(
        [str(runner.python_bin / "python"), "-c", "import bot; print(bot.__file__)"],
        cwd=world.tmp,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(runner.python_bin.parent), where
    review = run.last
    # the demo's PR loosens a gate: action_required, which the default fail-on fails on
    assert review.status == 1, review.stderr
    assert review.outputs == {"conclusion": "action_required"}, (review.stdout, review.stderr)
    assert run.outputs == {"conclusion": "action_required"}
    want = expected(world, (SCRIPT_PATH, world.head_script, world.base_script))
    assert review.summary == want
    [comment] = ours(world)
    assert comment.body == want
    assert world.fake.requests("GET", "/user") == []  # the workflow's token is not asked
    gates = sum(line.startswith("| <code>") for line in want.splitlines())
    assert f"threshold-bot: PR #1: action_required: {gates} gates in 1 file" in review.stdout


def test_the_wandb_input_installs_its_client_and_needs_the_key(
    runner: Runner, world: World, async_ci_wandb: tuple[FakeWandb, dict[str, str]]
) -> None:
    fake, settings = async_ci_wandb
    inputs = {
        "files": NEW_SCRIPT,
        "history": "",
        "wandb": "acme/gsm8k_fully_async_ci",
        "fail-on": "none",
    }
    run = run_action(runner, world, inputs, settings)
    assert run.steps["prepare"].outputs["extras"] == "wandb"
    review = run.last
    assert review.status == 0, review.stderr
    project = fake.projects[("acme", "gsm8k_fully_async_ci")].values()
    runs = sorted(project, key=lambda r: r.created_at)
    window = [r.summary["eval"]["all"]["avg_score"] for r in runs if r.state == "finished"][-20:]
    limit = recompute_limit(window, ">=", "0.40", RuleSettings())
    assert limit is not None
    [row] = [line for line in review.summary.splitlines() if line.startswith("| <code>")]
    assert "**0.40** (new)" in row and f"| {limit[0]:.2f} |" in row
    # a fork PR's workflow: the secret is empty; the job fails, saying which
    asked = fake.total_requests
    run = run_action(runner, world, inputs, {**settings, "WANDB_API_KEY": ""})
    review = run.last
    assert review.status == 2
    line = (
        "W&B: WANDB_API_KEY is not set (give it in the environment; a fork PR's workflow gets "
        "no secrets: docs/cli.md#fork-prs)"
    )
    assert review.stderr == f"threshold-bot: error: {line}\n"
    assert f"::error::threshold-bot: {line}" in review.stdout.splitlines()
    assert line in review.summary
    assert fake.total_requests == asked


def test_a_source_whose_client_is_not_installed(runner: Runner, world: World) -> None:
    config = "sources:\n  tracking: {kind: mlflow, experiment: gsm8k}\ndefault_source: tracking\n"
    world.repo.commit("main", {".github/threshold-bot.yml": config})  # the PR's base has it
    (world.workspace / ".github").mkdir()
    (world.workspace / ".github" / "threshold-bot.yml").write_text(config)
    (world.workspace / "ci" / "plain.sh").write_text(
        'ACC_MIN=0.40\npython check.py --asserts "eval/acc >= $ACC_MIN"\n'
    )
    run = run_action(runner, world, {"files": "ci/plain.sh", "history": ""})
    assert run.steps["prepare"].outputs["extras"] == ""
    review = run.last
    assert review.status == 2
    line = (
        "MLflow: needs the MLflow client (mlflow), which is not installed: "
        'pip install "threshold-bot[mlflow]"'
    )
    assert review.stderr == f"threshold-bot: error: {line}\n"
    assert f"::error::threshold-bot: {line}" in review.stdout.splitlines()


@pytest.mark.parametrize(
    ("extras", "message"),
    [
        ("wandb, torch", "unknown extra 'torch' (give wandb, mlflow or actions)"),
        ("wandb;rm -rf /", "give wandb, mlflow or actions, separated by commas"),
    ],
)
def test_an_unknown_extra_stops_before_the_install(
    runner: Runner, world: World, extras: str, message: str
) -> None:
    run = run_action(runner, world, {"files": SCRIPT_PATH, "extras": extras})
    assert list(run.steps) == ["prepare"]
    prepare = run.steps["prepare"]
    assert prepare.status == 2
    assert prepare.stdout == f"::error::extras: {message}\n"
    assert prepare.stderr == ""


@pytest.mark.parametrize(
    ("extras", "wandb", "installed"),
    [
        ("", "", ""),
        ("mlflow", "", "mlflow"),
        ("wandb,mlflow", "", "mlflow,wandb"),
        (" mlflow ,\nwandb,mlflow", "", "mlflow,wandb"),
        ("wandb", "acme/proj", "wandb"),
        ("", "acme/proj", "wandb"),
        ("actions", "", "actions"),
        ("wandb, actions", "acme/proj", "actions,wandb"),
    ],
)
def test_the_extras_installed(
    runner: Runner, world: World, extras: str, wandb: str, installed: str
) -> None:
    inputs = {"files": SCRIPT_PATH, "extras": extras, "wandb": wandb}
    run = run_action(runner, world, inputs, stop_after="prepare")
    prepare = run.steps["prepare"]
    assert prepare.status == 0, prepare.stderr
    assert prepare.outputs["extras"] == installed


def test_every_extra_the_action_installs_is_pinned_in_its_constraints() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    (prepare,) = [s for s in action["runs"]["steps"] if s.get("id") == "prepare"]
    found = re.search(r"for known in ([a-z ]+); do", prepare["run"])
    assert found is not None
    known = found.group(1).split()
    assert "actions" in known  # an actions source's TensorBoard files need its extra
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    lines = (ROOT / "constraints-action.txt").read_text(encoding="utf-8").splitlines()
    pinned = {canonicalize_name(ln.split("==")[0]) for ln in lines if "==" in ln}
    for extra in known:
        for requirement in extras[extra]:
            assert canonicalize_name(Requirement(requirement).name) in pinned, (extra, requirement)


def events_zip(tmp: Path, accuracy: float) -> bytes:
    """A nightly's artifact: the TensorBoard event file tensorboardX's SummaryWriter writes
    (``eval/acc`` at three steps, the last one ``accuracy``), zipped."""
    logdir = tmp / uuid.uuid4().hex
    with SummaryWriter(logdir=str(logdir)) as writer:
        for step, value in ((0, 0.1), (100, accuracy - 0.05), (200, accuracy)):
            writer.add_scalar("eval/acc", value, step)
    (path,) = logdir.glob("events.out.tfevents.*")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"logs/{path.name}", path.read_bytes())
    return out.getvalue()


# last in the module: the runner's Python keeps the extra installed here
def test_the_actions_extra_reads_the_nightlys_tensorboard_artifacts(
    runner: Runner, world: World
) -> None:
    config = (
        "sources:\n  nightly:\n    kind: actions\n    workflow: nightly.yml\n"
        "    artifact: tensorboard-logs\ndefault_source: nightly\n"
    )
    world.repo.commit("main", {".github/threshold-bot.yml": config})  # the PR's base has it
    (world.workspace / ".github").mkdir()
    (world.workspace / ".github" / "threshold-bot.yml").write_text(config)
    nightly = world.repo.add_workflow("nightly.yml")
    start = datetime(2026, 3, 1, 3, tzinfo=UTC)
    values = [round(0.80 + 0.003 * (i % 5), 3) for i in range(25)]
    for i, value in enumerate(values):
        run = world.repo.add_workflow_run(nightly, created_at=start + timedelta(days=i))
        world.repo.add_artifact(run, "tensorboard-logs", events_zip(world.tmp, value))
    path = "ci/acc.sh"
    (world.workspace / path).write_text(
        'ACC_MIN=0.79\npython check.py --asserts "eval/acc >= $ACC_MIN"\n', encoding="utf-8"
    )
    inputs = {"files": path, "history": "", "extras": "actions", "comment": "false"}

    run = run_action(runner, world, inputs)

    assert run.steps["prepare"].outputs["extras"] == "actions"
    review = run.last
    assert review.status == 0, review.summary
    window = values[-20:]
    limit = recompute_limit(window, ">=", "0.79", RuleSettings())
    assert limit is not None
    [row] = [line for line in review.summary.splitlines() if line.startswith("| <code>ACC")]
    assert "**0.79** (new)" in row and f"| {limit[0]:.2f} |" in row
    assert f"| {min(window):.4f} – {max(window):.4f} |" in row  # float32, as logged
