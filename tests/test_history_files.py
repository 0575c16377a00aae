"""Run history files: JSON Lines and CSV (docs/history-format.md)."""

from __future__ import annotations

import csv
import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.history.files import FileSource, read_history
from bot.core.history.formats import parse_csv, parse_jsonl, select_runs
from bot.core.history.sources import BadHistory, HistoryNotFound, HistorySource
from bot.core.models import SourceSpec

DATA = Path(__file__).resolve().parent / "data"

CONTRACT_LINE = (
    '{"id": "3kq9x2ab", "name": "run_20260731080512_4242", "created_at": "2026-07-31T08:05:12Z",'
    ' "state": "finished", "commit": "89405e499c817be9d70f9c3dce7f8c49da5890b0",'
    ' "tags": ["nightly"],'
    ' "summary": {"eval/all/avg_score": 0.5752, "loss/avg_final_rewards": 0.2391,'
    ' "generate/avg_num_tokens": 262.4}}'
)


def line(run_id: str, created_at: str, summary: dict[str, object], **extra: object) -> str:
    return json.dumps({"id": run_id, "created_at": created_at, "summary": summary, **extra})


def test_contract_example() -> None:
    history = parse_jsonl(CONTRACT_LINE, "runs.jsonl")
    (run,) = history.runs
    assert run.id == "3kq9x2ab"
    assert run.name == "run_20260731080512_4242"
    assert run.created_at == datetime(2026, 7, 31, 8, 5, 12, tzinfo=UTC)
    assert run.state == "finished"
    assert run.commit == "89405e499c817be9d70f9c3dce7f8c49da5890b0"
    assert run.tags == ("nightly",)
    assert run.summary == {
        "eval/all/avg_score": 0.5752,
        "loss/avg_final_rewards": 0.2391,
        "generate/avg_num_tokens": 262.4,
    }
    assert history.stats.total == history.stats.finished == 1
    assert history.source == "runs.jsonl"


def test_sorted_by_created_at_across_zones_and_defaults() -> None:
    text = "\n".join(
        [
            line("c", "2026-07-03T00:00:00+02:00", {"m": 3}),  # 2026-07-02T22:00Z
            line("a", "2026-07-01T00:00:00", {"m": 1}),  # no zone: UTC
            "",
            line("b", "2026-07-02T23:00:00Z", {"m": 2}),
        ]
    )
    history = parse_jsonl(text, "h.jsonl")
    assert [r.id for r in history.runs] == ["a", "c", "b"]
    assert history.runs[0].created_at == datetime(2026, 7, 1, tzinfo=UTC)
    assert all(r.created_at.tzinfo is UTC for r in history.runs)
    assert all(r.state == "finished" for r in history.runs)
    assert history.runs[0].summary == {"m": 1.0}
    assert isinstance(history.runs[0].summary["m"], float)


def test_duplicate_ids_last_line_wins() -> None:
    text = "\n".join(
        [
            line("a", "2026-07-01T00:00:00Z", {"m": 1, "bad": "x"}),
            line("b", "2026-07-02T00:00:00Z", {"m": 2}),
            line("a", "2026-07-03T00:00:00Z", {"m": 9}, state="failed"),
            line("a", "2026-07-04T00:00:00Z", {"m": 10}),
        ]
    )
    history = parse_jsonl(text, "h.jsonl")
    assert [(r.id, r.summary["m"]) for r in history.runs] == [("b", 2.0), ("a", 10.0)]
    assert history.stats.duplicate_ids == 2
    assert history.stats.total == 2
    # the replaced line's dropped value is not counted: only kept runs count
    assert history.stats.non_numeric_values == 0


def test_states_counted_and_finished_filtered() -> None:
    states = ["finished", "failed", "crashed", "killed", "running", "finished", "Failed"]
    text = "\n".join(
        line(f"r{i}", f"2026-07-0{i + 1}T00:00:00Z", {"m": i}, state=s)
        for i, s in enumerate(states)
    )
    history = parse_jsonl(text, "h.jsonl")
    assert history.stats.total == len(states)
    assert history.stats.finished == 2
    assert history.stats.by_state == {
        "crashed": 1,
        "failed": 2,
        "finished": 2,
        "killed": 1,
        "running": 1,
    }
    assert [r.id for r in history.finished] == ["r0", "r5"]


def test_value_kinds() -> None:
    summary = (
        '{"ok": 1.5, "int": 3, "nan": NaN, "inf": Infinity, "ninf": -Infinity,'
        ' "s": "0.5", "null": null, "dict": {"a": 1, "b": {"c": "2e-3"}}, "list": [1],'
        ' "bool": true, "word": "n/a", "snan": "NaN", "_t": {"_type": "histogram"}}'
    )
    text = f'{{"id": "a", "created_at": "2026-07-01T00:00:00Z", "summary": {summary}}}'
    history = parse_jsonl(text, "h.jsonl")
    run = history.runs[0]
    # nested objects are flattened, numbers written as text read (W&B media stay opaque)
    assert run.summary == {"ok": 1.5, "int": 3.0, "s": 0.5, "dict/a": 1.0, "dict/b/c": 0.002}
    assert history.stats.non_finite_values == 4  # NaN, Infinity, -Infinity, "NaN"
    assert history.stats.non_numeric_values == 5  # null, list, true, "n/a", histogram
    assert history.stats.flattened_values == 2
    assert history.stats.numeric_strings == 2
    assert all(math.isfinite(v) for v in run.summary.values())


