"""Which history a gate reads, and why: shell unquoting of project names, where a source is
named (``declared_source``), what the review says about it, and ambiguity said aloud.

The SkyRL-style nightly names its W&B project twice, once as a Hydra override with escaped
quotes (``trainer.project_name=\\"gsm8k_fully_async_ci\\"``) and once as a plain option.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.config import parse_config
from bot.core.history.formats import parse_history
from bot.core.history.sources import HistorySource
from bot.core.models import DeclaredSource, History, SourceSpec
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.shell.lexer import lex
from bot.core.thresholds.shell.script import parse_shell
from bot.features.review.pull import review_pull
from tests.fakes.recording_github import RecordingGitHub
from tests.test_review_pr import HISTORY, METRIC, repo  # noqa: F401  (the fixture)

PROJECT = "gsm8k_fully_async_ci"


def skyrl(value: str = "0.56", *, hydra: str | None = None, option: str | None = None) -> str:
    """A nightly script shaped like SkyRL's; ``hydra``/``option``: the two project mentions
    as written in the file (None: left out)."""
    lines = [
        "#!/usr/bin/env bash",
        "set -euo pipefail",
        'RUN_NAME="run_$(date +%Y%m%d%H%M%S)_$$"',
        f"EVAL_ACC_MIN_VALUE={value}",
        "",
        "bash examples/train/fully_async/fully_async_run_gsm8k.sh \\",
        "  trainer.epochs=1 \\",
        '  trainer.run_name=\\"$RUN_NAME\\"' + (f" trainer.project_name={hydra}" if hydra else ""),
        "",
        "uv run get_summary.py --run_name $RUN_NAME"
        + (f" --project_name {option}" if option else "")
        + f' --asserts "{METRIC} >= $EVAL_ACC_MIN_VALUE"',
    ]
    return "\n".join(lines) + "\n"


HYDRA_LINE, OPTION_LINE = 8, 10  # 1-based lines of the two mentions in ``skyrl``


def words(text: str) -> list[str]:
    return [t.unquoted() for t in lex(text).tokens if hasattr(t, "parts")]


def test_words_are_unquoted_as_the_shell_passes_them_on() -> None:
    assert words('key=\\"a b\\"') == ['key="a', 'b"']  # escaped quotes do not group
    assert words('key=\\"ab\\"') == ['key="ab"']
    assert words("a\"b\"'c'$'\\x64\\'e'") == ["abcd'e"]  # adjacent parts, ANSI-C escapes
    assert words("$'tab\\there\\n'") == ["tab\there\n"]
    assert words('"x\\ny\\$z\\"q"') == ['x\\ny$z"q']  # in "...", only \\$ \\` \\" \\\\ escape
    assert words("'\\n'") == ["\\n"]  # nothing escapes in '...'
    assert words('$"loc"') == ["loc"]


@pytest.mark.parametrize(
    ("hydra", "option", "line"),
    [
        (f'\\"{PROJECT}\\"', f'"{PROJECT}"', HYDRA_LINE),  # both mentions, as SkyRL writes them
        (f'\\"{PROJECT}\\"', None, HYDRA_LINE),
        (None, f'"{PROJECT}"', OPTION_LINE),
        (f"\"'{PROJECT}'\"", None, HYDRA_LINE),  # Hydra's single quotes inside shell quotes
        (f"$'{PROJECT}'", f"{PROJECT}", HYDRA_LINE),
        ('"gsm8k_"fully_async_ci', f'"{PROJECT}"', HYDRA_LINE),
    ],
)
def test_the_skyrl_project_is_found_in_every_spelling(
    hydra: str | None, option: str | None, line: int
) -> None:
    found = parse_shell("ci/nightly.sh", skyrl(hydra=hydra, option=option))

    assert found.source == SourceSpec(kind="wandb", project=PROJECT)
    assert found.declared == DeclaredSource(kind="wandb", project=PROJECT, origin=f"script:{line}")
    assert found.notes == ()


def test_two_different_projects_are_said_and_neither_is_used() -> None:
    found = parse_shell("ci/nightly.sh", skyrl(hydra='\\"other_ci\\"', option=f'"{PROJECT}"'))

    assert found.source is None and found.declared is None
    (note,) = found.notes
    assert f"other_ci on line {HYDRA_LINE}" in note and f"{PROJECT} on line {OPTION_LINE}" in note
    assert "none of them is used" in note


def test_a_project_in_a_variable_resolves_through_its_one_assignment() -> None:
    text = skyrl(hydra='\\"$PROJ\\"').replace("set -euo pipefail", f"set -e\nPROJ='{PROJECT}'")
    found = parse_shell("ci/nightly.sh", text)
    assert found.source == SourceSpec(kind="wandb", project=PROJECT)
    assert found.declared is not None and found.declared.origin == f"script:{HYDRA_LINE + 1}"


def test_where_each_source_is_named() -> None:
    text = skyrl(option=f'"{PROJECT}"').replace("pipefail", "pipefail\nMAX_STEPS=40")
    config = parse_config(
        "sources:\n"
        "  nightly: {kind: wandb, entity: rl-team, project: default_ci, tags: [nightly]}\n"
        "  offline: {kind: file, path: ci/runs.jsonl}\n"
        "default_source: nightly\n"
        "files:\n"
        "  - path: ci/other.sh\n"
        "  - path: ci/nightly.sh\n"
        "    gates:\n"
        "      - {key: MAX_STEPS, metric: eval/declared, op: '>=', name: DECL,"
        " source: offline}\n"
    )
    found = find_gates("ci/nightly.sh", text, config)
    assert found is not None
    by_metric = {g.metric: g for g in found.gates}
    # the script's project over the default source: entity and filters carry over
    script_gate = by_metric[METRIC]
    assert script_gate.source == config.sources["nightly"].model_copy(update={"project": PROJECT})
    assert script_gate.declared == DeclaredSource(
        kind="wandb", entity="rl-team", project=PROJECT, origin=f"script:{OPTION_LINE + 1}"
    )
    declared_gate = by_metric["eval/declared"]
    assert declared_gate.declared == DeclaredSource(
        kind="file", path="ci/runs.jsonl", origin="config:files.1.gates.0"
    )
    no_project = find_gates("ci/nightly.sh", skyrl(), config.model_copy(update={"files": ()}))
    assert no_project is not None
    assert no_project.gates[0].declared == DeclaredSource(
        kind="wandb", entity="rl-team", project="default_ci", origin="config:default_source"
    )
    whole_file = config.files[0].model_copy(update={"path": "ci/*.sh", "source": "offline"})
    for_file = config.model_copy(update={"files": (whole_file,)})
    found = find_gates("ci/nightly.sh", text, for_file)
    assert found is not None and found.gates[0].declared is not None
    assert found.gates[0].declared.origin == "config:files.0"


def history_file(tmp_path: Path) -> Path:
    runs = [
        {"id": f"r{i}", "created_at": f"2026-08-{i + 1:02d}T08:00:00Z", "summary": {METRIC: 0.6}}
        for i in range(25)
    ]
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    return path


def test_cli_json_gives_what_was_read_and_what_the_script_names(tmp_path: Path) -> None:
    script = tmp_path / "nightly.sh"
    script.write_text(skyrl(hydra=f'\\"{PROJECT}\\"', option=f'"{PROJECT}"'))
    history = history_file(tmp_path)

    args = ["review", "--history", str(history), "--file", str(script)]
    result = CliRunner().invoke(app, [*args, "--format", "json"])

    assert result.exit_code == 0, result.output
    (gate,) = json.loads(result.stdout)["gates"]
    assert gate["source"] == str(history)
    assert gate["declared_source"] == {
        "kind": "wandb", "entity": None, "project": PROJECT, "path": None, "experiment": None,
        "from": f"script:{HYDRA_LINE}",
    }  # fmt: skip
    comment = CliRunner().invoke(app, [*args, "--format", "markdown"]).stdout
    source_line = next(line for line in comment.splitlines() if "**Source of" in line)
    assert "instead of the W&B project <code>gsm8k\\_fully\\_async\\_ci</code>" in source_line
    assert f"named in the script at line {HYDRA_LINE}" in source_line


def test_an_ambiguous_project_is_a_warning_in_the_review(tmp_path: Path) -> None:
    script = tmp_path / "nightly.sh"
    script.write_text(skyrl(hydra='\\"other_ci\\"', option=f'"{PROJECT}"'))

    args = ["review", "--history", str(history_file(tmp_path)), "--file", str(script)]
    data = json.loads(CliRunner().invoke(app, [*args, "--format", "json"]).stdout)

    (warning,) = [w for w in data["warnings"] if "W&B project" in w]
    assert warning.startswith(f"{script.as_posix()}: the script names 2 different W&B projects")
    assert data["gates"][0]["declared_source"] is None


def test_the_app_reads_the_skyrl_project_with_no_config(repo: RecordingGitHub) -> None:  # noqa: F811
    named = f'\\"{PROJECT}\\"'
    # main's script names the project (the base decides what a gate reads); the PR tunes it
    repo.commit(
        {".github/threshold-bot.yml": "", "tests/ci/nightly.sh": skyrl("0.35", hydra=named)}
    )
    pull = repo.open_pull(21, {"tests/ci/nightly.sh": skyrl("0.30", hydra=named)})
    text = repo.file_text(repo.repo, HISTORY, "main")
    assert text is not None
    history = parse_history(text, HISTORY)
    asked: list[SourceSpec] = []

    def remote(spec: SourceSpec) -> HistorySource:
        asked.append(spec)
        return _Fixed(history.model_copy(update={"source": spec.describe()}))

    factory: Callable[[SourceSpec], HistorySource] = remote
    outcome = review_pull(repo, repo.repo, 21, remote_history=factory)

    assert asked == [SourceSpec(kind="wandb", project=PROJECT)]
    assert outcome.review is not None and outcome.review.conclusion != "neutral"
    (gate,) = outcome.review.gates
    assert gate.source == f"wandb:{PROJECT}"
    assert gate.declared_source is not None
    assert gate.declared_source.origin == f"script:{HYDRA_LINE}"
    body = repo.comments[21].body
    source_line = next(line for line in body.splitlines() if "**Source of" in line)
    assert source_line == (
        "- **Source of <code>tests/ci/nightly.sh</code>:** W&B project "
        f"<code>gsm8k\\_fully\\_async\\_ci</code>, named in the script at line {HYDRA_LINE}."
    )
    assert pull.head_sha in {c.head_sha for c in repo.checks.values()}


class _Fixed:
    def __init__(self, history: History) -> None:
        self.history = history

    def fetch(self, spec: SourceSpec) -> History:
        return self.history


def test_two_entities_are_said_and_the_project_is_kept() -> None:
    text = skyrl(option=f'"{PROJECT}" --entity team_a').replace(
        "set -euo pipefail", "set -euo pipefail\nexport WANDB_ENTITY=team_b"
    )
    found = parse_shell("ci/nightly.sh", text)

    assert found.source == SourceSpec(kind="wandb", project=PROJECT)  # no entity: the default
    (note,) = found.notes
    assert note == (
        f"the script names 2 different W&B entities (team_a on line {OPTION_LINE + 1}, "
        "team_b on line 3): none of them is used"
    )
