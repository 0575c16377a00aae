"""``threshold-bot export``: the real wandb client against the fake W&B GraphQL server, the
real MLflow client against a local stand-in of its REST API, and the written history read
back with ``parse_history`` (the reader of ``review --history``)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app
from bot.core.history.export import history_text, merge, run_line
from bot.core.history.formats import parse_history
from bot.core.models import Run
from tests.fakes.mlflow_listener import Failure, MlflowListener, listen, mlflow_run
from tests.fakes.wandb_server import API_KEY, NIGHTLY_START, FakeRun, FakeWandb, nightly_run, serve

pytestmark = pytest.mark.servers

ROOT = Path(__file__).resolve().parent.parent
ENTITY, PROJECT = "acme", "gsm8k_ci"
RUNS = 25
SCRIPT = """#!/bin/bash
export ACC_MIN=0.40
python check.py --project_name gsm8k_ci --asserts "eval/acc >= $ACC_MIN"
"""


@pytest.fixture()
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWandb]:
    """A fake W&B with ``RUNS`` hourly runs of every state, and the CLI's settings for it."""
    server = FakeWandb()
    for i in range(RUNS):
        server.add_run(ENTITY, PROJECT, nightly_run(i))
    with serve(server) as url:
        monkeypatch.setenv("WANDB_API_KEY", API_KEY)
        monkeypatch.setenv("WANDB_BASE_URL", url)
        monkeypatch.delenv("WANDB_ENTITY", raising=False)
        monkeypatch.chdir(tmp_path)
        yield server


def export(*args: str) -> Result:
    return CliRunner().invoke(app, ["export", *args])


def stored(fake: FakeWandb) -> list[FakeRun]:
    return sorted(fake.projects[(ENTITY, PROJECT)].values(), key=lambda r: r.created_at)


def expected(run: FakeRun, **summary_keys: str) -> Run:
    """The run a history line must hold for a fake W&B run (``nightly_run``'s summary:
    ``eval`` nested, ``_step`` a W&B internal left out)."""
    summary = {"eval/acc": run.summary["eval"]["acc"], "tokens": float(run.summary["tokens"])}
    summary |= {metric: summary[key] for metric, key in summary_keys.items()}
    return Run(
        id=run.name,
        name=run.display_name,
        created_at=run.created_at,
        state=run.state,  # type: ignore[arg-type]  # nightly states are ours as they are
        commit=run.commit,
        tags=tuple(run.tags),
        summary=summary,
    )


def one_error_line(result: Result, status: int, *words: str) -> None:
    """The command failed with ``status`` and said why on one line; stdout stayed empty."""
    assert result.exit_code == status, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("threshold-bot: error: "), result.stderr
    assert all(w in lines[0] for w in words), lines[0]


# --------------------------------------------------------------------------- W&B


def test_export_writes_every_run_in_the_history_format(fake: FakeWandb) -> None:
    result = export("--wandb", f"{ENTITY}/{PROJECT}")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(isinstance(json.loads(line), dict) for line in lines)  # stdout: JSONL only
    history = parse_history(result.stdout, "runs.jsonl")
    runs = stored(fake)
    assert list(history.runs) == [expected(r) for r in runs]
    assert history.stats.duplicate_ids == 0 and history.stats.skipped_lines == 0
    finished = sum(r.state == "finished" for r in runs)
    assert finished < RUNS  # every state is exported, not only finished runs
    assert result.stderr == f"exported {RUNS} runs ({finished} finished) from wandb:acme/gsm8k_ci\n"


