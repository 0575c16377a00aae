"""One workflow run's artifact (a zip archive, as bytes) -> one history run, or a named skip:
the archive's bounds and paths, the member chosen, and each format (bot/core/history/artifacts.py,
bot/core/history/artifact_formats.py).  Archives are real zip files built here with zipfile."""

from __future__ import annotations

import io
import json
import stat
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.core.history import artifact_formats, artifacts
from bot.core.history.artifacts import Skipped, WorkflowRun, read_artifact
from bot.core.models import Run, SourceSpec

WHEN = datetime(2026, 11, 3, 2, 0, tzinfo=UTC)
RUN = WorkflowRun(id="9001", created_at=WHEN, commit="abc123", state="finished")


def _zip(members: dict[str, bytes | str], *, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _spec(**fields: object) -> SourceSpec:
    return SourceSpec.model_validate({"kind": "actions", "workflow": "nightly.yml", **fields})


def _lm_eval(gsm8k: float, arc: float) -> str:
    """A results JSON in lm-evaluation-harness 0.4's layout."""
    return json.dumps(
        {
            "results": {
                "gsm8k": {
                    "alias": "gsm8k",
                    "exact_match,strict-match": gsm8k,
                    "exact_match_stderr,strict-match": 0.0137,
                    "exact_match,flexible-extract": gsm8k + 0.02,
                    "exact_match_stderr,flexible-extract": "N/A",
                },
                "arc_challenge": {
                    "alias": "arc_challenge",
                    "acc,none": arc - 0.03,
                    "acc_stderr,none": 0.0142,
                    "acc_norm,none": arc,
                    "acc_norm_stderr,none": 0.0145,
                },
            },
            "group_subtasks": {"gsm8k": [], "arc_challenge": []},
            "configs": {"gsm8k": {"task": "gsm8k", "num_fewshot": 5}},
            "versions": {"gsm8k": 3.0, "arc_challenge": 1.0},
            "n-shot": {"gsm8k": 5, "arc_challenge": 0},
            "config": {"model": "hf", "model_args": "pretrained=Qwen/Qwen2.5-1.5B-Instruct"},
            "git_hash": "4f8a2c1",
            "date": 1762135200.0,
        }
    )


def _run(result: Run | Skipped) -> Run:
    assert isinstance(result, Run), result
    return result


def _skip(result: Run | Skipped) -> str:
    assert isinstance(result, Skipped), result
    return result.reason


# --------------------------------------------------------------------------- lm-eval


def test_lm_eval_results_are_read_without_configuration_as_task_slash_metric() -> None:
    archive = _zip({"Qwen__Qwen2.5/results_2026-11-03T02-00-00.json": _lm_eval(0.54, 0.467)})
    run = _run(read_artifact(archive, _spec(), RUN))
    assert run.summary == {
        "gsm8k/exact_match,strict-match": 0.54,
        "gsm8k/exact_match,flexible-extract": 0.54 + 0.02,
        "arc_challenge/acc,none": 0.467 - 0.03,
        "arc_challenge/acc_norm,none": 0.467,
    }
    assert (run.id, run.created_at, run.commit, run.state) == ("9001", WHEN, "abc123", "finished")


def test_lm_eval_names_line_up_with_the_corpus_yaml_gates() -> None:
    # the metric names the lm-eval YAML gates of the corpus bind to (docs/threshold-files.md)
    corpus = Path(__file__).parent / "fixtures/gates/corpus/lm_eval_yaml/expected.json"
    wanted = {g["metric"] for g in json.loads(corpus.read_text())["gates"]}
    run = _run(read_artifact(_zip({"results.json": _lm_eval(0.5, 0.4)}), _spec(), RUN))
    assert wanted <= run.summary.keys()


def test_a_failed_workflow_run_is_still_read_as_a_failed_run() -> None:
    failed = RUN._replace(state="failed")
    run = _run(read_artifact(_zip({"results.json": _lm_eval(0.31, 0.4)}), _spec(), failed))
    assert run.state == "failed" and run.summary["gsm8k/exact_match,strict-match"] == 0.31


def test_several_results_files_the_newest_name_is_read() -> None:
    archive = _zip(
        {
            "out/model/results_2026-11-02T02-00-00.json": _lm_eval(0.11, 0.4),
            "out/model/results_2026-11-03T02-00-00.json": _lm_eval(0.22, 0.4),
            "out/model/samples_gsm8k_2026-11-03T02-00-00.jsonl": '{"doc_id": 0}\n',
        }
    )
    run = _run(read_artifact(archive, _spec(file="**/results_*.json"), RUN))
    assert run.summary["gsm8k/exact_match,strict-match"] == 0.22
    # without `file:`, the harness's results file is found among the samples too
    assert _run(read_artifact(archive, _spec(), RUN)).summary == run.summary


def test_no_member_matching_the_file_is_a_named_skip() -> None:
    archive = _zip({"results.json": _lm_eval(0.5, 0.4)})
    assert _skip(read_artifact(archive, _spec(file="**/metrics_*.json"), RUN)) == (
        "no file matching **/metrics_*.json"
    )


def test_malformed_json_is_a_named_skip_with_its_line() -> None:
    archive = _zip({"results.json": '{\n  "results": {\n    "gsm8k": ,\n'})
    assert _skip(read_artifact(archive, _spec(file="results.json"), RUN)).startswith(
        "malformed JSON in results.json line 3"
    )


# --------------------------------------------------------------------------- JSON, JSONL, CSV


def test_json_key_paths_flattened_and_summary_keys() -> None:
    data = {"eval": {"loss": 1.25, "acc": "0.75"}, "throughput": 310, "note": "ok"}
    archive = _zip({"bench/metrics.json": json.dumps(data)})
    spec = _spec(file="bench/metrics.json", format="json", summary_keys={"accuracy": "eval/acc"})
    run = _run(read_artifact(archive, spec, RUN))
    assert run.summary == {"eval/loss": 1.25, "eval/acc": 0.75, "throughput": 310, "accuracy": 0.75}


def test_jsonl_with_a_step_column_is_a_series_and_its_last_step_the_summary() -> None:
    lines = [{"step": s, "loss": 2.0 / (s + 1), "lr": 0.1} for s in (0, 10, 20)]
    text = "\n".join(json.dumps(line) for line in reversed(lines)) + "\n"
    run = _run(read_artifact(_zip({"log/train.jsonl": text}), _spec(file="**/*.jsonl"), RUN))
    assert run.series["loss"] == {0: 2.0, 10: 2.0 / 11, 20: 2.0 / 21}
    assert run.summary == {"loss": 2.0 / 21, "lr": 0.1}


def test_csv_with_a_step_column_and_without() -> None:
    steps = "step,loss,acc\n1,0.9,0.5\n2,0.7,\n3,0.5,0.8\n"
    run = _run(read_artifact(_zip({"curve.csv": steps}), _spec(file="curve.csv"), RUN))
    assert run.series == {"loss": {1: 0.9, 2: 0.7, 3: 0.5}, "acc": {1: 0.5, 3: 0.8}}
    assert run.summary == {"loss": 0.5, "acc": 0.8}
    table = "model,latency_ms,tokens_per_s\nsmall,12.5,900\n"
    flat = _run(read_artifact(_zip({"bench.csv": table}), _spec(file="bench.csv"), RUN))
    assert flat.summary == {"latency_ms": 12.5, "tokens_per_s": 900} and flat.series == {}


def test_pytest_benchmark_json() -> None:
    data = {
        "machine_info": {"node": "ci"},
        "commit_info": {"id": "abc"},
        "benchmarks": [
            {"name": "test_parse[big]", "stats": {"mean": 0.0125, "median": 0.012, "rounds": 80}},
            {"name": "test_render", "stats": {"mean": 0.5, "stddev": 0.01}},
        ],
    }
    run = _run(read_artifact(_zip({".benchmarks/0001_bench.json": json.dumps(data)}), _spec(), RUN))
    assert run.summary == {
        "test_parse[big]/mean": 0.0125,
        "test_parse[big]/median": 0.012,
        "test_parse[big]/rounds": 80,
        "test_render/mean": 0.5,
        "test_render/stddev": 0.01,
    }


def test_a_file_without_any_number_is_a_named_skip() -> None:
    archive = _zip({"out.json": json.dumps({"status": "done"})})
    assert _skip(read_artifact(archive, _spec(file="out.json"), RUN)) == "no numbers in out.json"


# --------------------------------------------------------------------------- archive safety


def test_not_a_zip_archive() -> None:
    assert _skip(read_artifact(b"PK\x03\x04 truncated", _spec(), RUN)).startswith(
        "not a zip archive"
    )


def test_a_member_path_with_dot_dot_refuses_the_archive() -> None:
    archive = _zip({"../x": "1", "results.json": _lm_eval(0.5, 0.4)})
    assert _skip(read_artifact(archive, _spec(), RUN)) == "unsafe member path ../x"


@pytest.mark.parametrize("name", ["/etc/x.json", "a\\b.json", "a/../../b.json", "C:/x.json"])
def test_absolute_backslash_and_drive_paths_are_refused(name: str) -> None:
    # zipfile's writer keeps these names as given (ZipInfo), as a hostile archive would
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("placeholder")
        info.filename = name
        archive.writestr(info, "{}")
    assert _skip(read_artifact(buffer.getvalue(), _spec(), RUN)) == f"unsafe member path {name}"


def test_a_zip_bomb_is_refused_by_its_ratio() -> None:
    # 20 MiB of zeros compress to about 20 kB: a ratio of about 1,000
    archive = _zip({"results.json": b"0" * (20 << 20)})
    assert len(archive) < 100_000
    reason = _skip(read_artifact(archive, _spec(file="results.json"), RUN))
    assert reason == f"compression ratio over {artifacts.MAX_RATIO}"


def test_a_member_larger_than_its_header_says_is_stopped_while_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the bound is checked on the bytes read, not on the header's file_size
    monkeypatch.setattr(artifacts, "MAX_MEMBER_BYTES", 1000)
    monkeypatch.setattr(artifacts, "MAX_RATIO", 10**9)
    archive = _zip({"metrics.json": b" " * 5000 + b"{}"}, method=zipfile.ZIP_STORED)
    reason = _skip(read_artifact(archive, _spec(file="metrics.json"), RUN))
    assert reason == "metrics.json over 1,000 bytes unpacked"


def test_too_many_members(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifacts, "MAX_MEMBERS", 5)
    archive = _zip({f"f{i}.json": "{}" for i in range(6)})
    assert _skip(read_artifact(archive, _spec(), RUN)) == "archive holds more than 5 members"


def test_an_archive_larger_than_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifacts, "MAX_ARCHIVE_BYTES", 100)
    archive = _zip({"results.json": _lm_eval(0.5, 0.4)}, method=zipfile.ZIP_STORED)
    assert _skip(read_artifact(archive, _spec(), RUN)) == "archive over 100 bytes"


