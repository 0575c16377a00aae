"""Related files: helpers and constants in other modules of the repository.

The core is given the other files as data (``find_gates(..., related=...)``); the shell
(``bot.features.related_files``) gathers them bounded, from disk (the CLI, end to end) or
through GitHub (the App, with the recording fake).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.config import RepoConfig, parse_config
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.python.project import MAX_MODULES
from bot.core.thresholds.related import mentions, wanted_paths
from bot.features.action import FileVersions, find_changes
from bot.features.related_files import (
    MAX_FILE_BYTES,
    MAX_FILES,
    Unreadable,
    disk_related,
    related_files,
)
from bot.features.review.pull import read_thresholds
from tests.fakes.recording_github import RecordingGitHub

HELPERS = '''"""Checks shared by the benchmark tests."""


def expect_at_most(series, ceiling, warmup_ceiling=9.0):
    assert series[0] <= warmup_ceiling
    assert series[-1] <= ceiling, f"{series[-1]} > {ceiling}"


def require(scores, name, floor):
    got = scores[name]
    if got < floor:
        raise RuntimeError(f"{name} below {floor}")
'''

BENCH_TEST = """from bench.checks import expect_at_most
from bench import checks


def test_wmt_bleu(results):
    checks.require(results, "wmt14/bleu", floor=27.5)


def test_ppl_curve(run):
    ppl = run.history["val/perplexity"]
    expect_at_most(ppl, 18.25, warmup_ceiling=140.0)
"""

LIMITS = '''"""Floors and ceilings of the speech benchmarks."""

WER_MAX = 0.083
CER_MAX = 0.031
N_UTTERANCES = 2620
'''

SPEECH_TEST = """import evals.limits as lim
from evals.limits import WER_MAX


def test_librispeech_clean(asr):
    report = asr.decode("librispeech_clean")
    assert report["wer"] <= WER_MAX
    assert report.cer <= lim.CER_MAX
    assert len(report.utterances) == lim.N_UTTERANCES
