"""``threshold-bot check-config``: validate a repository config against a checkout, before
pushing it.

Prints what the App will scan (each glob of ``files``, ``shell`` and ``python``, and the
checkout's files it matches), each gate found in those files (``file:line``, metric,
operator, value, kind, the history source it reads and, when the config names a model
under ``rule.model`` or ``rule.overrides``, the model that sets a limit gate's limit), the
``drift`` settings that fell back to their defaults (warnings), and each problem: a glob
that matches no file, a declared gate (or pattern) that matches nothing in a file, a file
that cannot be read, a ``kind: file`` source whose history file the checkout lacks.
Exit status 0 when all is well, 1 on such a problem, 2 for a config that is not valid
(``threshold-bot: error: FILE:LINE: key: problem``).  ``--schema`` prints the
config's JSON Schema instead (``make schema`` commits it as schema/threshold-bot.schema.json).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from bot.adapters.settings import DEFAULT_THRESHOLD_FILE_BYTES
from bot.cli.errors import fail
from bot.core.config import CONFIG_PATH, ConfigError, RepoConfig, config_schema, parse_config
from bot.core.globs import glob_match
from bot.core.models import Gate
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.errors import ThresholdFileError
from bot.features.related_files import disk_related, with_notes

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn"})


def checkout_files(root: Path) -> list[str]:
    """Every file under ``root`` as a sorted repository path (``a/b.yaml``); version control
    directories and symbolic links to directories are left out."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        base = Path(folder).relative_to(root)
        found += [(base / name).as_posix() for name in files]
    return sorted(found)


def _globs(config: RepoConfig) -> Iterator[tuple[str, str]]:
    """``(where, glob)`` for every glob of the config: ``files.0.path``, ``shell.1``..."""
    for number, decl in enumerate(config.files):
        yield f"files.{number}.path", decl.path
    for key in ("shell", "python"):
        for number, glob in enumerate(getattr(config, key)):
            yield f"{key}.{number}", glob


def _read(root: Path, path: str) -> str:
    """The text of ``path``; ``ValueError`` saying why it cannot be read."""
    file = root / path
    try:
        if file.stat().st_size > DEFAULT_THRESHOLD_FILE_BYTES:
            limit = DEFAULT_THRESHOLD_FILE_BYTES // 1024
            raise ValueError(f"larger than {limit} KiB: the App does not read it")
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except OSError as exc:
        raise ValueError(f"cannot be read ({exc.strerror})") from None


def _gate_line(gate: Gate, config: RepoConfig) -> str:
    source = gate.source or config.source(None)
    if gate.declared is not None:
        reads = f"{gate.declared.describe()} (named at {gate.declared.origin})"
    elif source is not None:
        reads = source.describe()
    else:
        reads = "the review's history (--history / --wandb; no source named)"
    value = gate.literal or f"{gate.value:g}"
    ignored = f" [ignored: {gate.ignored}]" if gate.ignored else ""
    model = ""
    if gate.kind == "limit" and ("model" in config.rule.model_fields_set or config.rule.overrides):
        rule = config.rule.for_gate(gate.name, gate.metric, gate.file)
        model = f", limit by {rule.describe_model()}"
    return (
        f"  {gate.file}:{gate.line}: {gate.name}: {gate.metric} {gate.op} {value} "
        f"({gate.kind}), reads {reads}{model}{ignored}"
    )


def _sources(config: RepoConfig, files: list[str]) -> tuple[list[str], list[str]]:
    """The report's lines on the config's sources, and a problem for each ``kind: file``
    source whose history file the checkout does not have."""
    if not config.sources:
        return [], []
    lines, problems = ["Sources:"], []
    for name, spec in config.sources.items():
        missing = spec.kind == "file" and spec.path not in files
        lines.append(f"  {name}: {spec.describe()}{': not in the checkout' * missing}")
        if missing:
            problems.append(
                f"sources.{name}.path: {spec.path!r} is not a file in the checkout; commit the"
                " history there (threshold-bot export writes one) or fix the path"
            )
    return lines, problems