def test_integers_beyond_float_range_are_non_finite() -> None:
    huge = 10**400
    text = line("a", "2026-07-01T00:00:00Z", {"big": huge, "small": -huge, "ok": 2})
    history = parse_jsonl(text, "h.jsonl")
    assert history.runs[0].summary == {"ok": 2.0}
    assert history.stats.non_finite_values == 2


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"created_at": "2026-07-01T00:00:00Z", "summary": {}}', "missing 'id'"),
        ('{"id": "x", "summary": {}}', "missing 'created_at'"),
        ('{"id": "x", "created_at": "yesterday", "summary": {}}', "not an ISO 8601"),
        ('{"id": "x", "created_at": "2026-07-01"}', "missing 'summary'"),
        ('{"id": "x", "created_at": "2026-07-01", "summary": [1]}', "'summary' must be"),
        ('{"id": "x", "created_at": "2026-07-01", "summary": {}, "state": "ok"}', "state"),
        ('{"id": "x", "created_at": "2026-07-01", "summary": {}, "tags": "a"}', "'tags'"),
        ('{"id": ["x"], "created_at": "2026-07-01", "summary": {}}', "'id' must be a string"),
        # out of range once moved to UTC
        ('{"id": "x", "created_at": "0001-01-01T00:00+01:00", "summary": {}}', "created_at"),
        # beyond what Python's JSON decoder takes: too many digits, too deep
        ('{"id": "x", "created_at": "2026-07-01", "summary": {"m": 1' + "0" * 5000 + "}}", "JSON"),
        ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
    ],
)
def test_bad_line_names_file_and_line(bad: str, reason: str) -> None:
    good = line("a", "2026-07-01T00:00:00Z", {"m": 1})
    text = f"{good}\n\n{bad}\n{good.replace('a', 'b', 1)}\n"
    with pytest.raises(BadHistory) as err:
        parse_jsonl(text, "runs.jsonl")
    assert str(err.value).startswith("runs.jsonl:3: ")
    assert reason in str(err.value)
    history = parse_jsonl(text, "runs.jsonl", skip_bad_lines=True)
    assert history.stats.skipped_lines == 1
    assert [r.id for r in history.runs] == ["a", "b"]


def test_csv_with_header() -> None:
    text = (
        "id,created_at,name,state,commit,tags,eval/acc,tokens\n"
        "r2,2026-07-02T00:00:00Z,second,failed,bbb,nightly;gpu,0.6,\n"
        "r1,2026-07-01T00:00:00,first,,aaa,,0.5,100\n"
        "\n"
        "r3,2026-07-03T00:00:00Z,third,finished,ccc,,nan,n/a\n"
    )
    history = parse_csv(text, "runs.csv")
    assert [r.id for r in history.runs] == ["r1", "r2", "r3"]
    r1, r2, r3 = history.runs
    assert r1.state == "finished" and r1.name == "first" and r1.commit == "aaa"
    assert r1.summary == {"eval/acc": 0.5, "tokens": 100.0}
    assert r1.created_at.tzinfo is UTC
    assert r2.state == "failed" and r2.tags == ("nightly", "gpu")
    assert r2.summary == {"eval/acc": 0.6}  # empty cell: absent, not counted
    assert r3.summary == {}
    assert history.stats.non_finite_values == 1
    assert history.stats.non_numeric_values == 1
    assert history.stats.by_state == {"failed": 1, "finished": 2}


def test_csv_bad_rows_and_header() -> None:
    text = "id,created_at,m\na,2026-07-01,1\nb,2026-07-02\nc,not-a-date,3\nd,2026-07-04,4\n"
    with pytest.raises(BadHistory, match=r"^runs\.csv:3: expected 3 fields, found 2$"):
        parse_csv(text, "runs.csv")
    history = parse_csv(text, "runs.csv", skip_bad_lines=True)
    assert [r.id for r in history.runs] == ["a", "d"]
    assert history.stats.skipped_lines == 2
    with pytest.raises(BadHistory, match=r"^runs\.csv:1: bad header: missing column 'created_at'"):
        parse_csv("id,m\na,1\n", "runs.csv")
    with pytest.raises(BadHistory, match="column 'm' appears twice"):
        parse_csv("id,created_at,m,m\n", "runs.csv", skip_bad_lines=True)
    assert parse_csv("", "runs.csv").runs == ()


