"""Time the threshold dashboard's page for a repository of 2,000 gates, and weigh it.

The view: 2,000 threshold files of one gate each, 5 % drifting, 5 % flaky, 5 % looser, the
rest healthy (``tests/dashboard_views.py``'s honest kinds, reviewed by the real analysis).
Prints the body's render time and size (cut to GitHub's limit), the page's render time and
size (the whole dashboard), and the time of ``reports.keep_page`` on SQLite: the first write,
and the same page kept again (a read, no write).  Each time is the median of ``--repeat``.

Run: ``.venv/bin/python bench/bench_dashboard_page.py [--gates N] [--repeat N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.adapters.store import reports
from bot.adapters.store.db import init_db, make_engine
from bot.core.dashboard.body import dashboard_body
from bot.core.dashboard.page import dashboard_page
from bot.core.dashboard.view import FileView, RepoView
from tests.dashboard_views import SHA, URL, kinds

REPORT = "https://bot.example.com/reports/" + "A" * 43


def view(gates: int) -> RepoView:
    """``gates`` files of one gate each: 5 % drifting, flaky and looser, the rest healthy."""
    made = kinds()
    files: list[FileView] = []
    for i in range(gates):
        kind = (made.drifting, made.flaky, made.looser)[i % 3] if i % 20 < 3 else made.healthy
        files.append(kind.model_copy(update={"path": f"ci/suite{i // 50}/gate{i}.sh"}))
    return RepoView(
        repo="octo/big", branch="main", sha=SHA, url=URL, files=tuple(files), report_url=REPORT
    )


def timed(repeat: int, work: Callable[[], object]) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(gates: int, repeat: int) -> int:
    shown = view(gates)
    body_s, body = timed(repeat, lambda: dashboard_body(shown))
    page_s, page = timed(repeat, lambda: dashboard_page(shown))
    assert isinstance(body, str) and isinstance(page, str)
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{tmp}/bench.db")
        sessions = init_db(engine)

        def keep() -> reports.Page:
            return reports.keep_page(
                sessions, key=b"k" * 32, repo="octo/big", head_sha=SHA, html=page, ttl_days=30
            )

        first_s, _ = timed(1, keep)
        again_s, _ = timed(repeat, keep)
        engine.dispose()
    print(f"Dashboard of {gates} gates (median of {repeat})")
    print(f"  body: {len(body):,} characters, rendered in {body_s * 1000:.0f} ms")
    print(f"  page: {len(page.encode()):,} bytes, rendered in {page_s * 1000:.0f} ms")
    kept = f"first write {first_s * 1000:.0f} ms, unchanged {again_s * 1000:.0f} ms"
    print(f"  keep_page on SQLite: {kept}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gates", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.exit(main(args.gates, args.repeat))
