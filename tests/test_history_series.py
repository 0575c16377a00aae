"""Per-step series in history files (JSON Lines ``series``), and which gates ask for them."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.history.files import FileSource, read_history
from bot.core.history.formats import parse_history, select_runs
from bot.core.history.series import (
    MAX_SERIES_METRICS,
    MAX_SERIES_STEPS,
    Steps,
    attach,
    newest_finished,
    requested,
    series_metrics,
    steps_from_rows,
    with_series,
)
from bot.core.history.sources import BadHistory
from bot.core.models import CurvePoint, Gate, History, Run, RunState, SourceSpec, Span

FIXTURE = Path(__file__).parent / "fixtures" / "gates" / "series" / "functional_runs.jsonl"
T0 = datetime(2026, 3, 10, 2, 15, tzinfo=UTC)


def raw_rows() -> list[dict[str, Any]]:
    """The fixture's lines as plain JSON, to compute what the parser must return."""
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def finite(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def line(**fields: Any) -> str:
    """One JSON line of a run with ``fields`` (id, created_at and summary filled in)."""
    row = {"id": "r1", "created_at": "2026-03-10T02:15:00Z", "summary": {"lm loss": 8.2}}
    row.update(fields)
    return json.dumps(row)


def gate(metric: str, **fields: Any) -> Gate:
    """A reference gate on ``metric`` (``fields``: points, aggregation, ignored…)."""
    return Gate(
        name=metric,
        file="golden_values.json",
        line=3,
        metric=metric,
        op="==",
        kind="reference",
        value=8.2,
        literal="8.2",
        start=10,
        end=13,
        **fields,
    )


# --------------------------------------------------------------------------- JSON Lines


def test_fixture_series_are_read_step_by_step_and_nan_null_are_counted() -> None:
    history = read_history(FIXTURE)
    rows = {row["id"]: row for row in raw_rows()}
    dropped = 0
    for run in history.runs:
        raw = rows[run.id]["series"]
        for metric, steps in raw.items():
            expected = {int(step): float(v) for step, v in steps.items() if finite(v)}
            assert run.series[metric] == expected
            dropped += sum(1 for v in steps.values() if not finite(v))
    assert dropped == 2  # the fixture's "nan" and null
    assert history.stats.non_finite_values == dropped
    assert history.stats.non_numeric_values == 0


def test_a_failed_run_keeps_the_steps_it_reached() -> None:
    history = read_history(FIXTURE)
    failed = [r for r in history.runs if r.state == "failed"]
    raw = next(row for row in raw_rows() if row["state"] == "failed")
    assert len(failed) == 1
    assert max(failed[0].series["lm loss"]) == max(int(s) for s in raw["series"]["lm loss"])
    assert max(failed[0].series["lm loss"]) < max(history.finished[0].series["lm loss"])


def test_a_row_without_series_or_with_null_has_none() -> None:
    text = line(id="a") + "\n" + line(id="b", created_at="2026-03-11T00:00:00Z", series=None)
    history = parse_history(text, "runs.jsonl")
    assert [r.series for r in history.runs] == [{}, {}]
    assert history.runs[0].summary == {"lm loss": 8.2}


def test_non_numbers_in_a_series_are_counted_apart_from_non_finite() -> None:
    series = {"lm loss": {"1": 10.8, "6": "fast", "11": True, "16": [1], "21": "-Infinity"}}
    history = parse_history(line(series=series), "runs.jsonl")
    assert history.runs[0].series == {"lm loss": {1: 10.8}}
    assert (history.stats.non_numeric_values, history.stats.non_finite_values) == (3, 1)


@pytest.mark.parametrize(
    ("series", "reason"),
    [
        ([1, 2], "'series' must be an object, not list"),
        ({"lm loss": [10.8, 10.7]}, "series 'lm loss' must be an object of step: value, not list"),
        ({"lm loss": {"abc": 1.0}}, "step 'abc' is not a whole number"),
        ({"lm loss": {"-1": 1.0}}, "step '-1' is not a whole number"),
        ({"lm loss": {"1.5": 1.0}}, "step '1.5' is not a whole number"),
        ({"lm loss": {"1" * 19: 1.0}}, "at most 18 digits"),
        ({"lm loss": {"\u0661": 1.0}}, "is not a whole number"),  # an Arabic-Indic digit
    ],
)
def test_a_malformed_series_is_a_malformed_line(series: object, reason: str) -> None:
    text = line(id="ok") + "\n" + line(id="bad", series=series)
    with pytest.raises(BadHistory, match=r"runs\.jsonl:2: ") as err:
        parse_history(text, "runs.jsonl")
    assert reason in str(err.value)
    skipped = parse_history(text, "runs.jsonl", skip_bad_lines=True)
    assert [r.id for r in skipped.runs] == ["ok"]
    assert skipped.stats.skipped_lines == 1


def test_a_series_over_the_step_cap_is_refused() -> None:
    steps = {str(s): 1.0 for s in range(MAX_SERIES_STEPS + 1)}
    with pytest.raises(BadHistory) as err:
        parse_history(line(series={"lm loss": steps}), "runs.jsonl")
    assert f"has {MAX_SERIES_STEPS + 1} steps, more than {MAX_SERIES_STEPS}" in str(err.value)
    at_cap = {str(s): 1.0 for s in range(MAX_SERIES_STEPS)}
    history = parse_history(line(series={"lm loss": at_cap}), "runs.jsonl")
    assert len(history.runs[0].series["lm loss"]) == MAX_SERIES_STEPS


def test_a_row_over_the_series_cap_is_refused() -> None:
    many = {f"loss/{i}": {"1": 1.0} for i in range(MAX_SERIES_METRICS + 1)}
    with pytest.raises(BadHistory, match=f"more than {MAX_SERIES_METRICS}"):
        parse_history(line(series=many), "runs.jsonl")


def test_csv_histories_carry_no_series() -> None:
    text = "id,created_at,lm loss,series\nr1,2026-03-10T02:15:00Z,8.2,3\n"
    history = parse_history(text, "runs.csv")
    assert history.runs[0].series == {}
    assert history.runs[0].summary == {"lm loss": 8.2, "series": 3.0}  # just a column


def test_summary_keys_name_series_too() -> None:
    series = {"train/lm_loss": {"1": 10.8, "6": 10.5}}
    history = parse_history(line(series=series), "runs.jsonl")
    spec = SourceSpec(kind="file", path="runs.jsonl", summary_keys={"lm loss": "train/lm_loss"})
    run = select_runs(history, spec).runs[0]
    assert run.series["lm loss"] == run.series["train/lm_loss"] == {1: 10.8, 6: 10.5}


def test_a_file_source_in_the_repository_serves_series() -> None:
    text = FIXTURE.read_text()
    spec = SourceSpec(kind="file", path="ci/functional_runs.jsonl", states=("finished",))
    history = FileSource(lambda path: text).fetch(spec)
    raw = [row for row in raw_rows() if row["state"] == "finished"]
    assert len(history.runs) == len(raw)
    assert history.runs[-1].series["lm loss"][41] == raw[-1]["series"]["lm loss"]["41"]


# --------------------------------------------------------------------------- which gates


def test_curve_and_aggregation_gates_ask_for_series_others_do_not() -> None:
    span = Span(literal="10.85", start=1, end=6, line=2)
    gates = [
        gate("lm loss", points=(CurvePoint(step=1, value=10.85, span=span),)),
        gate("timing/step_s", aggregation="mean", last_steps=5),
        gate("eval/acc"),  # a plain reference: the summary value
        gate("num-zeros", aggregation="max", ignored="# threshold-bot: ignore"),
        gate("lm loss", aggregation="last"),
    ]
    assert series_metrics(gates) == ("lm loss", "timing/step_s")
    spec = SourceSpec(kind="wandb", entity="acme", project="gpt3")
    asked = with_series(spec, gates)
    assert asked.series == ("lm loss", "timing/step_s")
    assert asked.key() == spec.key()  # the same source, the same cache
    assert with_series(spec, [gate("eval/acc")]) is spec
    assert with_series(asked, [gate("eval/acc")]).series == ()  # only what the gates ask


def test_series_a_config_names_are_bounded_too() -> None:
    names = ["x" * 501] + [f"loss/{i:03d}" for i in range(MAX_SERIES_METRICS + 5)]
    spec = SourceSpec(kind="wandb", entity="acme", project="gpt3", series=tuple(names))
    assert requested(spec) == tuple(names[1 : MAX_SERIES_METRICS + 1])


def test_series_metrics_are_bounded() -> None:
    gates = [gate(f"loss/{i:03d}", aggregation="mean") for i in range(MAX_SERIES_METRICS + 5)]
    gates.append(gate("x" * 501, aggregation="mean"))  # too long a name to ask for
    metrics = series_metrics(gates)
    assert len(metrics) == MAX_SERIES_METRICS
    assert metrics[0] == "loss/000" and "x" * 501 not in metrics


# --------------------------------------------------------------------------- remote rows


def test_remote_rows_become_steps() -> None:
    rows: list[dict[str, Any]] = [
        {"_step": 0, "lm loss": 10.9},
        {"_step": 5.0, "lm loss": 10.4},  # W&B may send a whole step as a float
        {"_step": True, "lm loss": 1.0},  # not a step
        {"_step": -1, "lm loss": 1.0},
        {"_step": 10},  # no value at this step
        {"_step": 15, "lm loss": "NaN"},
        {"_step": 20, "lm loss": {"_type": "histogram"}},
        {"_step": 25, "lm loss": 9.9},
    ]
    assert steps_from_rows(rows, "lm loss") == Steps({0: 10.9, 5: 10.4, 25: 9.9}, 1, 1)
    assert steps_from_rows(rows, "lm loss", limit=2).values == {0: 10.9, 5: 10.4}


def run(i: int, state: RunState = "finished") -> Run:
    return Run(id=f"r{i}", created_at=T0 + timedelta(days=i), state=state)


def test_series_are_read_for_the_newest_finished_runs_first() -> None:
    runs = [run(0), run(1, "running"), run(2), run(3, "failed"), run(4)]
    assert newest_finished(runs, 2) == ["r4", "r2"]
    assert newest_finished(runs) == ["r4", "r2", "r0"]


def test_attach_sets_series_and_counts_what_was_dropped() -> None:
    history = History(runs=(run(0), run(1)))
    read = {
        "r1": {"lm loss": Steps({1: 10.8}, non_finite=2, non_numeric=1)},
        "gone": {"lm loss": Steps({1: 1.0}, non_finite=5)},  # not in the history: ignored
    }
    attached = attach(history, read)
    assert [r.series for r in attached.runs] == [{}, {"lm loss": {1: 10.8}}]
    assert (attached.stats.non_finite_values, attached.stats.non_numeric_values) == (2, 1)
