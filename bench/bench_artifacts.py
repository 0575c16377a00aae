"""Time of ``read_artifact`` (bot/core/history/artifacts.py) on one run's artifact of each kind.

(a) an lm-eval results JSON of 60 tasks beside 60 samples files of 200 kB each (the harness's
``--log_samples`` layout); (b) a TensorBoard event file of 5 tags x 20,000 steps written by
tensorboardX; (c) a 100,000-row CSV of 5 metrics per step; (d) the refusal of a zip bomb of
256 MiB of zeros (about 250 kB zipped).  It prints the best of ``RUNS`` wall-clock times of
each, what was read, and the archive's size.  Run: ``.venv/bin/python bench/bench_artifacts.py``.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tensorboardX import SummaryWriter

from bot.core.history.artifacts import Skipped, WorkflowRun, read_artifact
from bot.core.models import SourceSpec

RUNS = 5
RUN = WorkflowRun(
    id="1", created_at=datetime(2026, 11, 3, tzinfo=UTC), commit="c", state="finished"
)
SPEC = SourceSpec(kind="actions", workflow="nightly.yml")


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def lm_eval() -> bytes:
    results = {
        f"task_{i}": {"alias": f"task_{i}", "acc,none": 0.5, "acc_stderr,none": 0.01}
        for i in range(60)
    }
    layout = {"results": results, "configs": {}, "versions": {}, "n-shot": {}, "config": {}}
    members = {"model/results_2026-11-03T02-00-00.json": json.dumps(layout).encode()}
    sample = json.dumps({"doc_id": 0, "resps": ["x" * 180]}).encode() + b"\n"
    for i in range(60):
        members[f"model/samples_task_{i}_2026-11-03T02-00-00.jsonl"] = sample * 1000
    return _zip(members)


def tensorboard() -> bytes:
    with tempfile.TemporaryDirectory() as logdir:
        with SummaryWriter(logdir=logdir) as writer:
            for step in range(20_000):
                for tag in ("loss", "lr", "grad_norm", "acc", "tokens_per_s"):
                    writer.add_scalar(f"train/{tag}", 1.0 / (step + 1), step)
        (path,) = Path(logdir).glob("events.out.tfevents.*")
        return _zip({f"tb/{path.name}": path.read_bytes()})


def csv_steps() -> bytes:
    rows = ["step,loss,acc,lr,grad_norm,tokens_per_s"]
    rows += [f"{s},{1 / (s + 1):.6f},0.5,0.001,1.5,900" for s in range(100_000)]
    return _zip({"curve.csv": "\n".join(rows).encode()})


def bomb() -> bytes:
    return _zip({"results.json": b"0" * (256 << 20)})


def best(archive: bytes) -> tuple[float, str]:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        result = read_artifact(archive, SPEC, RUN)
        times.append(time.perf_counter() - start)
    if isinstance(result, Skipped):
        what = f"skipped: {result.reason}"
    else:
        steps = sum(len(s) for s in result.series.values())
        what = f"{len(result.summary)} metrics, {steps:,} steps"
    return min(times), what


def main() -> None:
    cases: dict[str, Callable[[], bytes]] = {
        "lm-eval results + 60 samples files": lm_eval,
        "TensorBoard 5 tags x 20,000 steps": tensorboard,
        "CSV 100,000 steps x 5 metrics": csv_steps,
        "zip bomb 256 MiB of zeros": bomb,
    }
    for label, make in cases.items():
        archive = make()
        seconds, what = best(archive)
        print(f"{label}: {len(archive) / 1e6:.2f} MB zipped, {seconds * 1000:.0f} ms ({what})")


if __name__ == "__main__":
    main()
