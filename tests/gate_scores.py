"""Scores of a gate corpus read as a user reads it: ``threshold-bot review --format json``
run in the case's folder (the folder is the repository: helpers and goldens beside the
threshold file are where a repository keeps them), with and without the case's config.

A case is a folder with ``expected.json`` (``file``: the threshold file under review when the
folder holds several; ``gates``: each with ``metric``, ``literal``, ``kind``, ``direction``,
optionally ``with_config`` (the metric the config maps it to) and ``config_only`` (bound only
with the config)) and optionally ``config.yml``: the minimal config a maintainer writes after
reading the docs.

* **recall**: expected gates read faithfully (metric, literal, kind, direction) over expected;
* **bound or hinted** (without config): expected gates whose literal is a reported gate or a
  hint, over every expected gate (``config_only`` included: those must at least be hinted);
* **precision**: faithful gates over every reported gate, both readings pooled.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from bot.cli.main import app

FIXTURES = Path(__file__).parent / "fixtures" / "gates"
HISTORY = '{"id": "r1", "created_at": "2026-11-01T00:00:00Z", "summary": {"unrelated": 1.0}}\n'
META = ("expected.json", "config.yml")

Key = tuple[str, str, str, str]  # metric, literal, kind, direction


@dataclass(frozen=True)
class Case:
    """One folder of a corpus."""

    name: str
    root: Path
    file: str  # repository-relative path of the threshold file
    config: Path | None
    expected: list[dict[str, Any]]

    def wanted(self, configured: bool) -> set[Key]:
        """The gates a faithful reading finds, with or without the config."""
        return {
            (
                g.get("with_config", g["metric"]) if configured else g["metric"],
                g["literal"],
                g["kind"],
                g["direction"],
            )
            for g in self.expected
            if configured or not g.get("config_only")
        }


@dataclass(frozen=True)
class Reading:
    """What one run of ``review`` reported."""

    gates: set[Key]
    hinted: set[str]  # literals of the hints
    output: str


@dataclass
class Score:
    """Counts over a corpus (micro-averaged over gates) and per-file shares."""

    expected: int = 0
    faithful: int = 0
    reported: int = 0
    reported_faithful: int = 0
    covered: int = 0  # bound or hinted, without config
    all_expected: int = 0
    shares: dict[str, float] = field(default_factory=dict)

    @property
    def recall(self) -> float:
        return self.faithful / self.expected if self.expected else 1.0

    @property
    def precision(self) -> float:
        return self.reported_faithful / self.reported if self.reported else 1.0

    @property
    def bound_or_hinted(self) -> float:
        return self.covered / self.all_expected if self.all_expected else 1.0

    @property
    def file_share(self) -> float:
        return sum(self.shares.values()) / len(self.shares) if self.shares else 1.0


def cases(corpus: str) -> list[Case]:
    """The cases of ``tests/fixtures/gates/<corpus>``, in name order."""
    found = []
    for folder in sorted(p for p in (FIXTURES / corpus).iterdir() if p.is_dir()):
        meta = json.loads((folder / "expected.json").read_text())
        file = meta.get("file") or next(p.name for p in folder.iterdir() if p.name not in META)
        config = folder / "config.yml"
        found.append(
            Case(folder.name, folder, file, config if config.exists() else None, meta["gates"])
        )
    return found


@contextmanager
def _inside(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def read(case: Case, history: Path, configured: bool) -> Reading:
    """Run ``review --format json`` on the case's file from inside its folder."""
    args = ["review", "--file", case.file, "--history", str(history), "--format", "json"]
    config = case.config if configured else None
    if config is not None:
        args += ["--config", str(config)]
    with _inside(case.root):
        result = CliRunner().invoke(app, args)
    # a file with hints and no gate is a review too (zero gates, its hints): exit 2 means
    # nothing was seen, or the file could not be read
    gates: set[Key] = set()
    hinted: set[str] = set()
    if result.exit_code == 0:
        review = json.loads(result.stdout)
        gates = {(g["metric"], g["old_literal"], g["kind"], g["sides"]) for g in review["gates"]}
        hinted = {str(h["literal"]) for h in review["hints"]}
    return Reading(gates, hinted, result.output)


def score(corpus: str, history: Path, configured: bool) -> tuple[Score, dict[str, Reading]]:
    """The corpus's score read with (or without) the configs, and each case's reading."""
    total, readings = Score(), {}
    for case in cases(corpus):
        wanted = case.wanted(configured)
        reading = read(case, history, configured)
        readings[case.name] = reading
        hit = wanted & reading.gates
        total.expected += len(wanted)
        total.faithful += len(hit)
        total.reported += len(reading.gates)
        total.reported_faithful += len(reading.gates & wanted)
        if not configured:
            literals = {g["literal"] for g in case.expected}
            shown = {g[1] for g in reading.gates} | reading.hinted
            total.all_expected += len(literals)
            total.covered += len(literals & shown)
        if wanted or reading.gates:
            false = reading.gates - wanted
            total.shares[case.name] = len(hit) / (len(wanted) + len(false))
    return total, readings


def write_history(folder: Path) -> Path:
    """A one-run history naming no metric of any case (discovery is what is scored)."""
    path = folder / "runs.jsonl"
    path.write_text(HISTORY)
    return path
