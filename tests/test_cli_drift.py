"""``threshold-bot drift`` through the real command over generated histories: the numbers it
prints (failures, streak, dates, the rule's new value) computed here from the data; the
``threshold-bot rebaseline`` command it prints writes that value; exit statuses."""

from __future__ import annotations

import json
import re
import shlex
from datetime import UTC, datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app
from bot.core.formatting import day_month_year
from tests.terminal import CLI, at_a_terminal

pytestmark = pytest.mark.servers

METRIC = "eval/acc"
T0 = datetime(2026, 6, 1, 2, tzinfo=UTC)
BEFORE, AFTER = 40, 8  # runs before the step down and since
LOOKBACK = 30  # the rule's default failure lookback


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(app, ["drift", *(str(a) for a in args)])


def values_with_step(seed: int = 1) -> list[float]:
    rng = np.random.default_rng(seed)
    before = [0.80 + rng.normal(0, 0.005) for _ in range(BEFORE)]
    return [round(v, 4) for v in before + [0.70 + rng.normal(0, 0.005) for _ in range(AFTER)]]


def write_history(path: Path, values: list[float]) -> list[dict[str, Any]]:
    records = [
        {
            "id": f"r{i:03d}",
            "created_at": (T0 + timedelta(days=i)).isoformat().replace("+00:00", "Z"),
            "state": "finished",
            "summary": {METRIC: v},
        }
        for i, v in enumerate(values)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def write_script(path: Path, gates: dict[str, str]) -> Path:
    """A shell script checking ``METRIC >= $NAME`` for each ``NAME=literal``."""
    lines = [f"{name}={literal}" for name, literal in gates.items()]
    checks = " ".join(f'"{METRIC} >= ${name}"' for name in gates)
    path.write_text("#!/bin/bash\n" + "\n".join(lines) + f"\ncheck {checks}\n")
    return path


def lower_rule(window: list[float], literal: str, allowance: float = 0.05) -> str:
    """The rule for a lower bound: the window's minimum less the allowance of its magnitude,
    rounded down at the literal's decimals (two here: enough significant digits)."""
    edge = Decimal(repr(min(window)))
    places = -Decimal(literal).as_tuple().exponent
    assert isinstance(places, int)
    value = (edge - Decimal(repr(allowance)) * abs(edge)).quantize(
        Decimal(1).scaleb(-places), rounding=ROUND_FLOOR
    )
    return str(value)


def streak(fails: list[bool]) -> int:
    n = 0
    for failed in reversed(fails):
        if not failed:
            break
        n += 1
    return n


@pytest.fixture
def stepped(tmp_path: Path) -> tuple[Path, Path, list[float]]:
    values = values_with_step()
    history = tmp_path / "runs.jsonl"
    write_history(history, values)
    script = write_script(tmp_path / "nightly.sh", {"ACC_MIN": "0.75", "LOW_MIN": "0.60"})
    return history, script, values


def test_markdown_names_the_drift_and_exits_1(
    stepped: tuple[Path, Path, list[float]], tmp_path: Path
) -> None:
    history, script, values = stepped
    result = run("--history", history, "--file", script)
    assert result.exit_code == 1, result.output
    fails = [v < 0.75 for v in values]
    n = streak(fails)
    since = T0 + timedelta(days=len(values) - n)
    assert n == AFTER and sum(fails) == AFTER  # the data's premise
    body = result.stdout
    assert body.startswith("<!-- threshold-bot:drift file=")
    assert f"Failed its last {n} runs in a row, since {day_month_year(since)}." in body
    assert f"Tied to the regime change of {day_month_year(since)}" in body
    new = lower_rule(values[-AFTER:], "0.75")  # the drift window: the current regime
    assert f"The rule's new value: **{new}**" in body
    assert "Passing (1): <code>LOW\\_MIN</code>." in body
    assert "/rebaseline`" not in body and "<sub>" not in body  # the App's words
    (command,) = re.findall(r"^  ```sh\n  (.*)\n  ```$", body, re.MULTILINE)  # to copy
    args = shlex.split(command)
    assert args[:2] == ["threshold-bot", "rebaseline"] and "--window" in args
    rebaselined = CliRunner().invoke(app, [*args[1:], "--dry-run"])
    assert rebaselined.exit_code == 0, rebaselined.output
    assert "-ACC_MIN=0.75" in rebaselined.stdout and f"+ACC_MIN={new}" in rebaselined.stdout


def test_json_report_fields(stepped: tuple[Path, Path, list[float]]) -> None:
    history, script, values = stepped
    result = run("--history", history, "--file", script, "--format", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["drifting"] == 1
    (report,) = data["files"]
    assert report["file"] == script.as_posix()
    assert report["settings"]["window"] == "regime" and report["problems"] == []
    acc, low = report["gates"]
    since = (T0 + timedelta(days=BEFORE)).isoformat()
    recent = values[-LOOKBACK:]
    assert {k: acc[k] for k in ("name", "op", "value", "status", "failed", "total")} == {
        "name": "ACC_MIN",
        "op": ">=",
        "value": "0.75",
        "status": "drifting",
        "failed": sum(v < 0.75 for v in recent),
        "total": len(recent),
    }
    assert (acc["streak"], acc["since"], acc["change"]) == (
        AFTER,
        since,
        {"at": since, "pulls": []},
    )
    assert acc["new_value"] == lower_rule(values[-AFTER:], "0.75")
    assert (low["status"], low["failed"], low["streak"], low["since"]) == ("passing", 0, 0, None)


def test_a_flaky_gate_alone_exits_0(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    values = [round(0.80 + rng.normal(0, 0.005), 4) for _ in range(60)]
    for position in (-25, -14, -4):
        values[position] = 0.70
    write_history(tmp_path / "runs.jsonl", values)
    script = write_script(tmp_path / "nightly.sh", {"ACC_MIN": "0.75"})
    result = run("--history", tmp_path / "runs.jsonl", "--file", script, "--format", "json")
    assert result.exit_code == 0, result.output
    (gate,) = json.loads(result.stdout)["files"][0]["gates"]
    failed = sum(v < 0.75 for v in values[-LOOKBACK:])
    assert (gate["status"], gate["failed"], gate["total"]) == ("flaky", failed, LOOKBACK)
    assert gate["failure_rate"] == round(failed / LOOKBACK, 4)
    markdown = run("--history", tmp_path / "runs.jsonl", "--file", script)
    assert markdown.exit_code == 0 and "#### Flaky, not rebaselined" in markdown.stdout


def test_a_file_with_only_hints_says_there_is_nothing_to_watch(tmp_path: Path) -> None:
    write_history(tmp_path / "runs.jsonl", values_with_step())
    script = tmp_path / "nightly.sh"
    # assigned twice: the number reaches the comparison but no gate can be bound
    script.write_text(
        '#!/bin/bash\nACC_MIN=0.75\n[ -n "$FAST" ] && ACC_MIN=0.7\n'
        'python check.py --asserts "eval/acc >= $ACC_MIN"\n'
    )
    result = run("--history", tmp_path / "runs.jsonl", "--file", script, "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["files"][0]["gates"] == []
    assert "no gate bound, nothing to watch" in result.stderr
    assert "ACC_MIN = 0.75: assigned 2 times" in result.stderr


def test_the_configs_drift_settings_apply_and_their_problems_show(
    stepped: tuple[Path, Path, list[float]], tmp_path: Path
) -> None:
    history, script, _ = stepped
    config = tmp_path / "threshold-bot.yml"
    config.write_text(f"drift:\n  min_failures: {AFTER + 1}\n  mode: sometimes\n")
    result = run("--history", history, "--file", script, "--config", config)
    assert result.exit_code == 0, result.output  # 8 in a row: fewer than 9
    assert (
        f"- <code>ACC\\_MIN</code>: failed its last {AFTER} runs in a row, fewer than {AFTER + 1}"
        " (min\\_failures)" in result.stdout
    )
    assert "- drift.mode: expected one of 'issue', 'pull\\_request' or 'off'" in result.stdout
    config.write_text("drift:\n  window: 20\n")
    as_json = run("--history", history, "--file", script, "--config", config, "--format", "json")
    assert as_json.exit_code == 1
    acc = json.loads(as_json.stdout)["files"][0]["gates"][0]
    values = values_with_step()
    assert acc["new_value"] == lower_rule(values[-20:], "0.75")  # the last 20 runs


def test_a_csv_history_reads_the_same(
    stepped: tuple[Path, Path, list[float]], tmp_path: Path
) -> None:
    history, script, _ = stepped
    records = [json.loads(line) for line in history.read_text().splitlines()]
    csv = tmp_path / "runs.csv"
    rows = [f"{r['id']},{r['created_at']},finished,{r['summary'][METRIC]}" for r in records]
    csv.write_text(f"id,created_at,state,{METRIC}\n" + "\n".join(rows) + "\n")
    from_json = run("--history", history, "--file", script, "--format", "json")
    from_csv = run("--history", csv, "--file", script, "--format", "json")
    assert from_csv.exit_code == from_json.exit_code == 1
    assert json.loads(from_csv.stdout) == json.loads(from_json.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--file", "{script}"], "no history source; give --history FILE or --wandb"),
        (["--history", "{history}"], "Missing option '--file'"),
        (["--history", "{dir}/none.jsonl", "--file", "{script}"], "none.jsonl"),
        (["--history", "{history}", "--file", "{dir}/none.sh"], "no such file"),
        (["--history", "{history}", "--file", "{script}", "--format", "yaml"], "--format"),
        (["--history", "{history}", "--file", "{script}", "--config", "{dir}/bad.yml"], "rule"),
    ],
)
def test_usage_errors_exit_2(
    args: list[str], message: str, stepped: tuple[Path, Path, list[float]], tmp_path: Path
) -> None:
    history, script, _ = stepped
    (tmp_path / "bad.yml").write_text("rule: {allowance: lots}\n")
    filled = [a.format(script=script, history=history, dir=tmp_path) for a in args]
    result = run(*filled)
    assert result.exit_code == 2
    assert result.stderr.startswith("threshold-bot: error: ") and message in result.stderr
    assert result.stdout == ""


# --------------------------------------------------------------------------- no data


def test_an_empty_history_has_no_data_to_judge_and_fail_on_neutral_fails_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # short names: the Markdown escapes a path's underscores
    Path("runs.jsonl").write_text("")
    write_script(Path("nightly.sh"), {"ACC_MIN": "0.75", "LOW_MIN": "0.60"})
    result = run("--history", "runs.jsonl", "--file", "nightly.sh")
    assert result.exit_code == 0, result.output  # nothing drifts
    headline = result.stdout.splitlines()[1]
    assert headline == "⚪ **No data to judge <code>nightly.sh</code>**: the history is empty."
    assert "✅" not in result.stdout
    neutral = run("--history", "runs.jsonl", "--file", "nightly.sh", "--fail-on", "neutral")
    assert neutral.exit_code == 1
    as_json = run("--history", "runs.jsonl", "--file", "nightly.sh", "--format", "json")
    data = json.loads(as_json.stdout)
    assert (data["conclusion"], data["drifting"], data["no_data"]) == ("neutral", 0, 2)
    gates = data["files"][0]["gates"]
    assert [(g["status"], g["no_data_reason"], g["reason"]) for g in gates] == [
        ("no_data", "empty_history", "the history is empty")
    ] * 2


def test_a_gate_without_its_metric_leaves_no_gate_green(
    stepped: tuple[Path, Path, list[float]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history, _, values = stepped
    monkeypatch.chdir(tmp_path)
    Path("other.sh").write_text(
        "#!/bin/bash\nLOW_MIN=0.60\nGONE_MIN=0.1\n"
        f'check "{METRIC} >= $LOW_MIN" "eval/gone >= $GONE_MIN"\n'
    )
    assert min(values) >= 0.60  # LOW_MIN passes every run
    result = run("--history", history, "--file", "other.sh")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1] == (
        "⚪ **No gate of <code>other.sh</code> drifts**; 1 of 2 gates has no data to judge."
    )
    assert "No data (1): no finished run has the metric of <code>GONE\\_MIN</code>" in result.stdout
    assert run("--history", history, "--file", "other.sh", "--fail-on", "neutral").exit_code == 1
    as_json = run("--history", history, "--file", "other.sh", "--format", "json")
    assert json.loads(as_json.stdout)["conclusion"] == "neutral"


# --------------------------------------------------------------------------- formats


def test_on_a_terminal_drift_prints_the_table_and_markdown_to_a_file(
    stepped: tuple[Path, Path, list[float]], tmp_path: Path
) -> None:
    history, script, values = stepped
    assert history.parent == script.parent == tmp_path
    args = [*CLI, "drift", "--history", history.name, "--file", script.name]
    status, shown = at_a_terminal(args, cwd=tmp_path, columns=80)
    assert status == 1, shown  # ACC_MIN drifts
    lines = shown.splitlines()
    assert (
        lines[0].rstrip()
        == "❌ 1 of 2 gates in nightly.sh keeps failing the newest runs on the default"
    )
    assert "<code>" not in shown and "threshold-bot:drift" not in shown and "**" not in shown
    assert max(len(line.rstrip()) for line in lines) <= 80
    words = " ".join(shown.split())
    assert f"The rule's new value: {lower_rule(values[-AFTER:], '0.75')}," in words
    assert "Regimes" in lines and "What to do" in lines
    assert "Passing (1): LOW_MIN." in words
    status, shown = at_a_terminal([*args, "--output", "drift.md"], cwd=tmp_path)
    assert status == 1 and shown == ""
    body = (tmp_path / "drift.md").read_text()
    assert body.startswith("<!-- threshold-bot:drift file=") and "<code>ACC\\_MIN</code>" in body
    status, shown = at_a_terminal([*args, "--format", "markdown"], cwd=tmp_path)
    assert shown.startswith("<!-- threshold-bot:drift file=")
    piped = run("--history", history, "--file", script, "--format", "table")
    assert piped.stdout.startswith("❌ 1 of 2 gates in") and "<code>" not in piped.stdout
