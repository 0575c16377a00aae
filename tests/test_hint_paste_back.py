"""A hint's config lines bind its literal (issue 28): pasted into the repository's config,
the next review reports the hinted literal as a bound gate.

For every hint with config lines that ``threshold-bot review --format json`` gives on the
gate corpora (tests/fixtures/gates: corpus and holdout, each case read with and without its
config) and on files of this module's own, the hint's lines are merged into the config the
hint was given under (their ``files:`` entries appended to its ``files:``), the review is
run again, and the gate at the hint's file, line and literal must be there (or, for a
reference beside a limit, the literal coupled to the gate the lines declare), no longer a
hint. The lines must
also be a config on their own (``parse_config``), as a maintainer may start from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.config import parse_config
from bot.core.thresholds.discover import find_gates
from tests.gate_scores import HISTORY, Case, cases

# files in shapes of their own (path -> text); each gives at least one hint with config lines
OWN: dict[str, str] = {
    "tests/test_asr.py": (
        "import unittest\n"
        "\n"
        "from asr.bench import run_bench\n"
        "\n"
        "\n"
        "class AsrNightly(unittest.TestCase):\n"
        "    WER_CEILING = 0.18\n"
        "    MAX_RTF_LIMIT = 0.05\n"
        "\n"
        "    def test_wer(self):\n"
        '        report = run_bench("librispeech")\n'
        "        self.assertTrue(report.ok(self.WER_CEILING))\n"
        "\n"
        "    def test_rtf(self):\n"
        '        run_bench("librispeech", rtf_limit=self.MAX_RTF_LIMIT)\n'
    ),
    "tests/test_summaries.py": (
        "from tools.scoring import check_bleu\n"
        "\n"
        "BLEU_FLOOR = 27.5\n"
        "\n"
        "\n"
        "def test_summaries_hold_their_bleu():\n"
        '    check_bleu("out/summaries.json", BLEU_FLOOR)\n'
    ),
    "ci/judge rouge.sh": (  # a path that YAML must quote
        "#!/bin/sh\n"
        "ROUGE_L_MIN=0.41\n"
        "MAX_LATENCY_MS=250\n"
        'uv run scripts/judge.py --min-rouge="$ROUGE_L_MIN" latency_ms=$MAX_LATENCY_MS\n'
    ),
    "ci/nightly_ppl.sh": (
        "#!/usr/bin/env bash\n"
        "PPL_CEILING=14.2\n"
        './bin/score_run --run out/last --max-ppl "$PPL_CEILING"\n'
    ),
}


@dataclass(frozen=True)
class Hinted:
    """A hint with config lines, as a review gave it under ``config`` (None: no config)."""

    case: Case
    config: str | None
    hint: dict[str, Any]

    @property
    def id(self) -> str:
        reading = "cfg" if self.config is not None else "bare"
        return f"{self.case.name}[{reading}]:{self.hint['name']}@{self.hint['line']}"


def review(case: Case, config: str | None, tmp: Path) -> dict[str, Any] | None:
    """``review --format json`` of the case's file from inside its folder, under ``config``;
    None when the file cannot be read so (a reader's error, exit 2: no hints to paste)."""
    history = tmp / "runs.jsonl"
    history.write_text(HISTORY)
    args = ["review", "--file", case.file, "--history", str(history), "--format", "json"]
    if config is not None:
        path = tmp / "threshold-bot.yml"
        path.write_text(config)
        args += ["--config", str(path)]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    if result.exit_code == 2 and not result.stdout:
        return None
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


# data files the config names in which nothing reads as a threshold (path -> text, config)
NAMED: dict[str, tuple[str, str]] = {
    "conf/odd.yaml": (
        '"eval.v2":\n  "top 1": 0.7\n  other: {weight: 3.5}\nlist:\n  - {thing: 1.5}\n',
        "files:\n  - path: conf/odd.yaml\n",
    ),
    "conf/data.json": (
        '{"suite": {"a-b": [{"x": 1.25}, {"x": 2.5}]}, "on": {"yes": 0.5}}\n',
        "files:\n  - path: conf/data.json\n",
    ),
}


def own_cases(root: Path) -> list[Case]:
    found = []
    for path, (text, config) in {**{p: (t, "") for p, t in OWN.items()}, **NAMED}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
        declared = None
        if config:
            declared = root / f"{Path(path).name}.config.yml"
            declared.write_text(config)
        found.append(Case(Path(path).stem, root, path, declared, []))
    return found


def hinted(tmp: Path, monkeypatch: pytest.MonkeyPatch, found: list[Case]) -> list[Hinted]:
    """Every hint with config lines the reviews of ``found`` give, with and without config."""
    out = []
    for case in found:
        monkeypatch.chdir(case.root)
        configs = [None] + ([case.config.read_text()] if case.config else [])
        for config in configs:
            reading = review(case, config, tmp)
            for hint in reading["hints"] if reading is not None else ():
                if hint["config"].strip():
                    out.append(Hinted(case, config, hint))
    return out


def merged(config: str | None, lines: str) -> str:
    """``lines`` (a ``files:`` entry) pasted into ``config``: its entries appended."""
    base = yaml.safe_load(config or "") or {}
    pasted = yaml.safe_load(lines)
    assert set(pasted) == {"files"}, pasted  # nothing but the entry that binds
    base["files"] = [*(base.get("files") or []), *pasted["files"]]
    return yaml.safe_dump(base, sort_keys=False)


def coupled(item: Hinted, config: str) -> set[tuple[str, int, str]]:
    """The literals the gates of the case's file carry as ``coupled`` under ``config`` (a
    reference beside a limit: the hint's lines declare the limit, coupling the reference,
    which ``/rebaseline`` then rewrites with it; the JSON review does not list them)."""
    text = (item.case.root / item.case.file).read_text()
    found = find_gates(item.case.file, text, parse_config(config))
    gates = found.gates if found is not None else ()
    return {(g.file, c.span.line, c.span.literal) for g in gates for c in g.coupled}


def assert_binds(item: Hinted, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hint = item.hint
    parse_config(hint["config"])  # a config on its own: raises ConfigError otherwise
    monkeypatch.chdir(item.case.root)
    after = review(item.case, merged(item.config, hint["config"]), tmp)
    assert after is not None, f"{item.id}: the pasted config makes the file unreadable"
    bound = {(g["file"], g["line"], g["old_literal"]) for g in after["gates"]}
    bound |= coupled(item, merged(item.config, hint["config"]))
    assert (hint["file"], hint["line"], hint["literal"]) in bound, (item.id, after["gates"])
    still = {(h["file"], h["line"], h["literal"]) for h in after["hints"]}
    assert (hint["file"], hint["line"], hint["literal"]) not in still, item.id


@pytest.mark.parametrize("corpus", ["corpus", "holdout", "holdout2", "holdout3"])
def test_pasting_a_hints_config_lines_binds_it_on_the_gate_corpora(
    corpus: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = []
    for item in hinted(tmp_path, monkeypatch, cases(corpus)):
        try:
            assert_binds(item, tmp_path, monkeypatch)
        except AssertionError as exc:
            failures.append(f"{item.id}: {exc}")
    assert not failures, "\n".join(failures)


def test_pasting_a_hints_config_lines_binds_it_on_files_of_other_shapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    found = hinted(tmp_path, monkeypatch, own_cases(repo))
    names = {(i.case.file, i.hint["name"]) for i in found}
    assert names == {
        ("tests/test_asr.py", "AsrNightly.WER_CEILING"),
        ("tests/test_asr.py", "AsrNightly.MAX_RTF_LIMIT"),
        ("tests/test_summaries.py", "BLEU_FLOOR"),
        ("ci/judge rouge.sh", "ROUGE_L_MIN"),
        ("ci/judge rouge.sh", "MAX_LATENCY_MS"),
        ("ci/nightly_ppl.sh", "PPL_CEILING"),
        ("conf/odd.yaml", '"eval.v2".top 1'),
        ("conf/odd.yaml", '"eval.v2".other.weight'),
        ("conf/odd.yaml", "list.0.thing"),
        ("conf/data.json", "suite.a-b.0.x"),
        ("conf/data.json", "suite.a-b.1.x"),
        ("conf/data.json", "on.yes"),
    }
    for item in found:
        assert_binds(item, tmp_path, monkeypatch)
