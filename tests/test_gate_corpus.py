"""Gate shapes as ML repositories write them (issue 12): a corpus of threshold files in the
shapes of real projects (written for this suite), each with the gates its CI really checks.

Every file goes through ``threshold-bot review --format json`` as a user would run it, once
with no configuration and once with the minimal config beside it (tests/gate_scores.py).  A
gate is read faithfully when its metric, literal, kind and direction are right; the score of
a file is its faithful gates over its expected plus false gates, and the corpus score is the
mean over files.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from tests.gate_scores import Key, cases, score, write_history

CASES = cases("corpus")
WITH_CONFIG_TARGET = 0.9
WITHOUT_CONFIG_TARGET = 0.5


@pytest.mark.parametrize("configured", [True, False], ids=["config", "no-config"])
def test_corpus_is_read_faithfully(configured: bool, tmp_path: Path) -> None:
    total, readings = score("corpus", write_history(tmp_path), configured)
    false: dict[str, set[Key]] = {}
    for case in CASES:
        wanted, found = case.wanted(configured), readings[case.name].gates
        if found - wanted:
            false[case.name] = found - wanted
        print(f"{case.name:24} missed: {sorted(wanted - found)}")
    reading = "with" if configured else "without"
    print(f"file-averaged share ({reading} config): {total.file_share:.3f}")
    target = WITH_CONFIG_TARGET if configured else WITHOUT_CONFIG_TARGET
    assert total.file_share >= target
    assert not false, f"false gates: {false}"


def test_the_corpus_covers_every_shape() -> None:
    suffixes = {PurePosixPath(case.file).suffix for case in CASES}
    assert suffixes == {".sh", ".py", ".yaml", ".json", ".csv", ".toml"}
    kinds = {g["kind"] for case in CASES for g in case.expected}
    assert kinds == {"limit", "reference"}