"""


def gates(found: object) -> set[tuple[str, str, str, str]]:
    assert found is not None
    return {(g.name, g.metric, g.op, g.literal) for g in found.gates}  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- the core


def test_a_helper_imported_from_another_module_is_read_at_its_call_sites() -> None:
    related = {"bench/checks.py": HELPERS}

    found = find_gates("bench/test_translation.py", BENCH_TEST, RepoConfig(), related)

    assert gates(found) == {
        ("test_wmt_bleu[wmt14/bleu]", "wmt14/bleu", ">=", "27.5"),
        ("test_ppl_curve[val/perplexity]", "val/perplexity", "<=", "18.25"),
        ("test_ppl_curve[val/perplexity] #2", "val/perplexity", "<=", "140.0"),
    }
    assert found is not None
    bleu = next(g for g in found.gates if g.literal == "27.5")
    assert BENCH_TEST[bleu.start : bleu.end] == "27.5"  # the span is in the file under review
    assert bleu.context == "test_wmt_bleu" and bleu.kind == "limit"


def test_without_related_files_the_file_is_read_alone() -> None:
    assert find_gates("bench/test_translation.py", BENCH_TEST, RepoConfig()) is None
    assert find_gates("evals/limits.py", LIMITS, parse_config('python: ["evals/*.py"]')) is not None
    alone = find_gates("evals/limits.py", LIMITS, parse_config('python: ["evals/*.py"]'))
    assert alone is not None and not alone.gates


def test_a_constants_module_gets_its_gates_through_the_tests_importing_it() -> None:
    config = parse_config('python: ["evals/*.py"]')
    related = {"evals/test_speech.py": SPEECH_TEST, "evals/unrelated.py": "X = 1\n"}

    found = find_gates("evals/limits.py", LIMITS, config, related)

    assert gates(found) == {
        ("WER_MAX", "wer", "<=", "0.083"),
        ("CER_MAX", "cer", "<=", "0.031"),
    }  # N_UTTERANCES is compared for equality with a length: not a gate
    assert found is not None
    for gate in found.gates:
        assert LIMITS[gate.start : gate.end] == gate.literal and gate.file == "evals/limits.py"
        assert gate.context == "evals/test_speech.py::test_librispeech_clean"


def test_a_constant_of_another_module_is_not_a_gate_of_the_test() -> None:
    related = {"evals/limits.py": LIMITS}

    found = find_gates("evals/test_speech.py", SPEECH_TEST, RepoConfig(), related)

    assert found is not None and not found.gates
    hints = {(u.name, u.literal, u.line) for u in found.unbound}
    assert ("WER_MAX", "0.083", 7) in hints and ("CER_MAX", "0.031", 8) in hints
    (wer,) = [u for u in found.unbound if u.name == "WER_MAX"]
    assert "written in evals/limits.py (line 3): a gate of that file" in wer.reason


def test_a_helper_module_gets_the_gates_of_its_defaults_through_its_callers() -> None:
    found = find_gates(
        "bench/checks.py",
        HELPERS,
        parse_config('python: ["bench/*.py"]'),
        {"bench/t.py": BENCH_TEST},
    )
    assert found is None or not found.gates  # every caller passes warmup_ceiling

    caller = BENCH_TEST.replace(", warmup_ceiling=140.0", "")
    found = find_gates(
        "bench/checks.py", HELPERS, parse_config('python: ["bench/*.py"]'), {"bench/t.py": caller}
    )

    assert gates(found) == {
        ("bench/t.py::test_ppl_curve[val/perplexity]", "val/perplexity", "<=", "9.0")
    }


def test_a_relative_import_of_a_helper() -> None:
    test = "from .checks import require\n\ndef test_acc(r):\n    require(r, 'top5', 0.93)\n"
    related = {"bench/checks.py": HELPERS}

    found = find_gates("bench/test_cls.py", test, RepoConfig(), related)

    assert gates(found) == {("test_acc[top5]", "top5", ">=", "0.93")}


def test_wanted_paths_and_mentions() -> None:
    wanted = wanted_paths("bench/test_translation.py", BENCH_TEST)
    assert wanted.index("bench/bench/checks.py") < wanted.index("bench/checks.py")  # nearest first
    assert "bench/checks/__init__.py" in wanted and "bench/__init__.py" in wanted
    assert all(".." not in p and not p.startswith("/") for p in wanted)
    assert "src/bench/checks.py" in wanted  # a src layout
    assert wanted_paths("a/test_x.py", "from ..up import f\nfrom ... import g\n") == (
        "up/f.py",
        "up/f/__init__.py",
        "up.py",
        "up/__init__.py",
    )
    assert wanted_paths("x.py", "not python (") == ()
    assert wanted_paths("golden.txt", "0 1.0\n") == ()
    assert mentions("evals/limits.py", "import evals.limits as lim")
    assert mentions("evals/limits.py", "from evals import limits")
    assert not mentions("evals/limits.py", "speed_limits = 3")
    assert mentions("ci/loss.txt", 'GOLDEN = "ci/loss.txt"')
    assert not mentions("ci/loss.txt", 'GOLDEN = "ci/loss.txt.bak"')


# --------------------------------------------------------------------------- the shell


def test_too_many_or_too_large_related_files_are_skipped_and_said() -> None:
    names = [f"m{i:02d}" for i in range(MAX_FILES + 5)]
    text = "".join(f"from pkg.{n} import f as f_{n}\n" for n in names)
    files = {f"pkg/{n}.py": "X = 1\n" for n in names}
    files["pkg/m00.py"] = "#" * (MAX_FILE_BYTES + 1)

    listing = {"pkg": [p.rsplit("/", 1)[1] for p in files]}
    related = related_files("pkg/test_many.py", text, files.get, lambda d: listing.get(d, []))

    assert "pkg/m00.py" not in related.files
    assert len(related.files) == MAX_FILES
    assert "pkg/m00.py: larger than 1024 KiB" in related.skipped
    assert sum("over 32 related files" in s for s in related.skipped) == 4  # 37 - 1 - 32
    (note,) = related.notes()
    assert note.startswith("5 related files not read (pkg/m00.py: larger than 1024 KiB;")


def test_a_file_that_cannot_be_read_is_skipped_and_counted() -> None:
    def read(path: str) -> str | None:
        raise Unreadable("403 forbidden")

    listing = {"t": ["h.py"]}
    related = related_files(
        "t/test_a.py", "from t.h import f\n", read, lambda d: listing.get(d, [])
    )

    assert related.files == {} and related.skipped == ("t/h.py: 403 forbidden",)


def test_paths_leaving_the_repository_are_never_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("LEAK = 0.5\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "t").mkdir()
    (repo / "t" / "helpers.py").symlink_to(outside / "secret.py")
    test = "from t.helpers import f\nfrom ...outside.secret import g\nimport secret\n"

    related = disk_related("t/test_a.py", test, repo)

    assert related.files == {}
    assert related.skipped == ("t/helpers.py: outside the repository",)
    calls: list[str] = []

    def read(path: str) -> str:
        calls.append(path)
        return ""

    related_files("../t/test_a.py", test, read, lambda d: ["secret.py", "helpers.py"])
    related_files("/abs/t/test_a.py", test, read, lambda d: ["secret.py", "helpers.py"])
    assert calls == []


# --------------------------------------------------------------------------- CLI, end to end


@pytest.fixture
def history(tmp_path: Path) -> Path:
    path = tmp_path / "history.jsonl"
    run = {"id": "r1", "created_at": "2026-11-01T00:00:00Z", "summary": {"other": 1.0}}
    path.write_text(json.dumps(run) + "\n")
    return path


def _review(root: Path, file: str, history: Path, *extra: str) -> dict[str, object]:
    before = Path.cwd()
    os.chdir(root)
    try:
        args = ["review", "--file", file, "--history", str(history), "--format", "json", *extra]
        result = CliRunner().invoke(app, args)
    finally:
        os.chdir(before)
    assert result.exit_code == 0, result.output
    review: dict[str, object] = json.loads(result.stdout)
    return review


def _repo(root: Path, files: dict[str, str]) -> Path:
    (root / ".git").mkdir(parents=True)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_cli_reviews_a_test_calling_an_imported_helper(tmp_path: Path, history: Path) -> None:
    root = _repo(tmp_path / "r", {"bench/checks.py": HELPERS, "bench/test_mt.py": BENCH_TEST})

    review = _review(root, "bench/test_mt.py", history)
    found = {(g["metric"], g["old_literal"]) for g in review["gates"]}  # type: ignore[attr-defined]

    assert found == {
        ("wmt14/bleu", "27.5"),
        ("val/perplexity", "18.25"),
        ("val/perplexity", "140.0"),
    }


def test_cli_reviews_a_constants_module(tmp_path: Path, history: Path) -> None:
    root = _repo(tmp_path / "r", {"evals/limits.py": LIMITS, "evals/test_speech.py": SPEECH_TEST})

    review = _review(root, "evals/limits.py", history)

    found = {(g["name"], g["metric"], g["old_literal"]) for g in review["gates"]}  # type: ignore[attr-defined]
    assert found == {("WER_MAX", "wer", "0.083"), ("CER_MAX", "cer", "0.031")}


# --------------------------------------------------------------------------- the App


def test_a_pull_changing_only_a_constants_module_is_reviewed() -> None:
    gh = RecordingGitHub()
    config = 'python: ["evals/*.py"]\n'
    gh.commit(
        {
            "evals/limits.py": LIMITS,
            "evals/test_speech.py": SPEECH_TEST,
            ".github/threshold-bot.yml": config,
        }
    )
    pull = gh.open_pull(3, {"evals/limits.py": LIMITS.replace("0.083", "0.09")})

    found = read_thresholds(gh, gh.repo, pull)

    changed = {
        (c.head.name, c.base.literal if c.base else None, c.head.literal) for c in found.changes
    }
    assert ("WER_MAX", "0.083", "0.09") in changed
    assert {c.head.metric for c in found.changes} == {"wer", "cer"}
    reads = [args[1] for args in gh.called("file_text")]
    assert "evals/test_speech.py" in reads


def test_cli_rebaseline_rewrites_the_constant_in_its_module(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r", {"evals/limits.py": LIMITS, "evals/test_speech.py": SPEECH_TEST})
    wer = [0.070 + (i % 6) * 0.001 for i in range(20)]
    runs = [
        {"id": f"r{i}", "created_at": f"2026-10-{i + 1:02d}T00:00:00Z", "summary": {"wer": v}}
        for i, v in enumerate(wer)
    ]
    history = tmp_path / "runs.jsonl"
    history.write_text("".join(json.dumps(r) + "\n" for r in runs))
    before = Path.cwd()
    os.chdir(root)
    try:
        args = ["rebaseline", "--file", "evals/limits.py", "--history", str(history), "--dry-run"]
        result = CliRunner().invoke(app, args)
    finally:
        os.chdir(before)

    assert result.exit_code == 0, result.output
    ceiling = math.ceil(round(max(wer) * 1.05, 9) * 1000) / 1000  # the rule: max + 5 %, up
    assert "-WER_MAX = 0.083" in result.stdout
    assert f"+WER_MAX = {ceiling:.3f}" in result.stdout
    assert "test_speech.py" not in result.stdout  # the test is read, never written


def test_check_config_lists_the_gates_of_a_constants_module(tmp_path: Path) -> None:
    files = {"evals/limits.py": LIMITS, "evals/test_speech.py": SPEECH_TEST}
    root = _repo(tmp_path / "r", {**files, ".github/threshold-bot.yml": 'python: ["evals/*.py"]\n'})

    result = CliRunner().invoke(app, ["check-config", "--repo-root", str(root)])

    lines = [line.strip() for line in result.stdout.splitlines()]
    assert any(line.startswith("evals/limits.py:3: WER_MAX: wer <= 0.083") for line in lines)
    assert any(line.startswith("evals/limits.py:4: CER_MAX: cer <= 0.031") for line in lines)


def test_the_action_diffs_a_constants_module_with_its_tests_at_each_ref() -> None:
    head_limits = LIMITS.replace("0.083", "0.09")
    version = FileVersions(
        "evals/limits.py",
        head_limits,
        LIMITS,
        related={"evals/test_speech.py": SPEECH_TEST},
        base_related={"evals/test_speech.py": SPEECH_TEST},
    )

    found = find_changes([version], parse_config('python: ["evals/*.py"]'), pin=False)

    moved = {(c.head.name, c.base.literal, c.head.literal) for c in found.changes if c.changed}
    assert moved == {("WER_MAX", "0.083", "0.09")}


def test_the_core_reads_at_most_max_modules_related_modules_and_says_so() -> None:
    count = MAX_MODULES + 4
    limits = "".join(f"ACC_MIN_{i:02d} = 0.{50 + i}\n" for i in range(count))
    related = {
        f"evals/test_task{i:02d}.py": (
            f"from evals.limits import ACC_MIN_{i:02d}\n\n"
            f"def test_task(r):\n    assert r['task{i:02d}/acc'] >= ACC_MIN_{i:02d}\n"
        )
        for i in range(count)
    }

    found = find_gates("evals/limits.py", limits, RepoConfig(), related)

    assert found is not None
    read = MAX_MODULES - 1  # the file under review is one of the modules
    assert [g.name for g in found.gates] == [f"ACC_MIN_{i:02d}" for i in range(read)]
    (note,) = found.notes
    assert note.startswith(
        f"5 related modules not read (over {MAX_MODULES}): evals/test_task31.py,"
    )


def test_an_imported_name_the_importer_assigns_again_is_not_followed() -> None:
    shadowing = SPEECH_TEST.replace(
        "from evals.limits import WER_MAX\n", "from evals.limits import WER_MAX\nWER_MAX = 0.2\n"
    )
    related = {"evals/test_speech.py": shadowing}

    found = find_gates("evals/limits.py", LIMITS, RepoConfig(), related)

    assert gates(found) == {("CER_MAX", "cer", "<=", "0.031")}


def test_a_call_given_several_names_keys_its_results_by_them() -> None:
    suite = (
        "def test_hellaswag():\n"
        '    assert score_suite("hellaswag")["acc_norm"] >= 0.61\n\n'
        "def test_winogrande():\n"
        '    assert score_suite("winogrande")["acc"] >= 0.58\n\n'
        "def test_vit():\n"
        '    assert evaluate("vit-b16")["top1"] >= 0.81\n'
    )

    found = find_gates("tests/test_suite.py", suite, RepoConfig())

    assert {(g.metric, g.literal) for g in (found.gates if found else ())} == {
        ("hellaswag/acc_norm", "0.61"),
        ("winogrande/acc", "0.58"),
        ("top1", "0.81"),  # one name everywhere: it tells no results apart
    }


def test_a_method_inherited_from_a_class_of_another_module_is_a_helper() -> None:
    base = (
        "import unittest\n\n"
        "class ServingCase(unittest.TestCase):\n"
        "    def assert_latency(self, stats, max_latency_ms, pct='p99'):\n"
        "        if stats[pct] > max_latency_ms:\n"
        "            self.fail(f'{pct} over {max_latency_ms} ms')\n"
    )
    test = (
        "from serving.testing import ServingCase\n\n"
        "class TestDecode(ServingCase):\n"
        "    def test_decode_latency(self):\n"
        "        self.assert_latency(self.stats, 42.5)\n"
        "        self.assert_latency(self.stats, 18.0, pct='p50')\n"
    )

    found = find_gates("serving/test_decode.py", test, RepoConfig(), {"serving/testing.py": base})

    assert {(g.metric, g.op, g.literal, g.context) for g in (found.gates if found else ())} == {
        ("stats/p99", "<=", "42.5", "TestDecode.test_decode_latency"),
        ("stats/p50", "<=", "18.0", "TestDecode.test_decode_latency"),
    }
