"""End to end: ``threshold-bot review`` over the demo example, every number recomputed here
from the generated records (never copied from the output), and the bad-input cases."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app
from bot.core.render.review import MARKER
from demo.data import GATED_METRICS, SCRIPT_PATH, ExamplePaths, write_example

RUNNER = CliRunner()


@dataclass(frozen=True)
class Data:
    paths: ExamplePaths
    finished: list[dict[str, Any]]  # finished runs, oldest first
    base: dict[str, str]  # gate name -> literal before the PR
    head: dict[str, str]  # gate name -> literal as proposed
    effects: list[datetime]  # merge times of the PRs that changed the metrics


def _literals(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        if name in GATED_METRICS:
            found[name] = value
    return found


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Data:
    paths = write_example(tmp_path_factory.mktemp("example"))
    records = [json.loads(line) for line in paths.history.read_text().splitlines()]
    finished = sorted(
        (r for r in records if r["state"] == "finished"), key=lambda r: r["created_at"]
    )
    pulls = json.loads(paths.pulls_file.read_text())
    merged = {p["number"]: _at(p["merged_at"]) for p in pulls["merged"]}
    return Data(
        paths,
        finished,
        _literals(paths.base.read_text()),
        _literals(paths.head.read_text()),
        [merged[n] for n in pulls["effect_pulls"]],
    )


def run(*args: str | Path) -> Result:
    return RUNNER.invoke(app, [str(a) for a in args])


def review_args(data: Data, *extra: str | Path) -> list[str | Path]:
    p = data.paths
    return ["review", "--history", p.history, "--file", p.head, "--base", p.base, *extra]


# --------------------------------------------------------------------------- the rule, again


def _values(runs: list[dict[str, Any]], metric: str) -> list[float]:
    out = [r["summary"].get(metric) for r in runs]
    return [float(v) for v in out if isinstance(v, int | float) and math.isfinite(v)]


def _passes(value: float, op: str, limit: float) -> bool:
    return {">=": value >= limit, ">": value > limit, "<=": value <= limit, "<": value < limit}[op]


def _rule(window: list[float], op: str, literal: str, allowance: float) -> tuple[float, int]:
    lower = op in (">=", ">")
    edge = Decimal(repr(min(window) if lower else max(window)))
    unrounded = edge - Decimal(repr(allowance)) * abs(edge) * (1 if lower else -1)
    written = max(0, -int(Decimal(literal).as_tuple().exponent))
    places = max(written, 2 - 1 - unrounded.adjusted())
    step = Decimal(1).scaleb(-places)
    rounded = unrounded.quantize(step, rounding=ROUND_FLOOR if lower else ROUND_CEILING)
    return float(rounded), places


def _expected(
    data: Data, name: str, window_runs: int = 20, allowance: float = 0.05
) -> dict[str, Any]:
    metric, op = GATED_METRICS[name]
    old, new = float(data.base[name]), float(data.head[name])
    with_metric = [r for r in data.finished if _values([r], metric)]
    values = _values(with_metric, metric)
    window = values[-window_runs:]
    recomputed, places = _rule(window, op, data.base[name], allowance)
    fails_old = [not _passes(v, op, old) for v in values]
    streak = 0
    for failed in reversed(fails_old):
        if not failed:
            break
        streak += 1
    proposed_failed = sum(not _passes(v, op, new) for v in window)
    changed = data.base[name] != data.head[name]
    step = 10.0**-places
    looser = (recomputed - new if op in (">=", ">") else new - recomputed) > step + 1e-12
    if not changed:
        verdict = "unchanged_failing" if proposed_failed else "unchanged"
    else:
        verdict = "too_tight" if proposed_failed else "looser_than_rule" if looser else "ok"
    return {
        "metric": metric,
        "op": op,
        "old": old,
        "proposed": new,
        "recomputed": recomputed,
        "window_min": min(window),
        "window_max": max(window),
        "old_failures": {"failed": sum(fails_old[-30:]), "total": min(30, len(values))},
        "proposed_failures": {"failed": proposed_failed, "total": len(window)},
        "consecutive_failures": streak,
        "failing_since": with_metric[-streak]["created_at"] if streak else None,
        "verdict": verdict,
        "window_first": with_metric[-len(window)]["created_at"],
        "window_last": with_metric[-1]["created_at"],
        "places": places,
    }


# --------------------------------------------------------------------------- the review


def test_json_review_matches_numbers_recomputed_from_the_data(data: Data) -> None:
    result = run(*review_args(data, "--format", "json"))
    assert result.exit_code == 0, result.output
    review = json.loads(result.stdout)
    assert [g["name"] for g in review["gates"]] == list(GATED_METRICS)
    for gate in review["gates"]:
        want = _expected(data, gate["name"])
        assert gate["file"] == data.paths.head.as_posix()
        for key in ("metric", "op", "old", "proposed", "old_failures", "proposed_failures"):
            assert gate[key] == want[key], (gate["name"], key)
        for key in ("consecutive_failures", "failing_since", "verdict"):
            assert gate[key] == want[key], (gate["name"], key)
        assert gate["recomputed"] == pytest.approx(want["recomputed"], abs=1e-12)
        assert gate["window_min"] == want["window_min"]
        assert gate["window_max"] == want["window_max"]
        assert gate["window"]["kind"] == "last" and gate["window"]["runs"] == 20
        assert gate["window"]["first"] == want["window_first"]
        assert gate["window"]["last"] == want["window_last"]
    # the example was built to show each kind of verdict, and stale old values
    verdicts = {g["name"]: g["verdict"] for g in review["gates"]}
    assert sorted(set(verdicts.values())) == ["looser_than_rule", "ok", "too_tight", "unchanged"]
    assert review["conclusion"] == "action_required"
    streaks = [g["consecutive_failures"] for g in review["gates"]]
    assert max(streaks) == 22


def test_regimes_start_at_the_merges_that_moved_the_metrics(data: Data) -> None:
    review = json.loads(run(*review_args(data, "--format", "json")).stdout)
    first_after = [
        next(r["created_at"] for r in data.finished if _at(r["created_at"]) > merged)
        for merged in data.effects
    ]
    assert [c["at"] for c in review["changes"]] == first_after
    regimes = review["regimes"]
    assert len(regimes) == len(data.effects) + 1
    assert sum(r["runs"] for r in regimes) == len(data.finished)
    assert regimes[0]["start"] == data.finished[0]["created_at"]
    assert regimes[-1]["end"] == data.finished[-1]["created_at"]
    bounds = [data.finished[0]["created_at"], *first_after]
    for regime, start in zip(regimes, bounds, strict=True):
        assert regime["start"] == start
        members = [r for r in data.finished if start <= r["created_at"] <= regime["end"]]
        assert len(members) == regime["runs"]
        score = _values(members, "eval/all/avg_score")
        assert regime["medians"]["eval/all/avg_score"] == pytest.approx(float(np.median(score)))
    for change in review["changes"]:
        before = [r for r in data.finished if r["created_at"] < change["at"]][-1]
        after = next(r for r in data.finished if r["created_at"] == change["at"])
        assert change["before_commit"] == before["commit"]
        assert change["after_commit"] == after["commit"]
        assert change["pulls"] == []  # no GitHub in the CLI


def test_markdown_is_the_comment_with_recomputed_numbers(data: Data, tmp_path: Path) -> None:
    result = run(*review_args(data, "--format", "markdown"))
    assert result.exit_code == 0 and result.stderr == ""
    text = result.stdout
    assert text.splitlines()[0] == MARKER
    for name in GATED_METRICS:
        want = _expected(data, name)
        row = next(line for line in text.splitlines() if line.startswith(f"| <code>{_md(name)}<"))
        assert f"| {want['recomputed']:.{want['places']}f} |" in row
        failed, total = want["proposed_failures"]["failed"], want["proposed_failures"]["total"]
        assert (f"**{failed}**/{total}" if failed else f"0/{total}") in row
    # --output writes the same bytes; the default format (not a terminal) is markdown too
    out = tmp_path / "comment.md"
    assert run(*review_args(data, "--output", out)).exit_code == 0
    assert out.read_text(encoding="utf-8") == text
    assert run(*review_args(data)).stdout == text


def _md(name: str) -> str:
    return name.replace("_", "\\_")


def test_fail_on_action_required(data: Data) -> None:
    result = run(*review_args(data, "--fail-on", "action_required", "--format", "json"))
    assert result.exit_code == 1
    assert json.loads(result.stdout)["conclusion"] == "action_required"


def test_audit_without_base_treats_every_gate_as_unchanged(data: Data) -> None:
    p = data.paths
    result = run("review", "--history", p.history, "--file", p.head, "--format", "json")
    assert result.exit_code == 0
    gates = json.loads(result.stdout)["gates"]
    assert all(g["old"] == g["proposed"] for g in gates)
    for g in gates:
        metric, op = GATED_METRICS[g["name"]]
        window = _values(data.finished, metric)[-20:]
        failing = any(not _passes(v, op, g["proposed"]) for v in window)
        assert g["verdict"] == ("unchanged_failing" if failing else "unchanged")


def test_other_windows_and_allowance(data: Data) -> None:
    since = run(*review_args(data, "--window", "since:2026-09-01", "--format", "json"))
    expect = [r for r in data.finished if r["created_at"] >= "2026-09-01"]
    for gate in json.loads(since.stdout)["gates"]:
        assert gate["window"]["runs"] == len(expect)
        assert gate["window"]["first"] == expect[0]["created_at"]
    regime = json.loads(run(*review_args(data, "--window", "regime", "--format", "json")).stdout)
    newest_change = regime["changes"][-1]["at"]
    eval_gate = regime["gates"][0]
    assert eval_gate["window"]["runs"] == sum(
        r["created_at"] >= newest_change for r in data.finished
    )
    wide = json.loads(run(*review_args(data, "--allowance", "0.1", "--format", "json")).stdout)
    for gate in wide["gates"]:
        want = _expected(data, gate["name"], allowance=0.1)
        assert gate["recomputed"] == pytest.approx(want["recomputed"], abs=1e-12)


def test_unknown_metric_gets_no_data(data: Data, tmp_path: Path) -> None:
    script = tmp_path / "gate.sh"
    script.write_text('#!/bin/bash\nMIN=0.5\ncheck --asserts "no/such/metric >= $MIN"\n')
    result = run("review", "--history", data.paths.history, "--file", script, "--format", "json")
    assert result.exit_code == 0
    [gate] = json.loads(result.stdout)["gates"]
    assert gate["verdict"] == "no_data" and gate["recomputed"] is None


def test_skip_bad_lines_counts_them(data: Data, tmp_path: Path) -> None:
    history = tmp_path / "runs.jsonl"
    history.write_text(data.paths.history.read_text() + "{not json\n")
    args = ["review", "--history", history, "--file", data.paths.head, "--format", "json"]
    result = run(*args, "--skip-bad-lines")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["history"]["skipped_lines"] == 1


# --------------------------------------------------------------------------- bad input


def _bad_inputs(data: Data, tmp: Path) -> dict[str, tuple[list[str | Path], str]]:
    p = data.paths
    bad_line = tmp / "bad.jsonl"
    lines = p.history.read_text().splitlines()
    bad_line.write_text("\n".join([*lines[:5], '{"id": "x"', *lines[5:]]) + "\n")
    no_gates = tmp / "plain.sh"
    no_gates.write_text("#!/bin/bash\nMAX_STEPS=40\necho $MAX_STEPS\n")
    word = tmp / "word.sh"
    word.write_text('#!/bin/bash\nMIN=high\ncheck "eval/all/avg_score >= $MIN"\n')
    bad_yaml = tmp / "bad.yml"
    bad_yaml.write_text("rule: [unclosed\n")
    bad_key = tmp / "typo.yml"
    bad_key.write_text("rule:\n  alowance: 0.1\n")
    txt = tmp / "runs.txt"
    txt.write_text("hello\n")
    ok = ["--history", p.history, "--file", p.head]
    return {
        "missing history": (["--history", tmp / "none.jsonl", "--file", p.head], "none.jsonl"),
        "history is a directory": (["--history", tmp, "--file", p.head], str(tmp)),
        "unknown history format": (["--history", txt, "--file", p.head], "runs.txt"),
        "bad history line": (["--history", bad_line, "--file", p.head], "bad.jsonl:6"),
        "missing file": (["--history", p.history, "--file", tmp / "none.sh"], "none.sh"),
        "missing base": ([*ok, "--base", tmp / "gone.sh"], "gone.sh"),
        "file without gates": (["--history", p.history, "--file", no_gates], "no threshold gates"),
        "non-numeric literal": (["--history", p.history, "--file", word], "word.sh"),
        "bad window": ([*ok, "--window", "last"], "window"),
        "negative allowance": ([*ok, "--allowance", "-0.1"], "allowance"),
        "allowance over 100%": ([*ok, "--allowance", "1e308"], "allowance"),
        "infinite allowance": ([*ok, "--allowance", "inf"], "allowance"),
        "bad YAML config": ([*ok, "--config", bad_yaml], "bad.yml"),
        "unknown config key": ([*ok, "--config", bad_key], "alowance"),
        "missing config": ([*ok, "--config", tmp / "none.yml"], "none.yml"),
        "unknown option": ([*ok, "--colour"], "--colour"),
        "bad format": ([*ok, "--format", "xml"], "xml"),
        "missing option": (["--history", p.history], "--file"),
    }


CASES = [
    "missing history",
    "history is a directory",
    "unknown history format",
    "bad history line",
    "missing file",
    "missing base",
    "file without gates",
    "non-numeric literal",
    "bad window",
    "negative allowance",
    "allowance over 100%",
    "infinite allowance",
    "bad YAML config",
    "unknown config key",
    "missing config",
    "unknown option",
    "bad format",
    "missing option",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_with_one_line(data: Data, tmp_path: Path, case: str) -> None:
    args, mentions = _bad_inputs(data, tmp_path)[case]
    result = run("review", *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("threshold-bot: error: ")
    assert mentions in lines[0]
    assert "Traceback" not in result.output


def test_script_path_label_and_console_entry(data: Data) -> None:
    assert SCRIPT_PATH.endswith(data.paths.head.name)
    assert run("--help").exit_code == 0
    missing = run()  # a bare command: the help, on stderr, status 2 (click's way)
    assert missing.exit_code == 2 and missing.stderr.startswith("Usage: threshold-bot ")