def test_since_and_the_configs_filters_and_summary_keys(fake: FakeWandb, tmp_path: Path) -> None:
    config = tmp_path / "threshold-bot.yml"
    config.write_text(
        "sources:\n  ci:\n    kind: wandb\n    project: other\n    tags: [nightly]\n"
        "    summary_keys: {accuracy: eval/acc}\n"
        "default_source: ci\n"
    )
    since = datetime.combine(NIGHTLY_START.date() + timedelta(days=1), time(), UTC)
    output = tmp_path / "runs.jsonl"
    result = export(
        "--wandb", f"{ENTITY}/{PROJECT}", "--config", str(config),
        "--since", since.date().isoformat(), "--output", str(output),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    history = parse_history(output.read_text(), output.name)
    wanted = [r for r in stored(fake) if "nightly" in r.tags and r.created_at >= since]
    assert 0 < len(wanted) < RUNS
    assert list(history.runs) == [expected(r, accuracy="eval/acc") for r in wanted]
    finished = sum(r.state == "finished" for r in wanted)
    assert f"exported {len(wanted)} runs ({finished} finished)" in result.stderr


def test_the_exported_history_gives_the_review_of_wandb_itself(
    fake: FakeWandb, tmp_path: Path
) -> None:
    """The README's path: export, then review --history; the same gates as review --wandb."""
    script = tmp_path / "nightly.sh"
    script.write_text(SCRIPT)
    assert export("--wandb", f"{ENTITY}/{PROJECT}", "--output", "runs.jsonl").exit_code == 0
    runner = CliRunner()
    common = ["review", "--file", str(script), "--format", "json"]
    from_file = runner.invoke(app, [*common, "--history", "runs.jsonl"])
    direct = runner.invoke(app, [*common, "--wandb", f"{ENTITY}/{PROJECT}"])
    assert from_file.exit_code == direct.exit_code == 0, from_file.output + direct.output
    gates = [json.loads(r.stdout)["gates"] for r in (from_file, direct)]
    for gate in gates:
        for item in gate:
            item.pop("source", None)
    assert gates[0] == gates[1] and gates[0][0]["verdict"] != "no_data"


def test_series_are_exported_and_read_back(fake: FakeWandb) -> None:
    runs = stored(fake)
    for run in runs:
        run.history = [
            {"_step": s, "lm loss": 10 - s / 10 - run.created_at.hour / 100} for s in (1, 11, 21)
        ]
    result = export("--wandb", f"{ENTITY}/{PROJECT}", "--series", "lm loss")
    assert result.exit_code == 0, result.output
    history = parse_history(result.stdout, "runs.jsonl")
    by_id = {r.id: r for r in history.runs}
    for run in runs:
        series = {row["_step"]: row["lm loss"] for row in run.history}
        assert by_id[run.name].series == ({"lm loss": series} if run.state == "finished" else {})


def test_append_adds_new_runs_updates_ended_ones_and_never_duplicates(
    fake: FakeWandb, tmp_path: Path
) -> None:
    runs = stored(fake)
    late = runs[20:]
    for run in late:
        fake.delete_run(ENTITY, PROJECT, run.name)
    file = tmp_path / "runs.jsonl"
    first = export("--wandb", f"{ENTITY}/{PROJECT}", "--append", str(file))  # a new file
    assert first.exit_code == 0, first.output
    assert "appended 20 new runs, updated 0" in first.stderr and first.stdout == ""
    before = file.read_text().splitlines()
    running = next(r for r in runs[:20] if r.state == "running")
    fake.update_run(ENTITY, PROJECT, running.name, state="finished")
    for run in late:
        fake.add_run(ENTITY, PROJECT, run)

    result = export("--wandb", f"{ENTITY}/{PROJECT}", "--append", str(file))
    assert result.exit_code == 0, result.output
    now = stored(fake)
    finished = sum(r.state == "finished" for r in now)
    assert result.stderr == (
        f"appended {len(late)} new runs, updated 1, from wandb:acme/gsm8k_ci: "
        f"{file} has {RUNS} runs ({finished} finished)\n"
    )
    text = file.read_text()
    history = parse_history(text, file.name)
    assert list(history.runs) == [expected(r) for r in now]
    assert history.stats.duplicate_ids == 0
    lines = text.splitlines()
    changed = [i for i, (a, b) in enumerate(zip(before, lines, strict=False)) if a != b]
    assert changed == [runs.index(running)]  # replaced in place, the others kept as written

    again = export("--wandb", f"{ENTITY}/{PROJECT}", "--append", str(file))
    assert "appended 0 new runs, updated 0" in again.stderr
    assert file.read_text() == text


def test_append_keeps_a_hand_written_file_and_its_series(fake: FakeWandb, tmp_path: Path) -> None:
    """Lines the export did not write stay as they are; the newest run is read again (W&B
    compares created_at >= the newest) and not duplicated; a file's series are kept."""
    runs = stored(fake)
    newest = expected(runs[-1]).model_copy(update={"series": {"tokens": {1: 2.0}}})
    hand = '{"id": 7, "created_at": "2026-06-01", "summary": {"x": "1"}, "extra": true}\n'
    file = tmp_path / "runs.jsonl"
    file.write_text(hand + run_line(newest) + "\n")
    result = export("--wandb", f"{ENTITY}/{PROJECT}", "--append", str(file))
    assert result.exit_code == 0, result.output
    assert "appended 0 new runs, updated 0" in result.stderr
    assert file.read_text() == hand + run_line(newest) + "\n"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--wandb", f"{ENTITY}/missing"], ["acme/missing", "not found"]),
        (["--wandb", "not-a-path/"], ["ENTITY/PROJECT"]),
        ([], ["exactly one of --wandb"]),
        (["--wandb", f"{ENTITY}/{PROJECT}", "--mlflow", "x"], ["exactly one of --wandb"]),
        (["--wandb", f"{ENTITY}/{PROJECT}", "--since", "last week"], ["--since", "YYYY-MM-DD"]),
        (["--wandb", f"{ENTITY}/{PROJECT}", "--append", "runs.csv"], [".jsonl"]),
        (["--wandb", f"{ENTITY}/{PROJECT}", "--append", "a.jsonl", "--output", "b"], ["not both"]),
        (["--wandb", f"{ENTITY}/{PROJECT}", "--config", "nope.yml"], ["nope.yml", "no such file"]),
        (["--mlflow", "gsm8k", "--series", "loss"], ["--series"]),
    ],
)
def test_usage_problems_exit_2_on_one_line(
    fake: FakeWandb, args: list[str], words: list[str]
) -> None:
    one_error_line(export(*args), 2, *words)


