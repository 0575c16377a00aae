"""Which history each threshold file's gates read, and why: the review's source lines.

One line per file and source, e.g. "``tests/ci/nightly.sh``: W&B project
``gsm8k_ci``, named in the script at line 28".  When what was read differs from what
the file or config names (the CLI's ``--history``), the line says both.
"""

from __future__ import annotations

import re

from bot.core.config import CONFIG_PATH
from bot.core.models import DeclaredSource, GateReview, Review
from bot.core.render.markdown import Markdown, code

_GATE_ORIGIN = re.compile(r"config:(files\.\d+\.gates\.\d+)")
_FILE_ORIGIN = re.compile(r"config:(files\.\d+)")


def what(declared: DeclaredSource) -> Markdown:
    """``W&B project `entity/project```, ``MLflow experiment `x```, ``history file `p```."""
    if declared.kind == "file":
        return Markdown(f"history file {code(declared.path or '')}")
    if declared.kind == "mlflow":
        return Markdown(f"MLflow experiment {code(declared.experiment or '')}")
    name = f"{declared.entity}/{declared.project}" if declared.entity else declared.project
    return Markdown(f"W&B project {code(name or '')}")


def why(origin: str) -> Markdown:
    """Where a source is named, in words: ``named in the script at line 28`` …"""
    if origin.startswith("script:"):
        return Markdown(f"named in the script at line {origin.removeprefix('script:')}")
    if match := _GATE_ORIGIN.fullmatch(origin):
        return Markdown(f"set for the gate in {code(CONFIG_PATH)} ({code(match[1] + '.source')})")
    if match := _FILE_ORIGIN.fullmatch(origin):
        return Markdown(f"set for the file in {code(CONFIG_PATH)} ({code(match[1] + '.source')})")
    return Markdown(f"the {code('default_source')} of {code(CONFIG_PATH)}")


def source_phrase(gate: GateReview) -> Markdown:
    """What a gate read and why: its declared source, or what was read instead of it."""
    declared, read = gate.declared_source, gate.source
    if declared is None:
        named = f"no source is named (no W&B project in the file, no {code('default_source')})"
        return Markdown(f"{code(read)}; {named}" if read else named)
    named = Markdown(f"{what(declared)}, {why(declared.origin)}")
    if read and read != declared.describe():
        return Markdown(f"{code(read)}, instead of the {named}")
    return named


def source_lines(review: Review) -> list[tuple[str, Markdown]]:
    """``(file, phrase)`` for each file and distinct source of its judged gates (not the
    placeholders), in gate order."""
    lines: dict[tuple[str, str], Markdown] = {}
    for gate in (g for g in review.gates if not g.ignored):
        phrase = source_phrase(gate)
        lines.setdefault((gate.file, phrase), phrase)
    return [(file, phrase) for (file, _), phrase in lines.items()]