def test_symlink_members_are_ignored() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        link = zipfile.ZipInfo("results_2099.json")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
        archive.writestr("results_2026.json", _lm_eval(0.5, 0.4))
    run = _run(read_artifact(buffer.getvalue(), _spec(), RUN))
    assert run.summary["gsm8k/exact_match,strict-match"] == 0.5


def test_several_files_and_no_file_named_is_a_named_skip() -> None:
    archive = _zip({"a.json": "{}", "b.csv": "x\n1\n"})
    assert _skip(read_artifact(archive, _spec(), RUN)) == (
        "several files in the artifact (a.json, b.csv): name one with `file:`"
    )


def test_lm_eval_groups_are_read_like_tasks() -> None:
    # lm-eval 0.4.0-0.4.2 wrote a group's aggregate under `groups`, beside `results`
    data = json.loads(_lm_eval(0.5, 0.4))
    data["groups"] = {"mmlu": {"alias": "mmlu", "acc,none": 0.61, "acc_stderr,none": 0.004}}
    run = _run(read_artifact(_zip({"results.json": json.dumps(data)}), _spec(), RUN))
    assert run.summary["mmlu/acc,none"] == 0.61 and "mmlu/acc_stderr,none" not in run.summary


def test_an_explicit_format_wins_over_recognition() -> None:
    archive = _zip({"results.json": _lm_eval(0.5, 0.4)})
    as_json = _run(read_artifact(archive, _spec(format="json"), RUN))
    assert as_json.summary["results/gsm8k/exact_match,strict-match"] == 0.5
    assert as_json.summary["results/gsm8k/exact_match_stderr,strict-match"] == 0.0137
    plain = _zip({"m.json": json.dumps({"acc": 0.5})})
    assert _skip(read_artifact(plain, _spec(format="lm-eval"), RUN)) == (
        "m.json: no lm-eval `results` object"
    )


