"""The small things a new user trips on (issues 15 and 26), each through the real CLI:
allowances written as percentages, a misspelled CSV column, plain-worded validation errors
(each config error on its own line, each value error repeating the value), ``did you mean``,
usage errors pointing to the command's help, ``--version`` / ``-h`` / a bare command,
completion, help texts and ``serve``'s settings (all missing ones at once, ``HOST`` /
``PORT`` from ``.env``)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner, Result

from bot.cli.main import app
from tests.live import make_pem, wait_until

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parent.parent
RUNNER = CliRunner()
CLI = [sys.executable, "-c", "from bot.cli.main import app; app(prog_name='threshold-bot')"]

CONFIG = """\
files:
  - path: ci/thresholds.yaml
    gates:
      - {key: eval.acc_min, metric: acc, op: ">="}
"""
STATES = ["finished", "crashed", "finished", "finished", "killed", "finished"]
ACCURACIES = [0.91, 0.12, 0.90, 0.92, 0.30, 0.89]


def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return RUNNER.invoke(app, [str(a) for a in args], prog_name="threshold-bot", env=env)


def error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "thresholds.yaml").write_text("eval:\n  acc_min: 0.80\n")
    (tmp_path / "config.yml").write_text(CONFIG)
    return tmp_path


def history(path: Path, state_column: str) -> Path:
    rows = [f"id,created_at,{state_column},acc"]
    rows += [
        f"r{i},2026-01-{i + 1:02d}T00:00:00Z,{state},{acc}"
        for i, (state, acc) in enumerate(zip(STATES, ACCURACIES, strict=True))
    ]
    path.write_text("\n".join(rows) + "\n")
    return path


def review(repo: Path, *extra: str | Path, config: Path | None = None) -> Result:
    return run(
        "review",
        "--history",
        history(repo / "runs.csv", "state"),
        "--file",
        repo / "ci" / "thresholds.yaml",
        "--config",
        config or repo / "config.yml",
        "--format",
        "json",
        *extra,
    )


# --------------------------------------------------------------------------- allowances


@pytest.mark.parametrize("written", ["5%", "0.05", "12.5%", "0.125"])
def test_allowance_as_a_percentage_or_a_fraction_on_the_command_line(
    repo: Path, written: str
) -> None:
    result = review(repo, "--allowance", written)
    assert result.exit_code == 0, result.stderr
    expected = float(written.rstrip("%")) / (100 if written.endswith("%") else 1)
    assert json.loads(result.stdout)["rule"]["allowance"] == pytest.approx(expected)


def test_allowance_as_a_percentage_in_the_config(repo: Path) -> None:
    config = repo / "percent.yml"
    config.write_text(CONFIG + "rule:\n  allowance: 7.5%\n")
    result = review(repo, config=config)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["rule"]["allowance"] == pytest.approx(0.075)


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("five", "--allowance: invalid allowance `five`: write a percentage like `5%` or `0.05`"),
        ("150%", "--allowance: allowance `150%` is over 100%"),
        ("30%", "--allowance: 30% is over max_allowance (25%)"),
    ],
)
def test_a_bad_allowance_is_one_plain_line(repo: Path, written: str, message: str) -> None:
    result = review(repo, "--allowance", written)
    assert result.exit_code == 2
    assert error_line(result) == f"threshold-bot: error: {message}"


# --------------------------------------------------------------------------- CSV columns


@pytest.mark.parametrize("column", ["stat", "State ", "sate"])
def test_a_misspelled_state_column_is_named_with_did_you_mean(repo: Path, column: str) -> None:
    result = run(
        "review",
        "--history",
        history(repo / "runs.csv", column),
        "--file",
        repo / "ci" / "thresholds.yaml",
        "--config",
        repo / "config.yml",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    review = json.loads(result.stdout)
    name = column.strip()
    text_cells = len(STATES)
    assert any(
        f"column `{name}` holds text, not numbers ({text_cells} cells)" in w
        and w.endswith("did you mean `state`?")
        for w in review["warnings"]
    ), review["warnings"]
    # the warning is why: without a state column every run counts as finished
    assert review["history"]["finished"] == len(STATES)


def test_a_correct_state_column_gives_no_column_warning(repo: Path) -> None:
    result = review(repo)
    assert result.exit_code == 0, result.stderr
    review_ = json.loads(result.stdout)
    assert not [w for w in review_["warnings"] if "column" in w]
    assert review_["history"]["finished"] == STATES.count("finished")


# --------------------------------------------------------------------------- config errors


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rule:\n  windw: 20\n", "cfg.yml:2: rule.windw: unknown setting (did you mean `window`?)"),
        ("fils: []\n", "cfg.yml:1: fils: unknown setting (did you mean `files`?)"),
        (
            "sources:\n  a: {kind: file, pth: runs.csv}\n",
            "cfg.yml:2: sources.a.pth: unknown setting (did you mean `path`?)",
        ),
        ("rule:\n  colour: 1\n", "cfg.yml:2: rule.colour: unknown setting"),
        (
            "rule:\n  significant_digits: many\n",
            "cfg.yml:2: rule.significant_digits: expected a whole number, not 'many'",
        ),
        (
            "regimes:\n  penalty: lots\n",
            "cfg.yml:2: regimes.penalty: expected a number, not 'lots'",
        ),
        ("rule:\n  allowance: 2\n", "cfg.yml:2: rule.allowance: must be at most 1, not 2"),
        (
            "files:\n  - path: a.yaml\n    gates:\n      - {key: a, metric: m, op: =>}\n",
            "cfg.yml:4: files.0.gates.0.op: expected one of '>=', '>', '<=', '<' or '==', not '=>'",
        ),
    ],
)
def test_config_errors_in_plain_words(repo: Path, text: str, message: str) -> None:
    (repo / "cfg.yml").write_text(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(repo)
        result = review(repo, config=Path("cfg.yml"))
    assert result.exit_code == 2
    line = error_line(result)
    assert line == f"threshold-bot: error: {message}"
    assert "Input should" not in line and "unable to parse" not in line


def test_window_option_error_in_plain_words(repo: Path) -> None:
    result = review(repo, "--window", "last-5")
    assert result.exit_code == 2
    assert error_line(result).startswith("threshold-bot: error: --window: invalid window")


def test_each_config_error_carries_its_own_line(repo: Path) -> None:
    text = "rule:\n  allowance: 5\n\n  windw: 20\nfiles: []\n"
    lines = text.splitlines()
    (repo / "cfg.yml").write_text(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(repo)
        result = review(repo, config=Path("cfg.yml"))
    assert result.exit_code == 2
    allowance, windw = lines.index("  allowance: 5") + 1, lines.index("  windw: 20") + 1
    assert error_line(result) == (
        f"threshold-bot: error: cfg.yml:{allowance}: rule.allowance: must be at most 1, not 5;"
        f" cfg.yml:{windw}: rule.windw: unknown setting (did you mean `window`?)"
    )


@pytest.mark.parametrize(
    ("option", "given", "problem"),
    [
        ("--window", "since:2026-13-01", "month must be in 1..12"),
        ("--window", "since:2026-02-30", "day is out of range for month"),
        ("--window", "0", "must hold at least 1 run"),
        ("--window", "7000", "at most 1,000 runs"),
        ("--allowance", "0.5", "50% is over max_allowance (25%)"),
        ("--allowance", "lots", "write a percentage like `5%` or `0.05`"),
    ],
)
def test_a_value_error_repeats_the_value_given(
    repo: Path, option: str, given: str, problem: str
) -> None:
    result = review(repo, f"{option}={given}")
    assert result.exit_code == 2
    line = error_line(result)
    assert line.startswith(f"threshold-bot: error: {option}") and line.endswith(problem)
    assert given in line


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["review", "--format", "yaml"], "threshold-bot review"),
        (["drift", "--history", "h.jsonl"], "threshold-bot drift"),
        (["db", "upgrade", "--bogus"], "threshold-bot db upgrade"),
        (["revew"], "threshold-bot"),
        (["--bogus"], "threshold-bot"),
    ],
)
def test_a_usage_error_points_to_the_commands_help(args: list[str], command: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    line = error_line(result)
    assert line.endswith(f"(see '{command} --help')")
    assert "Value error" not in line  # pydantic's prefix, as typer passes it on
    assert run(*command.split()[1:], "--help").exit_code == 0  # the help it names exists


def test_a_bad_audit_repository_is_repeated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    line = error_line(run("audit", "--repo", "no-slash", "--database-url", url))
    assert line == (
        "threshold-bot: error: Invalid value for --repo: 'no-slash': expected owner/name"
        " (see 'threshold-bot audit --help')"
    )


def test_a_bad_format_names_the_value_and_the_choices() -> None:
    line = error_line(run("review", "--format", "yaml"))
    assert "'yaml' is not one of 'markdown', 'json', 'table', 'html'" in line


def test_a_wandb_project_without_entity_names_wandb_entity(repo: Path) -> None:
    env = {"WANDB_ENTITY": "", "WANDB_API_KEY": "x" * 40}
    result = run("review", "--file", repo / "ci" / "thresholds.yaml", "--wandb", "proj", env=env)
    assert result.exit_code == 2
    assert error_line(result) == (
        "threshold-bot: error: invalid W&B project 'proj': give ENTITY/PROJECT, or PROJECT with"
        " WANDB_ENTITY set"
    )


# --------------------------------------------------------------------------- global options


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout == f"threshold-bot {version('threshold-bot')}\n"


def test_h_is_help() -> None:
    short, long = run("-h"), run("--help")
    assert short.exit_code == long.exit_code == 0
    assert short.stdout == long.stdout
    assert short.stdout.startswith("Usage: threshold-bot [OPTIONS] COMMAND [ARGS]...")
    sub = run("review", "-h")
    assert sub.exit_code == 0 and "--allowance" in sub.stdout


def test_a_bare_command_prints_the_help_and_exits_2() -> None:
    result = run()
    assert result.exit_code == 2  # click's convention for a group called without a command
    assert result.stderr == run("--help").stdout


def test_shell_completion_is_offered() -> None:
    assert "--install-completion" in run("--help").stdout
    # typer detects the shell from the parent processes, which a test runner may not have;
    # its switch for tests makes --show-completion take the shell's name instead
    env = _clean_env(ROOT) | {"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    result = subprocess.run(  # a process of its own: typer reads that switch at import
        [*CLI, "--show-completion", "bash"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "_THRESHOLD_BOT_COMPLETE=complete_bash" in result.stdout


def test_top_level_help_at_80_columns_cuts_no_command() -> None:
    result = run("--help", env={"COLUMNS": "80"})
    assert result.exit_code == 0
    commands = result.stdout.split("Commands:\n", 1)[1]
    flat = " ".join(commands.split())
    assert "..." not in commands
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    for name, command in group.commands.items():
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert first and f"{name} {first}" in flat
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


@pytest.mark.parametrize("name", ["review", "sync", "serve", "worker", "audit", "check-config"])
def test_help_texts_show_no_rst_markup(name: str) -> None:
    result = run(name, "--help")
    assert result.exit_code == 0
    assert "``" not in result.stdout and ":func:" not in result.stdout


# --------------------------------------------------------------------------- serve


def _clean_env(cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_serve_names_every_missing_setting_on_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [*CLI, "serve"], env=_clean_env(tmp_path), cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "threshold-bot: error: APP_ID: required (the GitHub App's id); "
        "PRIVATE_KEY: required (or PRIVATE_KEY_PATH, a PEM file); "
        "WEBHOOK_SECRET: required (the webhook secret of the GitHub App)"
    ]


def test_serve_reads_dotenv_and_names_every_invalid_setting(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("PORT=eighty\nWORKERS=0\n")
    result = subprocess.run(
        [*CLI, "serve"], env=_clean_env(tmp_path), cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "threshold-bot: error: PORT: expected a whole number, not 'eighty'; "
        "WORKERS: must be at least 1, not '0'"
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_listens_on_host_and_port_from_dotenv(tmp_path: Path) -> None:
    port = _free_port()
    key = tmp_path / "app.pem"
    key.write_text(make_pem())
    (tmp_path / ".env").write_text(
        f"APP_ID=4242\nPRIVATE_KEY_PATH={key}\nWEBHOOK_SECRET=s3cret-0123\n"
        f"DATABASE_URL=sqlite:///{tmp_path / 'bot.db'}\nGITHUB_API_URL=http://127.0.0.1:9\n"
        f"HOST=127.0.0.1\nPORT={port}\n"
    )
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [*CLI, "serve"], env=_clean_env(tmp_path), cwd=tmp_path, stdout=log, stderr=log
    )

    def healthy() -> bool:
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(healthy, timeout=60, what=f"serve on the .env's port {port}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()
    listening = [
        line for line in (tmp_path / "serve.log").read_text().splitlines() if '"port"' in line
    ]
    assert json.loads(listening[0])["port"] == port


# --------------------------------------------------------------------------- packaging


def test_build_requires_a_setuptools_that_knows_spdx_licenses() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert isinstance(project["project"]["license"], str)  # an SPDX expression: PEP 639
    requires = project["build-system"]["requires"]
    found = [re.fullmatch(r"setuptools>=(\d+)", r) for r in requires]
    assert [int(m[1]) for m in found if m] and all(int(m[1]) >= 77 for m in found if m)


# --------------------------------------------------------------------------- README example


def test_the_readme_example_writes_nothing_into_the_checkout(tmp_path: Path) -> None:
    """``python -m demo.data`` (docs/cli.md, "Trying it on the demo's data") writes into a new
    temporary directory, prints it, and the review command shown there runs on it."""
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    made = subprocess.run(
        [sys.executable, "-m", "demo.data"],
        env=_clean_env(cwd) | {"TMPDIR": str(tmp_path)},
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    example = Path(made.stdout.strip())
    assert list(cwd.iterdir()) == [] and example.parent == tmp_path
    script = "tests/ci/gsm8k_nightly.sh"
    result = run(
        "review",
        "--history",
        example / "history.jsonl",
        "--base",
        example / "base" / script,
        "--file",
        example / "head" / script,
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["conclusion"] == "action_required"
    named = subprocess.run(
        [sys.executable, "-m", "demo.data", "here"],
        env=_clean_env(cwd),
        cwd=cwd,
        text=True,
        capture_output=True,
    )
    assert named.returncode == 0 and named.stdout == "here\n"
    assert (cwd / "here" / "history.jsonl").is_file()
