"""The package as users install it: its wheel, installed into a new virtualenv with no other
package, with or without extras (tests/test_clean_install.py, tests/test_packaging.py).

The wheel is built once per session (the ``wheel`` fixture) from a copy of what a build reads
(``pyproject.toml``, ``README.md`` and the package directories), so nothing else of the
developer's tree leaks in and the checkout is not written to; offline, with the setuptools and
wheel that ``make`` installs from constraints.txt.  Each virtualenv is made without pip and
filled by this interpreter's pip (``pip --python``), from the package registry or pip's cache.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path, PurePosixPath

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT = 900  # seconds: a cold pip cache downloads every dependency


def _setuptools() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]


def package_dirs() -> list[PurePosixPath]:
    """Every outermost package directory of the build: each listed package's directory
    (``package-dir``'s, or its dotted name as a path), less those inside another."""
    tool = _setuptools()
    mapped: dict[str, str] = tool.get("package-dir", {})  # type: ignore[assignment]
    packages: list[str] = tool["packages"]  # type: ignore[assignment]
    dirs = {PurePosixPath(mapped.get(name, name.replace(".", "/"))) for name in packages}
    return sorted(d for d in dirs if not any(other in d.parents for other in dirs))


def repository_files(root: Path = ROOT) -> list[str]:
    """The checkout's files a fresh clone would have (tracked, or new and not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout
    return [p for p in listed.decode().split("\0") if p and (root / p).is_file()]


def copy_checkout(target: Path, root: Path = ROOT) -> Path:
    """A copy of the checkout's files at ``target`` (what ``actions/checkout`` gives)."""
    for relative in repository_files(root):
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / relative, destination)
    return target


def build_wheel(work: Path) -> Path:
    """The wheel ``pip wheel`` builds from a copy of what the build reads, offline."""
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for requirement in map(Requirement, requires):  # what make installs (constraints.txt)
        have = version(requirement.name)
        assert requirement.specifier.contains(have), f"{requirement.name} {have}: run make"
    source = work / "source"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for directory in package_dirs():
        shutil.copytree(
            ROOT / directory, source / directory, ignore=shutil.ignore_patterns("__pycache__")
        )
    out = work / "dist"
    pip(["wheel", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir", str(out),
         str(source)])  # fmt: skip
    [wheel] = out.glob("threshold_bot-*.whl")
    return wheel


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's wheel, built once per session: under pytest-xdist, by the first worker
    that needs it, in the directory the workers' temporary directories share (the pattern
    pytest-xdist documents), the others waiting on a file lock and taking it from there."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return build_wheel(tmp_path_factory.mktemp("wheel"))
    shared = tmp_path_factory.getbasetemp().parent / "wheel"
    with (shared.parent / "wheel.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        built = list((shared / "dist").glob("threshold_bot-*.whl"))
        return built[0] if built else build_wheel(shared)


def new_venv(path: Path, requirement: str) -> Path:
    """A new virtualenv at ``path`` holding ``requirement`` and what it needs; its ``bin``.

    Without pip's bytecode compilation (``--no-compile``: more than half of an install's
    time): the interpreter compiles what a command imports when it first runs, as for any
    source without a ``.pyc``; what is installed is the same."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    pip(["--python", str(python), "install", "--no-compile", requirement])
    return path / "bin"


def pip(args: list[str]) -> None:
    """Run this interpreter's pip quietly; its output in the error when it fails."""
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


def requirements(extra: str | None = None) -> list[str]:
    """The requirements of the package (with ``extra``), its own extras in another extra
    (``threshold-bot[app]``) expanded, as pyproject.toml declares them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found: list[str] = list(project["dependencies"])
    pending, seen = [extra] if extra else [], set()
    while pending:
        name = pending.pop()
        seen.add(name)
        for requirement in project["optional-dependencies"][name]:
            own = re.fullmatch(r"threshold-bot\[([\w,-]+)\]", requirement)
            if own is None:
                found.append(requirement)
            else:
                pending += [e for e in own.group(1).split(",") if e not in seen]
    return found
