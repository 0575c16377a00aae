"""The Dockerfile builds the package only once every package directory has been copied in.

``docker build`` needs the network, so this reads the Dockerfile the way Docker does
(line continuations, ``COPY`` then ``RUN`` in order) and checks the step that installs
the project against the package directories ``pyproject.toml`` declares: setuptools
stops with "package directory … does not exist" for any that is missing.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import PurePosixPath

from tests.conftest import ROOT

# ``pip install [options] .`` or ``-e .`` / ``".[extras]"``: the project itself
_INSTALLS_PROJECT = re.compile(
    r"\bpip install\b[^&|;]*?\s(?:-e\s+)?[\"']?\.(?:\[[^\]]*\])?[\"']?(?:\s|$)"
)


def package_dirs() -> list[PurePosixPath]:
    """Every top-level package directory of the build, as setuptools finds it."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = tool["packages"]["find"]["include"]
    return [PurePosixPath(pattern.rstrip("*").rstrip(".").replace(".", "/")) for pattern in include]


def copied_before_install() -> list[PurePosixPath]:
    """The paths ``COPY``-ed into the image before the first step that installs the project."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", "")
    copied: list[PurePosixPath] = []
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["COPY"]:
            *sources, dest = words[1:]
            if dest.endswith("/") or dest == "./":
                copied += [PurePosixPath(s) for s in sources]
            else:
                copied.append(PurePosixPath(dest.removeprefix("./")))
        elif words[:1] == ["RUN"] and _INSTALLS_PROJECT.search(line):
            return copied
    raise AssertionError("the Dockerfile never installs the project")


def test_every_package_directory_is_copied_before_the_project_is_installed() -> None:
    copied = copied_before_install()
    missing = [
        str(d)
        for d in package_dirs()
        if not any(d == c or c in d.parents or d in c.parents for c in copied)
    ]
    assert missing == []


def test_the_check_itself_spots_a_missing_directory() -> None:
    assert _INSTALLS_PROJECT.search('RUN pip install --no-cache-dir -e ".[redis,mlflow]"')
    assert _INSTALLS_PROJECT.search("RUN pip install --no-cache-dir --no-deps .")
    assert not _INSTALLS_PROJECT.search("RUN pip install --no-cache-dir -r /tmp/requirements.txt")
    assert package_dirs() == [PurePosixPath("bot")]
