"""The wheel carries the templates.

Built from a copy of the package directories the Dockerfile copies (``package_dirs``), the
wheel holds every file of ``bot/`` and every file of the top-level ``templates/`` (as
``bot/templates/``), and nothing beside the ``bot`` package.  Unpacked outside the checkout
and run from there, it renders the same PR comment and HTML report as the checkout.

The build runs offline: ``--no-build-isolation`` with the setuptools and wheel that ``make``
installs from constraints.txt, and ``--no-index``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path, PurePosixPath

import pytest
from packaging.requirements import Requirement
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.render.loader import PACKAGE
from bot.core.render.review import MARKER
from demo.data import write_example
from tests.conftest import ROOT
from tests.test_dockerfile import package_dirs

# the CLI's entry point (pyproject.toml's [project.scripts]), run by the interpreter
CLI = "from bot.cli.main import app; app()"
WHERE = f"import bot, {PACKAGE}; print(bot.__file__); print({PACKAGE}.__file__)"


def files_under(directory: Path) -> set[PurePosixPath]:
    """The files under ``directory`` that a build reads (bytecode caches left out)."""
    return {
        PurePosixPath(p.relative_to(directory).as_posix())
        for p in directory.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for requirement in map(Requirement, requires):  # what make installs (constraints.txt)
        have = version(requirement.name)
        assert requirement.specifier.contains(have), f"{requirement.name} {have}: run make"
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for directory in package_dirs():
        shutil.copytree(
            ROOT / directory, source / directory, ignore=shutil.ignore_patterns("__pycache__")
        )
    out = tmp_path_factory.mktemp("dist")
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    build += ["--no-index", "--quiet", "--wheel-dir", str(out), str(source)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_holds_every_template_and_every_file_of_bot(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {f"bot/templates/{f}" for f in files_under(ROOT / "templates")}
    code = {f"bot/{f}" for f in files_under(ROOT / "bot")}
    assert any(t.endswith(".md.j2") for t in templates) and "bot/cli/main.py" in code
    assert sorted(templates - names) == [] and sorted(code - names) == []
    (dist_info,) = {n.split("/")[0] for n in names} - {"bot"}  # nothing else at the top
    metadata = {n for n in names if n.startswith(f"{dist_info}/")}
    assert dist_info.endswith(".dist-info") and sorted(names - templates - code - metadata) == []


def test_the_unpacked_wheel_renders_what_the_checkout_renders(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    example = write_example(tmp_path / "example")
    review = ["review", "--history", str(example.history), "--file", str(example.head)]
    review += ["--base", str(example.base)]
    env = {**os.environ, "PYTHONPATH": str(site)}
    cwd = tmp_path / "elsewhere"  # neither the checkout nor the unpacked wheel
    cwd.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, *args]
        return subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False
        )

    where = run("-c", WHERE)
    assert where.returncode == 0, where.stderr
    assert all(Path(line).is_relative_to(site) for line in where.stdout.splitlines())
    assert len(where.stdout.splitlines()) == 2

    runner = CliRunner()
    comment = run("-c", CLI, *review, "--format", "markdown")
    expected = runner.invoke(app, [*review, "--format", "markdown"])
    assert comment.returncode == expected.exit_code, comment.stderr
    assert comment.stdout.startswith(MARKER) and comment.stdout == expected.stdout

    built, checkout = tmp_path / "wheel.html", tmp_path / "checkout.html"
    report = run("-c", CLI, *review, "--format", "html", "--output", str(built))
    expected = runner.invoke(app, [*review, "--format", "html", "--output", str(checkout)])
    assert report.returncode == expected.exit_code, report.stderr
    assert built.read_text(encoding="utf-8") == checkout.read_text(encoding="utf-8")
    assert "<canvas" in built.read_text(encoding="utf-8")
