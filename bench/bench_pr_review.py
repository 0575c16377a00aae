"""Benchmark: PR event -> review comment, for a 350-run history, against the local fakes.

The App runs as in ``make demo`` (uvicorn, SQLite store, embedded queue, worker
threads, the real PyGithub client) against the fake GitHub.  The repository holds the
demo's nightly script (5 gates), a history file of 350 runs (``scaled_history``: 12
metrics, five step changes) and one squash-merged PR per run, so attribution has a
real commit range to walk at every regime change.  Timed: from the POST of a signed
``pull_request`` delivery until the worker has posted (or edited) the comment and
completed the check run — a cold ``opened``, then ``synchronize`` after each of a
series of pushes.  Target: <= 2 s per review.  PyGithub's 1 s spacing of writes,
which the App keeps against real GitHub, is off against a loopback fake.

Run: ``.venv/bin/python bench/bench_pr_review.py``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo.app import demo_app  # noqa: E402
from demo.data import (  # noqa: E402
    METRICS,
    SCRIPT_PATH,
    DemoPull,
    DemoRepo,
    build_example,
    scaled_history,
)

RUNS = 350
PUSHES = 10
TARGET_SECONDS = 2.0


def synthetic_repo(records: list[dict[str, object]]) -> DemoRepo:
    """One merged PR per run, merged an hour before it, whose commit the run records."""
    pulls = []
    for i, record in enumerate(records):
        at = datetime.fromisoformat(str(record["created_at"]).replace("Z", "+00:00"))
        pulls.append(
            DemoPull(
                number=1000 + i,
                title=f"Change {i}",
                author="dev",
                merge_commit=str(record["commit"]),
                merged_at=at - timedelta(hours=1),
            )
        )
    return DemoRepo(
        initial_commit="0" * 40,
        pulls=tuple(pulls),
        effect_pulls=(),
        threshold_pull=5000,
        threshold_base=pulls[-1].merge_commit,
        threshold_head="f" * 40,
    )


def main() -> int:
    example = build_example()
    records = scaled_history(RUNS, len(METRICS))
    with (
        tempfile.TemporaryDirectory(prefix="bench-pr-review-") as tmp,
        demo_app(Path(tmp), synthetic_repo(records), example.base_script, records) as app,
    ):
        pr = app.repo.open_pr(
            5000, head="tune", head_files={SCRIPT_PATH: example.head_script}, title="Tune gates"
        )
        opened = app.pull_event("opened", pr)
        assert opened.outcome.status == "done", opened.outcome.last_error
        times = []
        for push in range(PUSHES):
            text = example.head_script + f"# push {push}\n"
            app.repo.commit("tune", {SCRIPT_PATH: text}, message=f"push {push}")
            done = app.pull_event("synchronize", pr)
            assert done.outcome.status == "done", done.outcome.last_error
            times.append(done.seconds)
        comments = app.repo.comments(pr.number)
        assert len(comments) == 1, "every review edits the one comment"
        calls = len(app.fake.calls)
    worst = max([opened.seconds, *times])
    print(f"PR event -> comment, {RUNS}-run history, 5 gates, local fakes:")
    print(f"  opened (cold)        {opened.seconds:6.3f} s")
    median = statistics.median(times)
    print(f"  synchronize x{PUSHES:<3}    median {median:.3f} s, max {max(times):.3f} s")
    print(f"  GitHub API calls     {calls} in total ({calls / (PUSHES + 1):.0f} per review)")
    verdict = "met" if worst <= TARGET_SECONDS else "MISSED"
    print(f"  target <= {TARGET_SECONDS:.0f} s per review: {verdict} (worst {worst:.3f} s)")
    return 0 if worst <= TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