def test_a_header_that_lies_about_the_size_is_caught_while_reading() -> None:
    archive = bytearray(_zip({"m.json": b'{"acc": 0.5}' + b" " * 100}, method=zipfile.ZIP_STORED))
    central = archive.index(b"PK\x01\x02")  # the central directory entry
    archive[central + 24 : central + 28] = (10).to_bytes(4, "little")  # its uncompressed size
    reason = _skip(read_artifact(bytes(archive), _spec(file="m.json"), RUN))
    assert reason.startswith("unreadable member m.json: Bad CRC-32")


def test_the_headers_declared_total_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifacts, "MAX_UNPACKED_BYTES", 3 << 20)
    archive = _zip({f"f{i}.json": b" " * (1 << 20) for i in range(4)})
    assert _skip(read_artifact(archive, _spec(), RUN)) == "archive over 3 MiB unpacked"


def test_the_summary_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifact_formats, "MAX_SUMMARY_METRICS", 3)
    archive = _zip({"m.json": json.dumps({"a": 1, "b": {"c": 2, "d": 3, "e": 4}})})
    assert _skip(read_artifact(archive, _spec(), RUN)) == "m.json holds more than 3 numbers"


def test_summary_keys_rename_series_too() -> None:
    archive = _zip({"curve.csv": "step,loss\n1,0.9\n2,0.5\n"})
    spec = _spec(file="curve.csv", summary_keys={"val_loss": "loss"})
    run = _run(read_artifact(archive, spec, RUN))
    assert run.series["val_loss"] == {1: 0.9, 2: 0.5} and run.summary["val_loss"] == 0.5


