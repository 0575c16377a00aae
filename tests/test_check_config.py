"""``threshold-bot check-config`` through the real CLI, on a checkout written here: what is
scanned, each gate with its source, each problem, and the exit statuses 0 / 1 / 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app

RUNNER = CliRunner()

CONFIG = """\
sources:
  nightly: {kind: file, path: history/runs.jsonl}
  evals: {kind: wandb, entity: acme, project: evals}
default_source: nightly
files:
  - path: ci/**/models/*.yaml
    gates:
      - {key: "models.*.acc_min", metric: "eval/{1}/acc", op: ">="}
  - path: ci/latency.yaml
    source: evals
    gates:
      - {key: p95_ms, metric: latency/p95, op: "<="}
"""
THRESHOLDS = {
    "ci/models/a.yaml": "models:\n  small:\n    acc_min: 0.61\n  large:\n    acc_min: 0.74\n",
    "ci/models/b.yaml": "models:\n  tiny:\n    acc_min: 0.4\n",
    "ci/latency.yaml": "# budget\np95_ms: 120\n",
    "README.md": "not scanned\n",
    "history/runs.jsonl": "",  # the file source's history
}


def checkout(root: Path, config: str = CONFIG, files: dict[str, str] = THRESHOLDS) -> Path:
    for path, text in {".github/threshold-bot.yml": config, **files}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def run(*args: str | Path) -> Result:
    return RUNNER.invoke(app, ["check-config", *(str(a) for a in args)])


def test_lists_globs_files_and_gates_with_their_sources(tmp_path: Path) -> None:
    root = checkout(tmp_path / "repo")
    result = run("--repo-root", root)
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert out[:6] == [
        "What is scanned:",
        "  files.0.path: ci/**/models/*.yaml: 2 files",
        "    ci/models/a.yaml",
        "    ci/models/b.yaml",
        "  files.1.path: ci/latency.yaml: 1 file",
        "    ci/latency.yaml",
    ]
    nightly = "file:history/runs.jsonl (named at config:default_source)"
    evals = "wandb:acme/evals (named at config:files.1)"
    assert [line for line in out if ": models." in line or "p95_ms" in line] == [
        f"  ci/models/a.yaml:3: models.small.acc_min: eval/small/acc >= 0.61 (limit), reads "
        f"{nightly}",
        f"  ci/models/a.yaml:5: models.large.acc_min: eval/large/acc >= 0.74 (limit), reads "
        f"{nightly}",
        f"  ci/models/b.yaml:3: models.tiny.acc_min: eval/tiny/acc >= 0.4 (limit), reads {nightly}",
        f"  ci/latency.yaml:2: p95_ms: latency/p95 <= 120 (limit), reads {evals}",
    ]
    assert "README.md" not in result.stdout
    assert out[-1] == "ok" and result.stderr == ""


def test_default_path_and_repo_root_are_the_current_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = checkout(tmp_path / "repo")
    monkeypatch.chdir(root)
    default, named = run(), run(".github/threshold-bot.yml", "--repo-root", ".")
    assert default.exit_code == named.exit_code == 0
    assert default.stdout == named.stdout


def test_a_glob_or_a_gate_that_matches_nothing_exits_1(tmp_path: Path) -> None:
    config = CONFIG + (
        "  - path: nightly/*.yaml\n    gates:\n      - {key: x, metric: m, op: '>='}\n"
        "  - path: ci/models/b.yaml\n    gates:\n"
        "      - {key: thresholds.acc, metric: m, op: '>='}\n"
    )
    root = checkout(tmp_path / "repo", config)
    result = run("--repo-root", root)
    assert result.exit_code == 1
    problems = result.stdout.split("2 problems:\n", 1)[1].splitlines()
    assert problems[0] == "  files.2.path: 'nightly/*.yaml' matches no file in the checkout"
    assert problems[1].startswith("  ci/models/b.yaml: gate 'thresholds.acc': key 'thresholds'")
    assert result.stderr == (
        f"threshold-bot: error: {(root / '.github/threshold-bot.yml').as_posix()}: "
        "2 problems, listed above\n"
    )
    # the gates of the other files are still listed
    assert "ci/models/a.yaml:3: models.small.acc_min" in result.stdout


def test_a_file_source_whose_history_the_checkout_lacks_exits_1(tmp_path: Path) -> None:
    files = {p: t for p, t in THRESHOLDS.items() if p != "history/runs.jsonl"}
    root = checkout(tmp_path / "repo", files=files)
    result = run("--repo-root", root)
    assert result.exit_code == 1
    out = result.stdout.splitlines()
    sources = out[out.index("Sources:") + 1 : out.index("Sources:") + 3]
    assert sources == [
        "  nightly: file:history/runs.jsonl: not in the checkout",
        "  evals: wandb:acme/evals",
    ]
    problems = result.stdout.split("1 problem:\n", 1)[1].splitlines()
    assert problems == [
        "  sources.nightly.path: 'history/runs.jsonl' is not a file in the checkout; commit the"
        " history there (threshold-bot export writes one) or fix the path"
    ]
    assert result.stderr.endswith("threshold-bot.yml: 1 problem, listed above\n")
    (root / "history").mkdir()
    (root / "history" / "runs.jsonl").mkdir()  # a directory is no history file
    assert run("--repo-root", root).exit_code == 1


def test_a_file_that_cannot_be_read_exits_1(tmp_path: Path) -> None:
    root = checkout(tmp_path / "repo")
    (root / "ci" / "models" / "b.yaml").write_bytes(b"models:\n  tiny:\n    acc_min: \xff\n")
    result = run("--repo-root", root)
    assert result.exit_code == 1
    assert "  ci/models/b.yaml: not UTF-8 text" in result.stdout.splitlines()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "files:\n  - path: a.yaml\n    gats: []\n",
            ":3: files.0.gats: unknown setting (did you mean `gates`?)",
        ),
        ("rule:\n  allowance: lots\n", ":2: rule.allowance: invalid allowance `lots`"),
        ("files:\n  - path: ../outside.yaml\n", ":2: files.0.path: '../outside.yaml': '..' "),
        ("rule: [1, 2\n", ":2: not valid YAML"),
    ],
)
def test_an_invalid_config_exits_2_with_one_line(tmp_path: Path, config: str, message: str) -> None:
    root = checkout(tmp_path / "repo", config)
    result = run("--repo-root", root)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and result.stdout == ""
    path = (root / ".github/threshold-bot.yml").as_posix()
    assert lines[0].startswith(f"threshold-bot: error: {path}{message}")


def test_a_missing_config_or_root_exits_2(tmp_path: Path) -> None:
    missing = run("--repo-root", tmp_path)
    assert missing.exit_code == 2
    assert missing.stderr.startswith("threshold-bot: error: config ")
    assert missing.stderr.endswith("threshold-bot.yml: no such file\n")
    no_root = run("--repo-root", tmp_path / "nope")
    assert no_root.exit_code == 2 and "not a directory" in no_root.stderr


def test_a_config_without_globs_says_what_the_app_scans(tmp_path: Path) -> None:
    root = checkout(tmp_path / "repo", "rule: {allowance: 5%}\n", {})
    result = run("--repo-root", root)
    assert result.exit_code == 0
    assert "no globs: the App scans the shell scripts and Python tests a PR changes" in (
        result.stdout
    )
