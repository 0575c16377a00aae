"""Time and peak memory of parsing hostile input: each attack of issue 10 (items 4-5), and
1 MiB threshold files of the costliest shapes.

For each input it prints the CPU time of one parse, its peak traced memory (tracemalloc,
measured in a second parse: tracing slows Python down) and the outcome: the error a
pull request's author sees, or what was found.  Before the bounds, the billion-laughs YAML
took 40 s and 2.2 GB, the glob 171 s, and the deep inputs crashed with RecursionError.

Run: ``.venv/bin/python bench/bench_parsing_bounds.py``.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.core.config import parse_config
from bot.core.history.formats import parse_jsonl, select_runs
from bot.core.models import History, Run, SourceSpec
from bot.core.thresholds.discover import find_gates, glob_match

MIB = 1 << 20
SCRIPT = (Path(__file__).resolve().parent.parent / "tests/data/nightly_gsm8k.sh").read_text()
CONFIG = parse_config("files:\n  - path: 't.[jty]*'\n    gates: [{key: a, metric: m, op: '>='}]\n")


def laughs() -> str:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\na: 0.5\n"


def select(pattern: str, name: str) -> int:
    spec = SourceSpec(kind="file", path="h.jsonl", name_regex=pattern)
    run = Run(id="r", name=name, created_at=datetime(2026, 7, 1, tzinfo=UTC))
    return len(select_runs(History(runs=(run,), source="h"), spec).runs)


def gates(path: str, text: str) -> Callable[[], object]:
    def parse() -> object:
        found = find_gates(path, text, CONFIG)
        return f"{len(found.gates)} gates, {len(found.unbound)} unbound" if found else "no gates"

    return parse


def attacks() -> dict[str, Callable[[], object]]:
    nightly = "".join(SCRIPT.replace("_VALUE", f"_VALUE{i}") for i in range(MIB // len(SCRIPT)))
    deep_line = '{"id": "d", "created_at": "2026-07-01", "summary": ' + "[" * 100_000
    return {
        "YAML billion laughs (362 B)": gates("t.yaml", laughs()),
        "YAML billion laughs, config": lambda: parse_config(laughs()),
        "YAML alias cycle": gates("t.yaml", "a: &a [*a]\n"),
        "YAML 100,000 [": gates("t.yaml", "a: " + "[" * 100_000),
        "JSON 100,000 [": gates("t.json", "[" * 100_000),
        "JSON 5,000-digit integer": gates("t.json", '{"a": ' + "1" * 5000 + "}"),
        "JSONL history, 100,000 [": lambda: parse_jsonl(deep_line, "h.jsonl"),
        'shell, 400 nested "$(': gates("t.sh", 'X="$(' * 400 + "\n"),
        "glob *a*a*a*a*a*a*b.sh, 123 a": lambda: glob_match("*a*a*a*a*a*a*b.sh", "a" * 123),
        "name_regex (a+)+$, 30 a + b": lambda: f"{select('(a+)+$', 'a' * 30 + 'b')} runs kept",
        "shell 1 MiB: nightly scripts": gates("t.sh", nightly),
        "shell 1 MiB: short words": gates("t.sh", "ab " * (MIB // 3)),
        "shell 1 MiB: NAME=0.5 lines": gates(
            "t.sh", "".join(f"A{i}=0.5\n" for i in range(MIB // 10))
        ),
        "shell 1 MiB: parentheses": gates("t.sh", "(" * MIB),
        "shell 1 MiB: blank lines": gates("t.sh", "\n" * MIB),
        "YAML 1 MiB: 60,000 keys": gates("t.yaml", "".join(f"k{i}: {i}\n" for i in range(60_000))),
        "YAML 1 MiB: blank lines": gates("t.yaml", "\n" * MIB),
        "TOML 1 MiB: blank lines": gates("t.toml", "\n" * MIB),
        "JSON 1 MiB: strings": gates("t.json", '["' + '", "'.join(["a"] * (MIB // 5)) + '"]'),
    }


def outcome(parse: Callable[[], object]) -> str:
    try:
        return str(parse())
    except Exception as exc:  # the error the PR's author sees
        return f"{type(exc).__name__}: {exc}"


def main() -> None:
    print(f"{'input':34} {'CPU s':>7} {'peak MiB':>9}  outcome")
    for label, parse in attacks().items():
        began = time.process_time()
        result = outcome(parse)
        seconds = time.process_time() - began
        tracemalloc.start()
        outcome(parse)
        peak = tracemalloc.get_traced_memory()[1] / MIB
        tracemalloc.stop()
        shown = result if len(result) <= 90 else result[:89] + "…"
        print(f"{label:34} {seconds:7.3f} {peak:9.1f}  {shown}")


if __name__ == "__main__":
    main()
