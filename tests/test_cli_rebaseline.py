"""``threshold-bot rebaseline`` through the real command: the file on disk after it, every
new value recomputed here from the generated history (never copied from the output)."""

from __future__ import annotations

import difflib
import json
import math
import statistics
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from bot.cli.main import app
from demo.data import GATED_METRICS, ExamplePaths, write_example
from tests.fakes.wandb_server import API_KEY, FakeWandb, nightly_run, serve

pytestmark = pytest.mark.servers

USER = "alice"
PROVENANCE = "# threshold-bot: rebaselined"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> ExamplePaths:
    return write_example(tmp_path_factory.mktemp("example"))


@pytest.fixture(autouse=True)
def user(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, USER)


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(app, ["rebaseline", *(str(a) for a in args)])


def _finished(history: Path) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in history.read_text().splitlines()]
    return sorted((r for r in records if r["state"] == "finished"), key=lambda r: r["created_at"])


def _window(history: Path, metric: str, runs: int = 20) -> list[float]:
    values = [r["summary"].get(metric) for r in _finished(history)]
    usable = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
    return usable[-runs:]


def _rule(window: list[float], op: str, literal: str, allowance: float = 0.05) -> str:
    """The limit rule, as docs/pr-comment.md states it: the window's min less (max plus) the
    allowance of its magnitude, rounded outwards at the literal's decimals, or more to keep
    two significant digits; written at those decimals."""
    lower = op in (">=", ">")
    edge = Decimal(repr(min(window) if lower else max(window)))
    unrounded = edge - Decimal(repr(allowance)) * abs(edge) * (1 if lower else -1)
    written = max(0, -int(Decimal(literal).as_tuple().exponent))
    places = max(written, 2 - 1 - unrounded.adjusted())
    rounded = unrounded.quantize(
        Decimal(1).scaleb(-places), rounding=ROUND_FLOOR if lower else ROUND_CEILING
    )
    return f"{rounded:.{places}f}"


def _literal(text: str, name: str) -> tuple[int, str]:
    """The 0-based line and the literal of ``NAME=literal`` in a shell script."""
    for i, line in enumerate(text.splitlines()):
        left, _, value = line.removeprefix("export ").partition("=")
        if left == name:
            return i, value
    raise AssertionError(f"{name} not in the script")


def _expected(example: ExamplePaths, text: str, names: list[str]) -> tuple[list[str], str]:
    """The script's lines with the rule's value for each of ``names``, and the first line
    of the provenance block the command writes above the first gate it changes."""
    lines = text.splitlines()
    for name in names:
        metric, op = GATED_METRICS[name]
        i, literal = _literal(text, name)
        new = _rule(_window(example.history, metric), op, literal)
        lines[i] = lines[i].replace(f"{name}={literal}", f"{name}={new}")
    today = datetime.now(UTC).date().isoformat()
    return lines, f"{PROVENANCE} {today} by {USER} with threshold-bot rebaseline"


