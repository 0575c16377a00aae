"""Per-test metrics (issue 28): tests that read the same bare key bind per test, through a
config template on the test's name (``{test}``, ``{class}``) or, without config, the
history's only key for that test ending with the bare key; ``closest_keys`` offers keys
ending with the bare key first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.analysis.keys import closest_keys, per_test_key
from bot.core.config import parse_config
from bot.core.models import Gate
from bot.core.thresholds.discover import find_gates

RUNNER = CliRunner()

RANKERS = """
import pytest


@pytest.fixture
def report(request):
    return rank_passages(request.param)


@pytest.mark.parametrize("report", ["sparse"], indirect=True)
def test_sparse(report):
    assert report["recall_at_5"] > 0.61


@pytest.mark.parametrize("report", ["dense"], indirect=True)
def test_dense(report):
    assert report["recall_at_5"] > 0.74


def test_hybrid(report):
    assert report["recall_at_5"] > 0.79


class TestRerankers:
    def test_cross_encoder(self, report):
        assert report["recall_at_5"] > 0.83
"""


def _metrics(config: str) -> dict[str, str]:
    found = find_gates("tests/test_rankers.py", RANKERS, parse_config(config))
    assert found is not None
    return {g.literal: g.metric for g in found.gates}


def test_a_template_on_the_test_name_binds_each_test_to_its_own_key() -> None:
    assert _metrics('metrics: {recall_at_5: "rank/{test}/recall_at_5"}\n') == {
        "0.61": "rank/test_sparse/recall_at_5",
        "0.74": "rank/test_dense/recall_at_5",
        "0.79": "rank/test_hybrid/recall_at_5",
        "0.83": "rank/test_cross_encoder/recall_at_5",
    }
    per_file = (
        "files:\n  - path: tests/test_rankers.py\n"
        '    metrics: {recall_at_5: "{class}.{test}.recall_at_5"}\n'
    )
    assert _metrics(per_file)["0.83"] == "TestRerankers.test_cross_encoder.recall_at_5"


def test_a_template_that_cannot_be_filled_leaves_the_name_as_written() -> None:
    found = _metrics('metrics: {recall_at_5: "{class}/recall_at_5"}\n')
    assert found["0.83"] == "TestRerankers/recall_at_5"
    assert found["0.61"] == "recall_at_5"  # no class around test_sparse
    assert "{" not in "".join(found.values())


def _review(tmp_path: Path, summary: dict[str, float], text: str = RANKERS) -> dict[str, Any]:
    (tmp_path / "test_rankers.py").write_text(text)
    runs = [
        {"id": f"r{i}", "created_at": f"2026-11-0{i}T00:00:00Z", "summary": summary}
        for i in range(1, 4)
    ]
    history = tmp_path / "runs.jsonl"
    history.write_text("".join(json.dumps(r) + "\n" for r in runs))
    args = ["review", "--file", str(tmp_path / "test_rankers.py"), "--history", str(history)]
    result = RUNNER.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    review: dict[str, Any] = json.loads(result.stdout)
    return review


def test_without_config_each_test_reads_the_history_key_ending_with_its_bare_key(
    tmp_path: Path,
) -> None:
    summary = {
        "test_sparse/recall_at_5": 0.65,  # the test's name
        "dense/recall_at_5": 0.78,  # the test's name without test_
        "cross_encoder/recall_at_5": 0.9,
        "test_cross_encoder/recall_at_5": 0.9,  # two keys for one test: left as written
        "eval/mrr": 0.5,
    }
    gates = {g["old_literal"]: g for g in _review(tmp_path, summary)["gates"]}
    assert {g["metric"] for g in gates.values()} == {"recall_at_5"}  # as found: pairs with it
    assert {literal: _read_as(g) for literal, g in gates.items()} == {
        "0.61": "test_sparse/recall_at_5",
        "0.74": "dense/recall_at_5",
        "0.79": None,  # no key names test_hybrid
        "0.83": None,  # two keys name test_cross_encoder
    }
    assert gates["0.74"]["window_min"] == pytest.approx(0.78)  # the key's values were read
    assert gates["0.61"]["window_min"] == pytest.approx(0.65)
    assert gates["0.79"]["window_min"] is None


def _read_as(gate: dict[str, Any]) -> str | None:
    """The key a gate's note says it was read from."""
    prefix = f"{gate['metric']} read as "
    notes = [n.removeprefix(prefix) for n in gate["notes"] if n.startswith(prefix)]
    if not notes:
        return None
    key, _, why = notes[0].partition(": ")
    assert why.startswith(f"the history's only key ending with /{gate['metric']} for test_")
    return key


def test_a_bare_key_the_history_has_is_kept(tmp_path: Path) -> None:
    summary = {"recall_at_5": 0.8, "test_sparse/recall_at_5": 0.65}
    gates = _review(tmp_path, summary)["gates"]
    assert [_read_as(g) for g in gates] == [None] * 4
    assert {g["window_min"] for g in gates} == {0.8}


CASES = """
import pytest

FLOORS = {"colbert": 0.52, "splade": 0.49}


@pytest.mark.parametrize("ranker", ["colbert", "splade"])
def test_retrieval(ranker):
    m = rank_passages(ranker)
    assert m["recall_at_5"] >= FLOORS[ranker]
"""


def test_without_config_a_parametrized_case_reads_the_key_named_by_its_id(
    tmp_path: Path,
) -> None:
    summary = {"colbert/recall_at_5": 0.6, "splade/recall_at_5": 0.55, "bm25/recall_at_5": 0.4}
    gates = _review(tmp_path, summary, CASES)["gates"]
    assert {g["name"]: _read_as(g) for g in gates} == {
        "FLOORS[colbert]": "colbert/recall_at_5",
        "FLOORS[splade]": "splade/recall_at_5",
    }
    assert sorted(g["window_min"] for g in gates) == [0.55, 0.6]


def test_per_test_key_matches_whole_segments_only() -> None:
    keys = frozenset({"test_dense_v2/recall_at_5", "nodense/recall_at_5", "dense/precision"})
    names = {"test_dense", "dense"}
    assert per_test_key("recall_at_5", names, keys) is None
    keys |= {"runs/dense/recall_at_5"}
    assert per_test_key("recall_at_5", names, keys) == "runs/dense/recall_at_5"


def test_the_test_of_a_gate_is_its_one_checking_test() -> None:
    def test(context: str) -> tuple[str, str] | None:
        return Gate.model_construct(context=context).test

    assert test("TestRerankers.test_cross_encoder") == ("test_cross_encoder", "TestRerankers")
    assert test("test_dense") == ("test_dense", "")
    assert test("test_dense, test_sparse") is None  # a constant several tests compare
    assert test("") is None


def test_closest_keys_offer_keys_ending_with_the_bare_key_first() -> None:
    keys = ["recall_at_50", "rank/test_dense/recall_at_5", "recal_at_5x", "b/recall_at_5"]
    found = closest_keys("recall_at_5", keys)
    assert found[:2] == ("b/recall_at_5", "rank/test_dense/recall_at_5")
    assert "recall_at_50" in found
