"""The wheel carries the templates.

The wheel (the session's ``wheel`` fixture, tests/clean_install.py) holds every file of
``bot/`` and every file of the top-level ``templates/`` (as ``bot/templates/``), and nothing
beside the ``bot`` package.  That the installed wheel renders what the checkout renders is
tests/test_clean_install.py's.
"""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.servers


def files_under(directory: Path) -> set[PurePosixPath]:
    """The files under ``directory`` that a build reads (bytecode caches left out)."""
    return {
        PurePosixPath(p.relative_to(directory).as_posix())
        for p in directory.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_the_wheel_holds_every_template_and_every_file_of_bot(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {f"bot/templates/{f}" for f in files_under(ROOT / "templates")}
    code = {f"bot/{f}" for f in files_under(ROOT / "bot")}
    assert any(t.endswith(".md.j2") for t in templates) and "bot/cli/main.py" in code
    assert sorted(templates - names) == [] and sorted(code - names) == []
    (dist_info,) = {n.split("/")[0] for n in names} - {"bot"}  # nothing else at the top
    metadata = {n for n in names if n.startswith(f"{dist_info}/")}
    assert dist_info.endswith(".dist-info") and sorted(names - templates - code - metadata) == []