def _without_block(text: str) -> tuple[list[str], list[str]]:
    """The file's lines apart from the provenance block, and the block."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(PROVENANCE))
    end = start + 1
    while end < len(lines) and lines[end].lstrip().startswith("#  "):
        end += 1
    return lines[:start] + lines[end:], [line.lstrip() for line in lines[start:end]]


def _copy(example: ExamplePaths, tmp_path: Path) -> tuple[Path, str]:
    script = tmp_path / "gsm8k_nightly.sh"
    text = example.head.read_text()
    script.write_text(text)
    return script, text


def test_writes_every_value_the_rule_gives(example: ExamplePaths, tmp_path: Path) -> None:
    script, text = _copy(example, tmp_path)
    result = run("--file", script, "--history", example.history)
    assert result.exit_code == 0, result.output
    lines, first = _expected(example, text, list(GATED_METRICS))
    written = script.read_text()
    rest, block = _without_block(written)
    assert rest == lines
    assert block[0] == first
    window = [r for r in _finished(example.history) if "timing/step_s" in r["summary"]][-20:]
    span = f"({window[0]['created_at'][:10]} .. {window[-1]['created_at'][:10]})"
    assert (
        block[1]
        == f"#   rule: 5% allowance from the min/max of the last 20 finished runs, 20 runs {span}"
    )
    first_gate = min(_literal(text, name)[0] for name in GATED_METRICS)
    assert written.splitlines()[first_gate] == first  # right above the first gate
    for name in GATED_METRICS:  # a summary line per edit, on stderr
        i, old = _literal(text, name)
        new = lines[i].partition("=")[2]
        if new != old:
            assert f"{name}: {old} → {new}" in result.stderr
    assert result.stdout == ""
    again = run("--file", script, "--history", example.history)
    assert again.exit_code == 0 and "nothing to change" in again.stderr
    assert script.read_text() == written


def test_dry_run_prints_the_diff_and_writes_nothing(example: ExamplePaths, tmp_path: Path) -> None:
    script, text = _copy(example, tmp_path)
    dry = run("--file", script, "--history", example.history, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert script.read_text() == text
    done = run("--file", script, "--history", example.history)
    assert done.exit_code == 0, done.output
    name = script.as_posix()
    diff = difflib.unified_diff(
        text.splitlines(keepends=True),
        script.read_text().splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
    )
    assert dry.stdout == "".join(diff)
    assert dry.stdout.startswith(f"--- a/{name}\n+++ b/{name}\n@@ ")


def test_named_gates_only(example: ExamplePaths, tmp_path: Path) -> None:
    script, text = _copy(example, tmp_path)
    names = ["EVAL_ACC_MIN_VALUE", "STEP_TIME_MAX_VALUE"]
    result = run("--file", script, "--history", example.history, *names)
    assert result.exit_code == 0, result.output
    lines, _ = _expected(example, text, names)
    rest, _ = _without_block(script.read_text())
    assert rest == lines
    others = [n for n in GATED_METRICS if n not in names]
    assert not any(n in result.stderr for n in others)


def test_unknown_gate_names_exit_2_with_the_gate_list(
    example: ExamplePaths, tmp_path: Path
) -> None:
    script, text = _copy(example, tmp_path)
    result = run("--file", script, "--history", example.history, "EVAL_ACC_MIN_VALUE", "NOPE")
    assert result.exit_code == 2
    assert result.stderr.startswith("threshold-bot: error: ") and "NOPE" in result.stderr
    assert all(name in result.stderr for name in GATED_METRICS)
    assert script.read_text() == text


def test_a_gate_without_data_is_left_and_reported(example: ExamplePaths, tmp_path: Path) -> None:
    script = tmp_path / "check.sh"
    text = (
        "#!/bin/bash\n"
        "ACC_MIN=0.30\n"
        "GHOST_MIN=0.10\n"
        'python check.py --asserts "eval/all/avg_score >= $ACC_MIN" "eval/ghost >= $GHOST_MIN"\n'
    )
    script.write_text(text)
    result = run("--file", script, "--history", example.history)
    assert result.exit_code == 0, result.output
    new = _rule(_window(example.history, "eval/all/avg_score"), ">=", "0.30")
    rest, _ = _without_block(script.read_text())
    assert rest == text.replace("ACC_MIN=0.30", f"ACC_MIN={new}").splitlines()
    assert f"ACC_MIN: 0.30 → {new}" in result.stderr
    assert "GHOST_MIN: no finished run in the window has its metric" in result.stderr


def test_line_endings_are_kept(example: ExamplePaths, tmp_path: Path) -> None:
    script = tmp_path / "check.sh"
    text = 'ACC_MIN=0.30\r\npython check.py --asserts "eval/all/avg_score >= $ACC_MIN"\r\n'
    script.write_bytes(text.encode())
    result = run("--file", script, "--history", example.history)
    assert result.exit_code == 0, result.output
    written = script.read_bytes().decode()
    assert written.count("\n") == written.count("\r\n") > 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "W&B: WANDB_API_KEY is not set"),  # the project the demo's script names
        (["--history", "missing.jsonl"], "missing.jsonl"),
        (["--history", "runs.jsonl", "--allowance", "x"], "--allowance"),
        (["--history", "runs.jsonl", "--window", "soon"], "--window"),
    ],
)
def test_bad_input_exits_2(
    example: ExamplePaths,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    (tmp_path / "runs.jsonl").write_text(example.history.read_text())
    script, text = _copy(example, tmp_path)
    result = run("--file", script, *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output
    assert script.read_text() == text


SCRIPT = """#!/bin/bash
export ACC_MIN=0.40
python check.py --project_name gsm8k_ci --asserts "eval/acc >= $ACC_MIN"
"""


@pytest.fixture()
def wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWandb]:
    fake = FakeWandb()
    for i in range(30):
        fake.add_run("acme", "gsm8k_ci", nightly_run(i))
    with serve(fake) as url:
        monkeypatch.setenv("WANDB_API_KEY", API_KEY)
        monkeypatch.setenv("WANDB_BASE_URL", url)
        monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
        monkeypatch.chdir(tmp_path)
        yield fake


def test_from_wandb(wandb: FakeWandb, tmp_path: Path) -> None:
    script = tmp_path / "nightly.sh"
    script.write_text(SCRIPT)
    result = run("--file", script, "--wandb", "acme/gsm8k_ci")
    assert result.exit_code == 0, result.output
    finished = sorted(
        (r for r in wandb.projects[("acme", "gsm8k_ci")].values() if r.state == "finished"),
        key=lambda r: r.created_at,
    )
    new = _rule([r.summary["eval"]["acc"] for r in finished[-20:]], ">=", "0.40")
    rest, _ = _without_block(script.read_text())
    assert rest == SCRIPT.replace("ACC_MIN=0.40", f"ACC_MIN={new}").splitlines()


def test_wandb_outage_exits_1_and_writes_nothing(wandb: FakeWandb, tmp_path: Path) -> None:
    wandb.fail(status=503, count=1000)
    script = tmp_path / "nightly.sh"
    script.write_text(SCRIPT)
    result = run("--file", script, "--wandb", "acme/gsm8k_ci")
    assert result.exit_code == 1, result.output
    assert "could not be read" in result.stderr and "nothing was written" in result.stderr
    assert script.read_text() == SCRIPT


REFERENCE = """import pytest