def test_a_bad_history_file_to_append_to_exits_2(fake: FakeWandb, tmp_path: Path) -> None:
    (tmp_path / "runs.jsonl").write_text('{"id": "a", "created_at": "2026-07-01"}\n')
    one_error_line(export("--wandb", f"{ENTITY}/{PROJECT}", "--append", "runs.jsonl"), 2, ":1:")


def test_credentials_missing_or_rejected_exit_2(
    fake: FakeWandb, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WANDB_API_KEY")
    one_error_line(export("--wandb", f"{ENTITY}/{PROJECT}"), 2, "WANDB_API_KEY")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    one_error_line(export("--wandb", f"{ENTITY}/{PROJECT}"), 2, "API key")


def test_an_outage_exits_1_on_one_line(fake: FakeWandb) -> None:
    fake.fail(status=503, count=1000, operation="Runs")  # after the key was checked
    one_error_line(export("--wandb", f"{ENTITY}/{PROJECT}"), 1, "HTTP 503", "acme/gsm8k_ci")


# --------------------------------------------------------------------------- MLflow


@pytest.fixture()
def mlflow(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[MlflowListener, str]]:
    """A stand-in MLflow server holding three finished runs."""
    start = int(datetime(2026, 7, 1, 8, tzinfo=UTC).timestamp() * 1000)
    runs = [
        mlflow_run(f"r{i}", start + i * 3_600_000, {"eval/acc": 0.5 + i / 10}) for i in range(3)
    ]
    listener = MlflowListener(runs=runs)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    with listen(listener) as url:
        yield listener, url


def test_export_from_mlflow(
    mlflow: tuple[MlflowListener, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    listener, url = mlflow
    for args in (["--tracking-uri", url], []):
        if not args:
            monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        result = export("--mlflow", "gsm8k", *args)
        assert result.exit_code == 0, result.output
        history = parse_history(result.stdout, "runs.jsonl")
        assert [r.model_dump() for r in history.runs] == [_mlflow_run(raw) for raw in listener.runs]
        assert result.stderr == "exported 3 runs (3 finished) from mlflow:gsm8k\n"


def _mlflow_run(raw: dict[str, Any]) -> dict[str, Any]:
    info, data = raw["info"], raw["data"]
    return Run(
        id=info["run_id"],
        name=info["run_name"],
        created_at=datetime.fromtimestamp(info["start_time"] / 1000, tz=UTC),
        state="finished",
        commit=data["tags"][0]["value"],
        summary={m["key"]: m["value"] for m in data["metrics"]},
    ).model_dump()


def test_mlflow_errors(mlflow: tuple[MlflowListener, str]) -> None:
    listener, url = mlflow
    one_error_line(export("--mlflow", "gsm8k"), 2, "--tracking-uri", "MLFLOW_TRACKING_URI")
    listener.failure = Failure(503, "internal-host secret")
    result = export("--mlflow", "gsm8k", "--tracking-uri", url)
    one_error_line(result, 1, "MLflow history unavailable", "503")
    assert "secret" not in result.stderr
    listener.failure = Failure(403, '{"error_code": "PERMISSION_DENIED", "message": "no"}')
    one_error_line(export("--mlflow", "gsm8k", "--tracking-uri", url), 2, "access denied")


# --------------------------------------------------------------------------- the format


def test_lines_read_back_as_the_same_runs_with_series() -> None:
    runs = [
        Run(
            id="a\u2028b",  # a line separator inside a string stays inside the line
            name=None,
            created_at=datetime(2026, 7, 1, 8, 0, 0, 123456, tzinfo=UTC),
            state="crashed",
            commit=None,
            tags=("nightly", "ünï"),
            summary={"eval/acc": 0.1 + 0.2, "big": 1e300},
            series={"lm loss": {1: 10.5, 11: 9.25}, "t": {0: -1.0}},
        ),
        Run(id="2", created_at=datetime(2026, 7, 2, tzinfo=UTC), summary={}),
    ]
    text = history_text(runs)
    assert text.isascii() and text.count("\n") == 2
    assert list(parse_history(text, "h.ndjson").runs) == runs
    assert '"series"' not in text.splitlines()[1]


def test_merge_replaces_the_copy_a_reader_keeps() -> None:
    at = datetime(2026, 7, 1, tzinfo=UTC)
    old = Run(id="a", created_at=at, state="running", summary={"x": 1.0})
    text = run_line(old) + "\n" + run_line(old.model_copy(update={"summary": {"x": 2.0}})) + "\n"
    existing = parse_history(text, "h.jsonl")
    new = old.model_copy(update={"state": "finished", "summary": {"x": 3.0}})
    merged = merge(text, existing, [new])
    assert (merged.added, merged.updated) == (0, 1)
    assert merged.text.splitlines() == [run_line(old), run_line(new)]
    assert parse_history(merged.text, "h.jsonl").runs == (new,)


# --------------------------------------------------------------------------- the process


def _run(args: list[str], cwd: Path, stderr_tty: bool) -> tuple[int, str, str]:
    """``threshold-bot ARGS`` as a process: its status, stdout (a pipe) and stderr (a pipe,
    or a terminal)."""
    command = [sys.executable, "-c", "from bot.cli.main import app; app()", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", "TERM": "xterm"}
    if not stderr_tty:
        done = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120
        )
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()
    chunks: list[bytes] = []

    def read_terminal() -> None:  # while the child runs: a full terminal would block it
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read_terminal, name="pty-reader", daemon=True)
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=follower, text=True
    ) as process:
        os.close(follower)
        reader.start()
        try:
            out = process.communicate(timeout=120)[0]
        finally:
            reader.join(timeout=120)
            os.close(leader)
        return process.returncode, out, b"".join(chunks).decode()


def test_stdout_holds_only_json_lines_and_the_bar_shows_on_a_terminal_only(
    fake: FakeWandb, tmp_path: Path
) -> None:
    finished = sum(r.state == "finished" for r in stored(fake))
    count = f"exported {RUNS} runs ({finished} finished) from wandb:acme/gsm8k_ci"
    args = ["export", "--wandb", f"{ENTITY}/{PROJECT}"]
    status, out, err = _run(args, tmp_path, stderr_tty=False)
    assert status == 0, err
    assert list(parse_history(out, "runs.jsonl").runs) == [expected(r) for r in stored(fake)]
    assert err == count + "\n"  # no bar when stderr is not a terminal
    status, out, err = _run(args, tmp_path, stderr_tty=True)
    assert status == 0, err
    assert len(out.splitlines()) == RUNS
    assert f"{RUNS}/{RUNS}" in err and "wandb:acme/gsm8k_ci: runs" in err  # the bar
    assert err.rstrip().endswith(count)
