"""Start-up of the command line as whole processes: ``threshold-bot --version`` and a ``review``
of the seed-like nightly (the demo's 340 nights with 40 metrics, one script), wall time and
peak RSS, median of 5 after one warm-up run.

Targets: ``--version`` ≤ 0.3 s; the review ≤ 1.0 s wall and ≤ 150 MB peak RSS.  Run it on a
quiet machine, from the repository root: ``.venv/bin/python bench/bench_startup.py``; give
``--bin PATH`` to time another installation's ``threshold-bot`` (e.g. a clean virtualenv
with the wheel: bench/bench_install.py makes one).  Where the time goes:
``python -X importtime -c "import bot.cli.review"`` (docs/benchmarks.md, "Start-up").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from demo.data import SCRIPT_PATH, build_example, dump_jsonl

RUNS, WARMUP = 5, 1
METRICS = 40
TARGETS = {"--version": (0.3, None), "review": (1.0, 150.0)}  # seconds, MB


def nightly_with(metrics: int) -> tuple[list[dict[str, Any]], str, str]:
    """The demo's nightly history with filler metrics up to ``metrics`` per run (the story's
    regimes and failures kept), and its script before and after the threshold PR."""
    example = build_example()
    rng = np.random.default_rng(7)
    extra = metrics - len(next(r["summary"] for r in example.records if r["summary"]))
    levels = rng.uniform(0.5, 500.0, size=extra)
    records = []
    for record in example.records:
        summary = dict(record["summary"])
        if summary:
            noise = rng.normal(scale=0.01, size=extra) * levels
            summary |= {f"bench/metric_{j:02d}": float(v) for j, v in enumerate(levels + noise)}
        records.append(record | {"summary": summary})
    return records, example.base_script, example.head_script


# A child's peak RSS as the kernel reports it (ru_maxrss) includes the memory of the process
# that started it, up to its exec: so each command is started by this small launcher (a bare
# interpreter, about 10 MB: the floor of the figure), never by the benchmark's own process.
LAUNCHER = """
import json, os, sys, time
start = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=[
    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
_, status, usage = os.wait4(pid, 0)
print(json.dumps([time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status)]))
"""


def measure(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """One whole process: wall seconds and peak RSS in MB (the kernel's accounting)."""
    launched = subprocess.run(
        [sys.executable, "-I", "-S", "-c", LAUNCHER, *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall, peak_kb, code = json.loads(launched.stdout)
    if code != 0:
        raise SystemExit(f"{' '.join(command)} failed with {code}")
    return float(wall), float(peak_kb) / 1024


def report(name: str, samples: list[tuple[float, float]]) -> str:
    """``name``: min / median / max of wall and peak RSS, against its targets."""
    walls, peaks = [s[0] for s in samples], [s[1] for s in samples]
    wall_target, memory_target = TARGETS.get(name, (None, None))
    wall, peak = statistics.median(walls), statistics.median(peaks)
    verdicts = []
    if wall_target is not None:
        verdicts.append(f"wall target {wall_target} s: {'ok' if wall <= wall_target else 'OVER'}")
    if memory_target is not None:
        verdicts.append(
            f"RSS target {memory_target:.0f} MB: {'ok' if peak <= memory_target else 'OVER'}"
        )
    return (
        f"{name:<10} wall {min(walls):.3f} / {wall:.3f} / {max(walls):.3f} s, "
        f"peak RSS {min(peaks):.1f} / {peak:.1f} / {max(peaks):.1f} MB "
        f"(min / median / max of {len(samples)}{''.join('; ' + v for v in verdicts)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Path(sys.executable).with_name("threshold-bot")
    parser.add_argument("--bin", type=Path, default=default, help="the threshold-bot to time")
    binary = str(parser.parse_args().bin.resolve())
    records, base, head = nightly_with(METRICS)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "history.jsonl").write_text(dump_jsonl(records), encoding="utf-8")
        for side, text in (("base", base), ("head", head)):
            (root / side).mkdir()
            (root / side / "nightly.sh").write_text(text, encoding="utf-8")
        commands = {
            "--version": [binary, "--version"],
            "review": [binary, "review", "--history", "history.jsonl", "--base",
                       "base/nightly.sh", "--file", "head/nightly.sh", "--format", "markdown"],
        }  # fmt: skip
        print(f"{binary}: {len(records)} runs x {METRICS} metrics ({SCRIPT_PATH} of the demo)")
        print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
        # as a user's install runs it: pip compiled the bytecode, or the warm-up run writes it
        # (even where the environment sets PYTHONDONTWRITEBYTECODE)
        warm = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        for name, command in commands.items():
            samples = [measure(command, root, warm) for _ in range(WARMUP + RUNS)][WARMUP:]
            print(report(name, samples))
        # the Action's one review after its --no-compile install: every module compiled from
        # source (an empty bytecode folder, nothing written), for the record, no target
        cold = warm | {"PYTHONPYCACHEPREFIX": str(root / "no-bytecode"),
                       "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
        samples = [measure(commands["review"], root, cold) for _ in range(RUNS)]
        print(report("review, no bytecode", samples))
        print(f"load average after:  {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
