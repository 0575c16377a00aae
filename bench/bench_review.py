"""Wall time of a full review: read the history file, find and diff the gates, build the
review, render the comment.  Targets: 350 runs x 40 metrics <= 0.5 s, 10,000 x 40 <= 3 s.

Then the charts' share of the rendering on the same reviews: the comment with its Mermaid
charts against the comment without, and the HTML report (``--format html``) on its own.
Target: each adds <= 50 ms to a 350-run review.

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
from bot.core.models import Review
from bot.core.render.html_report import html_report
from bot.core.render.review import render_comment
from bot.core.thresholds.diff import diff_gates
from bot.core.thresholds.discover import find_gates
from demo.data import SCRIPT_PATH, build_example, dump_jsonl, scaled_history

CASES = ((350, 40, 0.5), (10_000, 40, 3.0))
REPEATS = 3
CHARTS_TARGET = 0.050  # seconds the charts may add to a 350-run review's rendering


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
    return stages | chart_rendering(review)


def chart_rendering(review: Review) -> dict[str, float]:
    """Seconds to render the comment without charts, with them, and the HTML report."""
    marks = [time.perf_counter()]
    plain = render_comment(review, charts=False)
    marks.append(time.perf_counter())
    charted = render_comment(review)
    marks.append(time.perf_counter())
    report = html_report(review, title="bench")
    marks.append(time.perf_counter())
    assert "```mermaid" in charted and "```mermaid" not in plain and "data-chart" in report
    names = ("comment without charts", "comment with charts", "html report")
    return {name: marks[i + 1] - marks[i] for i, name in enumerate(names)}


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
            stages = ", ".join(f"{k} {best[k]:.3f}" for k in STAGES)
            verdict = "ok" if best["total"] <= target else "OVER TARGET"
            print(
                f"review {runs:>6} runs x {metrics} metrics: {best['total']:.3f} s "
                f"(best of {REPEATS}; target {target} s: {verdict}) [{stages}]"
            )
            print(charts_line(timings, runs))


STAGES = ("read history", "gates", "analysis", "render")


def charts_line(timings: list[dict[str, float]], runs: int) -> str:
    """The charts' extra rendering time, best of the repeats per stage, in milliseconds."""
    best = {k: min(t[k] for t in timings) * 1000 for k in timings[0] if k not in STAGES}
    mermaid = best["comment with charts"] - best["comment without charts"]
    html = best["html report"]
    worst = max(mermaid, html) / 1000
    verdict = "ok" if worst <= CHARTS_TARGET else "OVER TARGET"
    target = f"target {CHARTS_TARGET * 1000:.0f} ms at 350 runs: {verdict}" if runs == 350 else ""
    return (
        f"  charts: Mermaid in the comment +{mermaid:.1f} ms ({best['comment without charts']:.1f}"
        f" → {best['comment with charts']:.1f} ms), HTML report {html:.1f} ms"
        + (f" ({target})" if target else "")
    )


if __name__ == "__main__":
    main()
