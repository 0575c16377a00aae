"""TensorBoard event files in an artifact: written here by tensorboardX's SummaryWriter (the
library of the `actions` extra), zipped, and read back as a run's per-step series."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboardX.proto.tensor_pb2 import TensorProto
from tensorboardX.proto.types_pb2 import DataType
from tensorboardX.writer import FileWriter

from bot.core.history import artifact_formats
from bot.core.history.artifacts import Skipped, WorkflowRun, read_artifact
from bot.core.models import Run, SourceSpec

RUN = WorkflowRun(
    id="77", created_at=datetime(2026, 11, 3, tzinfo=UTC), commit="c0ffee", state="failed"
)
SPEC = SourceSpec(kind="actions", workflow="nightly.yml")


def _events(tmp_path: Path, scalars: dict[str, list[tuple[int, float]]]) -> bytes:
    """The bytes of one event file written by SummaryWriter (``simple_value`` scalars)."""
    with SummaryWriter(logdir=str(tmp_path)) as writer:
        for tag, points in scalars.items():
            for step, value in points:
                writer.add_scalar(tag, value, step)
    (path,) = tmp_path.glob("events.out.tfevents.*")
    return path.read_bytes()


def _tensor_events(tmp_path: Path, scalars: dict[str, list[tuple[int, float]]]) -> bytes:
    """The same as TF2's writers lay it out: a one-element tensor per step, the ``scalars``
    plugin named on a tag's first event only; written by tensorboardX's FileWriter."""
    writer = FileWriter(str(tmp_path))
    for tag, points in scalars.items():
        for i, (step, value) in enumerate(points):
            plugin = SummaryMetadata.PluginData(plugin_name="scalars" if i == 0 else "")
            tensor = TensorProto(dtype=DataType.DT_DOUBLE, double_val=[value])
            metadata = SummaryMetadata(plugin_data=plugin)
            entry = Summary.Value(tag=tag, tensor=tensor, metadata=metadata)
            writer.add_summary(Summary(value=[entry]), step)
    writer.close()
    (path,) = tmp_path.glob("events.out.tfevents.*")
    return path.read_bytes()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("write", [_events, _tensor_events])
def test_scalars_become_series_and_the_last_step_the_summary(
    tmp_path: Path, write: Callable[[Path, dict[str, list[tuple[int, float]]]], bytes]
) -> None:
    loss = [(0, 2.5), (100, 1.25), (200, 0.75)]
    events = write(tmp_path, {"train/loss": loss, "eval/acc": [(200, 0.5)]})
    result = read_artifact(_zip({"logs/events.out.tfevents.1762135200.ci.1": events}), SPEC, RUN)
    assert isinstance(result, Run), result
    assert result.series["train/loss"] == dict(loss)
    assert result.summary == {"train/loss": 0.75, "eval/acc": 0.5}
    assert result.state == "failed"


# the last record's payload ends with the float's 4 bytes, then its 4-byte checksum: -8 is the
# float's lowest byte (the Event still decodes, to another value), -10 a byte of its framing
@pytest.mark.parametrize("at", [-8, -10])
def test_a_corrupt_record_is_a_named_skip(tmp_path: Path, at: int) -> None:
    events = bytearray(_events(tmp_path, {"loss": [(s, 1.0 / (s + 1)) for s in range(20)]}))
    events[at] ^= 0x01
    result = read_artifact(_zip({"events.out.tfevents.1.ci": bytes(events)}), SPEC, RUN)
    assert isinstance(result, Skipped)
    assert result.reason == "corrupt TensorBoard record in events.out.tfevents.1.ci"


def test_a_truncated_file_is_a_named_skip(tmp_path: Path) -> None:
    events = _events(tmp_path, {"loss": [(s, 0.5) for s in range(5)]})
    result = read_artifact(_zip({"events.out.tfevents.1.ci": events[:-7]}), SPEC, RUN)
    assert isinstance(result, Skipped)
    assert result.reason == "corrupt TensorBoard record in events.out.tfevents.1.ci"


def test_the_record_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifact_formats, "MAX_RECORDS", 10)
    events = _events(tmp_path, {"loss": [(s, 0.5) for s in range(11)]})
    result = read_artifact(_zip({"events.out.tfevents.1.ci": events}), SPEC, RUN)
    assert isinstance(result, Skipped)
    assert result.reason == "events.out.tfevents.1.ci holds more than 10 records"
