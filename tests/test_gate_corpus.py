"""Gate shapes as ML repositories write them (issue 12): a corpus of threshold files in the
shapes of real projects (written for this suite), each with the gates its CI really checks.

Every file goes through ``threshold-bot review --format json`` as a user would run it, once
with no configuration and once with the minimal config beside it.  A gate is read faithfully
when its metric, literal, kind and direction are right; the score of a file is its faithful
gates over its expected plus false gates, and the corpus score is the mean over files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli.main import app

CORPUS = Path(__file__).parent / "fixtures" / "gates" / "corpus"
RUNNER = CliRunner()
HISTORY = '{"id": "r1", "created_at": "2026-11-01T00:00:00Z", "summary": {"unrelated": 1.0}}\n'
WITH_CONFIG_TARGET = 0.9
WITHOUT_CONFIG_TARGET = 0.5

Key = tuple[str, str, str, str]  # metric, literal, kind, direction


@dataclass(frozen=True)
class Case:
    name: str
    file: Path
    config: Path | None
    expected: list[dict[str, Any]]

    def wanted(self, configured: bool) -> set[Key]:
        """The gates a faithful reading finds, with or without the config."""
        return {
            (
                g.get("with_config", g["metric"]) if configured else g["metric"],
                g["literal"],
                g["kind"],
                g["direction"],
            )
            for g in self.expected
            if configured or not g.get("config_only")
        }


def _cases() -> list[Case]:
    cases = []
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        files = [p for p in folder.iterdir() if p.name not in ("expected.json", "config.yml")]
        config = folder / "config.yml"
        expected = json.loads((folder / "expected.json").read_text())["gates"]
        cases.append(Case(folder.name, files[0], config if config.exists() else None, expected))
    return cases


CASES = _cases()


def _found(case: Case, tmp_path: Path, configured: bool) -> set[Key]:
    history = tmp_path / "runs.jsonl"
    history.write_text(HISTORY)
    args = ["review", "--file", str(case.file), "--history", str(history), "--format", "json"]
    if configured and case.config is not None:
        args += ["--config", str(case.config)]
    result = RUNNER.invoke(app, args)
    if result.exit_code != 0:  # no gate found, or the file could not be read as declared
        print(f"{case.name}: {result.output.strip()}")
        return set()
    gates = json.loads(result.stdout)["gates"]
    return {(g["metric"], g["old_literal"], g["kind"], g["sides"]) for g in gates}


def _score(wanted: set[Key], found: set[Key]) -> float:
    false = found - wanted
    total = len(wanted) + len(false)
    return len(wanted & found) / total if total else 1.0


@pytest.mark.parametrize("configured", [True, False], ids=["config", "no-config"])
def test_corpus_is_read_faithfully(configured: bool, tmp_path: Path) -> None:
    scores: dict[str, float] = {}
    false: dict[str, set[Key]] = {}
    for case in CASES:
        wanted = case.wanted(configured)
        found = _found(case, tmp_path, configured)
        if not wanted and not found:
            continue
        scores[case.name] = _score(wanted, found)
        if found - wanted:
            false[case.name] = found - wanted
        print(f"{case.name:24} {scores[case.name]:.2f}  missed: {sorted(wanted - found)}")
    share = sum(scores.values()) / len(scores)
    print(f"file-averaged share ({'with' if configured else 'without'} config): {share:.3f}")
    target = WITH_CONFIG_TARGET if configured else WITHOUT_CONFIG_TARGET
    assert share >= target
    assert not false, f"false gates: {false}"


def test_the_corpus_covers_every_shape() -> None:
    suffixes = {case.file.suffix for case in CASES}
    assert suffixes == {".sh", ".py", ".yaml", ".json", ".csv", ".toml"}
    kinds = {g["kind"] for case in CASES for g in case.expected}
    assert kinds == {"limit", "reference"}