def test_csv_rows_after_a_csv_error_are_still_read() -> None:
    oversized = "x" * (csv.field_size_limit() + 1)
    text = f'id,created_at,m\na,2026-07-01,1\nb,2026-07-02,"{oversized}"\nc,2026-07-03,3\n'
    with pytest.raises(BadHistory, match=r"^runs\.csv:3: not valid CSV: field larger"):
        parse_csv(text, "runs.csv")
    history = parse_csv(text + "d,2026-07-04,4\n", "runs.csv", skip_bad_lines=True)
    assert [r.id for r in history.runs] == ["a", "c", "d"]
    assert history.stats.skipped_lines == 1


def test_csv_line_numbers_count_quoted_newlines() -> None:
    text = 'id,created_at,name,m\na,2026-07-01,"two\nlines",1\nb,bad,x,2\n'
    with pytest.raises(BadHistory, match=r"^r\.csv:4: "):
        parse_csv(text, "r.csv")


def test_read_history_by_extension(tmp_path: Path) -> None:
    (tmp_path / "h.jsonl").write_text(CONTRACT_LINE + "\n", encoding="utf-8")
    (tmp_path / "h.csv").write_text("id,created_at,m\na,2026-07-01,1\n", encoding="utf-8")
    (tmp_path / "h.txt").write_text("x", encoding="utf-8")
    assert read_history(tmp_path / "h.jsonl").runs[0].id == "3kq9x2ab"
    assert read_history(tmp_path / "h.csv").runs[0].summary == {"m": 1.0}
    with pytest.raises(BadHistory, match=r"h\.txt: unknown history format '\.txt'"):
        read_history(tmp_path / "h.txt")
    with pytest.raises(HistoryNotFound, match="no such file"):
        read_history(tmp_path / "missing.jsonl")
    (tmp_path / "latin.csv").write_bytes(b"id,created_at,m\n\xe9,2026-07-01,1\n")
    with pytest.raises(BadHistory, match="not UTF-8"):
        read_history(tmp_path / "latin.csv")


def test_sample_history_file() -> None:
    history = read_history(DATA / "gsm8k_runs.jsonl")
    raw = [json.loads(x) for x in (DATA / "gsm8k_runs.jsonl").read_text().splitlines() if x]
    assert history.stats.total == len({r["id"] for r in raw})
    assert [r.created_at for r in history.runs] == sorted(r.created_at for r in history.runs)
    assert history.stats.finished == sum(
        1 for r in {r["id"]: r for r in raw}.values() if r.get("state", "finished") == "finished"
    )


def test_file_source_reads_filters_and_maps_keys() -> None:
    files = {
        "ci/runs.jsonl": "\n".join(
            [
                line("a", "2026-07-01T00:00:00Z", {"acc": 0.1}, tags=["nightly"], name="n-1"),
                line("b", "2026-07-02T00:00:00Z", {"acc": 0.2}, tags=["adhoc"], name="n-2"),
                line("c", "2026-07-03T00:00:00Z", {"acc": 0.3}, tags=["nightly"], state="failed"),
                line("d", "2026-07-04T00:00:00Z", {"acc": 0.4}, tags=["nightly", "x"], name="z"),
            ]
        )
    }

    def read_text(path: str) -> str:
        if path not in files:
            raise FileNotFoundError(path)
        return files[path]

    source: HistorySource = FileSource(read_text)
    everything = source.fetch(SourceSpec(kind="file", path="ci/runs.jsonl"))
    assert [r.id for r in everything.runs] == ["a", "b", "c", "d"]
    assert everything.source == "file:ci/runs.jsonl"
    spec = SourceSpec(
        kind="file",
        path="ci/runs.jsonl",
        tags=("nightly",),
        states=("finished",),
        name_regex="^n-",
        summary_keys={"eval/acc": "acc"},
    )
    picked = source.fetch(spec)
    assert [r.id for r in picked.runs] == ["a"]
    assert picked.runs[0].summary == {"acc": 0.1, "eval/acc": 0.1}
    assert picked.stats.total == 1
    after = datetime(2026, 7, 2, tzinfo=UTC)
    assert [r.id for r in select_runs(everything, SourceSpec(created_after=after)).runs] == [
        "b",
        "c",
        "d",
    ]
    with pytest.raises(HistoryNotFound, match=r"nope\.jsonl"):
        source.fetch(SourceSpec(kind="file", path="nope.jsonl"))
    with pytest.raises(BadHistory, match="not a history file source"):
        source.fetch(SourceSpec(kind="wandb", project="p"))


def test_unicode_line_separators_inside_values_do_not_split_lines() -> None:
    raw = {"id": "a", "created_at": "2026-07-01", "summary": {}, "name": "x\u2028y"}
    text = json.dumps(raw, ensure_ascii=False) + "\r\n"
    assert len(text.splitlines()) == 2  # str.splitlines() would cut this one line in two
    text += line("b", "2026-07-02T00:00:00Z", {"m": 2})
    history = parse_jsonl(text, "h.jsonl")
    assert [r.name for r in history.runs] == ["x\u2028y", None]
    csv_text = 'id,created_at,name,m\r\na,2026-07-01,"x\u2028y",1\r\nb,2026-07-02,,2\r\n'
    assert [r.name for r in parse_csv(csv_text, "h.csv").runs] == ["x\u2028y", None]
