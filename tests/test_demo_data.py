"""The demo example: deterministic, realistic, and shaped as the demo needs."""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

from bot.adapters.history.files import read_history
from demo.data import (
    GATED_METRICS,
    METRICS,
    build_example,
    dump_jsonl,
    generate_history,
    scaled_history,
    write_example,
)


@pytest.fixture(scope="module")
def records() -> list[dict[str, object]]:
    return generate_history()


def test_same_seed_same_bytes_other_seed_other_data(tmp_path: Path) -> None:
    one, two = write_example(tmp_path / "a"), write_example(tmp_path / "b")
    for name in ("history.jsonl", "pulls.json", "base/tests/ci/gsm8k_nightly.sh"):
        assert (one.root / name).read_bytes() == (two.root / name).read_bytes()
    assert dump_jsonl(generate_history(seed=1)) != one.history.read_text()


def test_a_year_of_nightly_runs_with_gaps_and_reruns(records: list[dict[str, object]]) -> None:
    assert 300 <= len(records) <= 360
    days = [date.fromisoformat(str(r["created_at"])[:10]) for r in records]
    assert days[0] < date(2025, 10, 15) and days[-1] > date(2026, 9, 1)
    per_day = Counter(days)
    span = (days[-1] - days[0]).days + 1
    assert max(per_day.values()) == 2  # some nights ran twice
    assert len(per_day) < span  # some nights did not run
    states = Counter(str(r["state"]) for r in records)
    assert states["crashed"] and states["failed"] and states["running"] == 1
    assert states["finished"] > 0.9 * len(records)
    assert len({r["id"] for r in records}) == len(records)


def test_metrics_scales_zero_stretch_and_nan(records: list[dict[str, object]]) -> None:
    finished = [r for r in records if r["state"] == "finished"]
    summaries = [r["summary"] for r in finished]
    assert all(isinstance(s, dict) for s in summaries)
    medians = {}
    for metric in METRICS:
        values = sorted(
            float(s[metric]) for s in summaries if isinstance(s, dict) and math.isfinite(s[metric])
        )
        medians[metric] = values[len(values) // 2]
    assert 0.5 < medians["eval/all/avg_score"] < 0.7
    assert 200 < medians["generate/avg_num_tokens"] < 350
    assert max(medians.values()) / min(v for v in medians.values() if v) > 1e4
    clip = [s["policy/clip_ratio"] for s in summaries if isinstance(s, dict)]
    first_positive = next(i for i, v in enumerate(clip) if v > 0)
    assert first_positive > 60 and set(clip[:first_positive]) == {0.0}
    assert all(v > 0 for v in clip[first_positive:])
    nan = [s for s in summaries if isinstance(s, dict) and math.isnan(s["policy/grad_norm"])]
    assert len(nan) == 1


def test_reader_accepts_the_history(tmp_path: Path) -> None:
    paths = write_example(tmp_path)
    history = read_history(paths.history)
    assert history.stats.total == len(generate_history())
    assert history.stats.non_finite_values == 1
    assert {m for r in history.finished for m in r.summary} == set(METRICS)


def test_runs_checked_out_main_and_changes_come_from_prs() -> None:
    example = build_example()
    repo = example.repo
    merges = {p.merge_commit: p for p in repo.pulls}
    assert len(merges) == len(repo.pulls)
    assert [p.merged_at for p in repo.pulls] == sorted(p.merged_at for p in repo.pulls)
    for record in example.records:
        commit = str(record["commit"])
        assert commit == repo.initial_commit or commit in merges
        if commit in merges:
            assert merges[commit].merged_at.isoformat() < str(record["created_at"]).replace(
                "Z", "+00:00"
            )
    numbers = [p.number for p in repo.pulls]
    assert numbers == sorted(numbers) and len(repo.effect_pulls) == 5
    assert set(repo.effect_pulls) <= set(numbers) and repo.threshold_pull > numbers[-1]


def test_scripts_differ_only_in_the_proposed_values() -> None:
    example = build_example()
    base, head = example.base_script.splitlines(), example.head_script.splitlines()
    assert len(base) == len(head)
    changed = [(b, h) for b, h in zip(base, head, strict=True) if b != h]
    names = [h.removeprefix("export ").split("=")[0] for _b, h in changed if "=" in h]
    assert set(names) == {"EVAL_ACC_MIN_VALUE", "TRAIN_ACC_MIN_VALUE"} | {
        "AVG_NUM_TOKENS_MAX_VALUE",
        "STEP_TIME_MAX_VALUE",
    }
    for name, (metric, op) in GATED_METRICS.items():
        assert f'"{metric} {op} $' in example.head_script or f"{metric} {op} ${{{name}}}" in (
            example.head_script
        )
    assert '--project_name "gsm8k_fully_async_ci"' in example.head_script


def test_pulls_file_lists_the_threshold_pr(tmp_path: Path) -> None:
    paths = write_example(tmp_path)
    pulls = json.loads(paths.pulls_file.read_text())
    assert pulls["threshold_pull"]["number"] == paths.repo.threshold_pull
    assert pulls["threshold_pull"]["base_commit"] == pulls["merged"][-1]["merge_commit"]
    assert [p["number"] for p in pulls["merged"]] == [p.number for p in paths.repo.pulls]


def test_scaled_history_for_benchmarks() -> None:
    runs = scaled_history(500, 40, seed=3)
    assert len(runs) == 500
    finished = [r for r in runs if r["state"] == "finished"]
    assert all(len(r["summary"]) == 40 for r in finished)
    assert scaled_history(500, 40, seed=3) == runs