def test_accuracy(metrics):
    assert metrics["eval/all/avg_score"] == pytest.approx(0.60, rel=0.01)
"""


def test_reference_gate_and_tolerance(example: ExamplePaths, tmp_path: Path) -> None:
    """The reference moves to the window's median; ``--tolerance`` widens a tolerance the
    window does not fit to the smallest (at its last digit) that holds every run."""
    script = tmp_path / "test_ref.py"
    script.write_text(REFERENCE)
    window = _window(example.history, "eval/all/avg_score")
    median = Decimal(repr(statistics.median(window))).quantize(Decimal("0.01"), ROUND_HALF_EVEN)
    kept = run("--file", script, "--history", example.history, "--dry-run")
    assert kept.exit_code == 0, kept.output
    assert f'+    assert metrics["eval/all/avg_score"] == pytest.approx({median}, rel=0.01)\n' in (
        kept.stdout
    )
    assert "tolerance too tight for the window" in kept.stderr and "--tolerance" in kept.stderr
    widened = run("--file", script, "--history", example.history, "--tolerance")
    assert widened.exit_code == 0, widened.output
    rest, block = _without_block(script.read_text())
    assert "tolerance widened where the runs did not fit" in block[1]
    prefix = f'    assert metrics["eval/all/avg_score"] == pytest.approx({median}, rel='
    line = rest[-1]
    assert line.startswith(prefix) and line.endswith(")")
    rel = Decimal(line.removeprefix(prefix).removesuffix(")"))
    step = Decimal(1).scaleb(rel.as_tuple().exponent)

    def holds(tolerance: Decimal) -> bool:
        return all(abs(Decimal(repr(v)) - median) <= tolerance * median for v in window)

    assert holds(rel) and not holds(rel - step)