def check(config: RepoConfig, root: Path) -> tuple[list[str], list[str]]:
    """The report's lines and the problems found, for ``config`` over the checkout ``root``."""
    files = checkout_files(root)
    lines, problems, scanned = ["What is scanned:"], [], []
    globs = list(_globs(config))
    if not globs:
        lines.append("  no globs: the App scans the shell scripts and Python tests a PR changes")
    for where, glob in globs:
        matched = [f for f in files if glob_match(glob, f)]
        lines.append(f"  {where}: {glob}: {len(matched)} file{'s' * (len(matched) != 1)}")
        lines += [f"    {path}" for path in matched]
        if not matched:
            problems.append(f"{where}: {glob!r} matches no file in the checkout")
        scanned += [f for f in matched if f not in scanned]
    if globs and not config.shell:
        lines.append("  shell: (none): also every shell script a PR changes")
    if globs and not config.python:
        lines.append("  python: (none): also every Python test file a PR changes")
    lines.append("Gates:")
    for path in scanned:
        try:
            text = _read(root, path)
            related = disk_related(path, text, root)
            found = with_notes(find_gates(path, text, config, related=related.files), related)
        except ValueError as exc:  # ThresholdFileError names the file (and line) itself
            text = str(exc) if isinstance(exc, ThresholdFileError) else f"{path}: {exc}"
            problems.append(text)
            lines.append(f"  {text}")
            continue
        if found is None or not found.gates:
            lines.append(f"  {path}: no gates found")
            unbound = found.unbound if found is not None else ()
            lines += [f"    {u.line}: {u.name} = {u.literal}: {u.reason}" for u in unbound]
            continue
        lines += [_gate_line(gate, config) for gate in found.gates]
        lines += [f"  {path}: {note}" for note in found.notes]
    source_lines, missing = _sources(config, files)
    lines += source_lines
    problems += missing
    if config.drift.problems:  # warnings: the drift watch runs on with the defaults
        lines.append("Drift settings that fell back (warnings):")
        lines += [f"  {problem}" for problem in config.drift.problems]
    return lines, problems


def check_config_command(
    path: Annotated[
        Path | None,
        typer.Argument(
            help=f"The config (default: {CONFIG_PATH} under --repo-root).", show_default=False
        ),
    ] = None,
    repo_root: Annotated[
        Path, typer.Option(help="The repository checkout the globs are matched in.")
    ] = Path("."),
    schema: Annotated[
        bool, typer.Option("--schema", help="Print the config's JSON Schema and exit.")
    ] = False,
) -> None:
    """Check a repository config against a checkout: files, gates, sources.

    Prints each glob with the files it matches, each gate found (file:line, metric, op,
    value, kind, the source it reads, the model when the config names one), each source
    and each problem. Exit 0: all is well; 1: a glob or a declared gate matches nothing, a
    file cannot be read, or a file source's history is not in the checkout; 2: the config
    is not valid.
    """
    if schema:
        typer.echo(json.dumps(config_schema(), indent=2))
        return
    if not repo_root.is_dir():
        fail(f"--repo-root {repo_root}: not a directory")
    config_path = path if path is not None else repo_root / CONFIG_PATH
    try:
        config = parse_config(config_path.read_text(encoding="utf-8"), config_path.as_posix())
    except FileNotFoundError:
        fail(f"config {config_path}: no such file")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"config {config_path}: cannot be read ({getattr(exc, 'strerror', None) or exc})")
    except ConfigError as exc:
        fail(str(exc))
    lines, problems = check(config, repo_root)
    typer.echo("\n".join(lines))
    if problems:
        typer.echo(f"{len(problems)} problem{'s' * (len(problems) != 1)}:")
        typer.echo("\n".join(f"  {problem}" for problem in problems))
        count = f"{len(problems)} problem{'s' * (len(problems) != 1)}"
        fail(f"{config_path.as_posix()}: {count}, listed above", 1)
    typer.echo("ok")
