"""The package as users install it: its wheel, built from the files git knows, installed into
a new virtualenv with no other package, with or without extras (tests/test_clean_install.py).

The wheel is built once per session from a copy of the checkout's files (tracked, or new and
not ignored), so nothing else of the developer's tree (``.venv``, build directories) leaks in
and the checkout is not written to.  Each virtualenv is made without pip and filled by this
interpreter's pip (``pip --python``), from the package registry or pip's cache.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT = 900  # seconds: a cold pip cache downloads every dependency


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
    """A copy of the checkout's files at ``target``."""
    for relative in repository_files(root):
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / relative, destination)
    return target


def build_wheel(work: Path) -> Path:
    """The wheel ``pip wheel`` builds from a copy of the checkout, as a user's pip would."""
    source = copy_checkout(work / "source")
    out = work / "dist"
    pip(["wheel", "--no-deps", "--wheel-dir", str(out), str(source)])
    [wheel] = out.glob("threshold_bot-*.whl")
    return wheel


def new_venv(path: Path, requirement: str) -> Path:
    """A new virtualenv at ``path`` holding ``requirement`` and what it needs; its ``bin``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    pip(["--python", str(python), "install", requirement])
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