def test_malformed_rows_are_named_with_their_line() -> None:
    bad_csv = _zip({"m.csv": "step,loss\n1,0.9\n2,0.5,7\n"})
    assert _skip(read_artifact(bad_csv, _spec(), RUN)) == (
        "malformed CSV in m.csv line 3: 3 fields, the header has 2"
    )
    bad_jsonl = _zip({"m.jsonl": '{"step": 1, "loss": 1}\n\n{"step": 2, "loss": }\n'})
    assert _skip(read_artifact(bad_jsonl, _spec(), RUN)).startswith(
        "malformed JSON in m.jsonl line 3: "
    )
    bad_step = _zip({"m.jsonl": '{"step": 1, "loss": 1}\n{"step": -2, "loss": 1}\n'})
    assert _skip(read_artifact(bad_step, _spec(), RUN)) == (
        "m.jsonl line 2: step '-2' is not a whole number"
    )


def test_the_values_of_a_table_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifact_formats, "MAX_TABLE_VALUES", 10)
    archive = _zip({"m.csv": "model,a,b,c\n" + "x,1,2,3\n" * 4})
    assert _skip(read_artifact(archive, _spec(), RUN)) == "m.csv holds more than 10 values"


def test_member_names_in_reasons_are_printable_and_short() -> None:
    name = "../" + "\n<b>x</b>\x1b[31m" + "y" * 300
    archive = _zip({name: "{}"})
    reason = _skip(read_artifact(archive, _spec(), RUN))
    assert reason.startswith("unsafe member path ../?<b>x</b>?[31myyy") and reason.endswith("...")
    assert len(reason) == len("unsafe member path ") + 100 and reason.isprintable()
