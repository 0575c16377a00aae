"""The Dockerfile builds the package only once every package directory has been copied in,
from pinned parts.

``docker build`` needs the network, so this reads the Dockerfile the way Docker does
(line continuations, ``COPY`` then ``RUN`` in order) and checks the step that installs
the project against the package directories ``pyproject.toml`` declares: setuptools
stops with "package directory … does not exist" for any that is missing.  The image's
dependencies are pinned by ``constraints.txt`` (exact versions, every direct dependency
included) and its base image by an exact Python patch release.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import PurePosixPath

from tests.clean_install import package_dirs, requirements
from tests.conftest import ROOT

# a pinned requirement: ``name==version`` (PEP 508 name, PEP 440 public version)
_PINNED = re.compile(
    r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?==\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?$"
)
# the official Python image at an exact patch release, optionally with its digest
_EXACT_BASE = re.compile(r"^python:3\.\d+\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")

# ``pip install [options] .`` or ``-e .`` / ``".[extras]"``: the project itself
_INSTALLS_PROJECT = re.compile(
    r"\bpip install\b[^&|;]*?\s(?:-e\s+)?[\"']?\.(?:\[[^\]]*\])?[\"']?(?:\s|$)"
)


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
    assert package_dirs() == [PurePosixPath("bot"), PurePosixPath("templates")]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dockerfile_lines() -> list[str]:
    """The Dockerfile's instructions, continuations joined."""
    return (ROOT / "Dockerfile").read_text().replace("\\\n", "").splitlines()


def constraints() -> dict[str, str]:
    """``constraints.txt`` as canonical name -> line; every line must be ``name==version``."""
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        assert _PINNED.match(line), f"not an exact pin: {line!r}"
        name = _canonical(line.split("==")[0])
        assert name not in pins, f"{name} pinned twice"
        pins[name] = line
    return pins


def test_constraints_pin_every_dependency_of_the_image_exactly() -> None:
    wanted = [*requirements("all"), "setuptools", "wheel"]
    pins = constraints()
    names = {_canonical(m[0]) for req in wanted if (m := _NAME.match(req))}
    assert names <= pins.keys(), sorted(names - pins.keys())
    assert "threshold-bot" not in pins  # the project itself is not a dependency


def test_every_pip_install_of_the_image_uses_the_constraints() -> None:
    lines = dockerfile_lines()
    copies = [
        i for i, line in enumerate(lines) if line.startswith("COPY") and "constraints.txt" in line
    ]
    installs = [i for i, line in enumerate(lines) if "pip install" in line]
    assert copies and installs and copies[0] < installs[0]
    for i in installs:
        assert re.search(r"\bpip install\b[^&|;]*\s-c\s+constraints\.txt\b", lines[i]), lines[i]


def test_the_base_image_is_an_exact_patch_release() -> None:
    (base,) = [line.split()[1] for line in dockerfile_lines() if line.startswith("FROM ")]
    assert _EXACT_BASE.match(base), base
    image = tuple(int(n) for n in re.findall(r"\d+", base.split("-")[0])[:2])
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert image >= tuple(int(n) for n in requires.removeprefix(">=").split("."))


def test_the_pin_checks_themselves_spot_loose_pins() -> None:
    assert _PINNED.match("certifi==2026.10.19.post1") and _PINNED.match("cwevals==0.0.1b1")
    for loose in ("fastapi>=0.115", "numpy", "scipy==1.*", "redis==8.1.0 ; python_version<'3.12'"):
        assert not _PINNED.match(loose), loose
    assert _EXACT_BASE.match("python:3.11.14-slim-bookworm@sha256:" + "0" * 64)
    for loose in ("python:3.11-slim", "python:3-slim", "python:3.11.14-slim-bookworm@sha256:x"):
        assert not _EXACT_BASE.match(loose), loose


def test_the_image_has_the_drivers_of_deploy_compose() -> None:
    # deploy/compose.yaml runs the image on PostgreSQL (psycopg) and Redis: the image installs
    # every pin of constraints.txt, which holds what the `all` extra brings
    (install,) = [line for line in dockerfile_lines() if "-r constraints.txt" in line]
    assert re.search(r"\bpip install\b", install)
    image = {_canonical(m[0]) for r in requirements("all") if (m := _NAME.match(r))}
    assert {"psycopg", "redis", "alembic", "wandb", "mlflow-skinny"} <= image
    pins = constraints()
    assert {"psycopg", "psycopg-binary", "redis", "alembic"} <= pins.keys()
