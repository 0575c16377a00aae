"""Wall time of a full review: read the history file, find and diff the gates, build the
review, render the comment.  Targets: 350 runs x 40 metrics <= 0.5 s, 10,000 x 40 <= 3 s.

Run from the repository root: ``.venv/bin/python bench/bench_review.py``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.adapters.history.files import read_history
from bot.core.analysis.review import build_review
from bot.core.config import RepoConfig
from bot.core.render.review import render_comment
from bot.core.thresholds.diff import diff_gates
from bot.core.thresholds.discover import find_gates
from demo.data import SCRIPT_PATH, build_example, dump_jsonl, scaled_history

CASES = ((350, 40, 0.5), (10_000, 40, 3.0))
REPEATS = 3


def full_review(history: Path, base_text: str, head_text: str) -> dict[str, float]:
    """One review from disk to comment; the seconds each stage took."""
    config = RepoConfig()
    marks = [time.perf_counter()]
    runs = read_history(history)
    marks.append(time.perf_counter())
    head = find_gates(SCRIPT_PATH, head_text, config)
    base = find_gates(SCRIPT_PATH, base_text, config)
    assert head is not None
    changes = diff_gates(base, head)
    marks.append(time.perf_counter())
    review = build_review(changes, runs, unbound=head.unbound)
    marks.append(time.perf_counter())
    comment = render_comment(review)
    marks.append(time.perf_counter())
    assert len(review.gates) == 5 and comment
    names = ("read history", "gates", "analysis", "render")
    stages = {name: marks[i + 1] - marks[i] for i, name in enumerate(names)}
    stages["total"] = marks[-1] - marks[0]
    return stages


def main() -> None:
    """Print the best of three full reviews per size against its target."""
    example = build_example()
    with tempfile.TemporaryDirectory() as tmp:
        for runs, metrics, target in CASES:
            history = Path(tmp) / f"runs_{runs}.jsonl"
            history.write_text(dump_jsonl(scaled_history(runs, metrics)), encoding="utf-8")
            timings = [
                full_review(history, example.base_script, example.head_script)
                for _ in range(REPEATS)
            ]
            best = min(timings, key=lambda t: t["total"])
            stages = ", ".join(f"{k} {v:.3f}" for k, v in best.items() if k != "total")
            verdict = "ok" if best["total"] <= target else "OVER TARGET"
            print(
                f"review {runs:>6} runs x {metrics} metrics: {best['total']:.3f} s "
                f"(best of {REPEATS}; target {target} s: {verdict}) [{stages}]"
            )


if __name__ == "__main__":
    main()
