"""Which files are threshold files, their gates, and each gate's history source.

Source precedence for a gate (first that applies):

1. the ``GateDecl.source`` of a gate declared in the config;
2. the ``FileDecl.source`` of the first config entry matching the file that names one;
3. the W&B project named in a shell script, merged over the config's default source when
   that is a W&B source too (so entity and run filters carry over);
4. the config's ``default_source``;
5. none (the caller decides, e.g. the CLI's ``--history``).

``ThresholdFile.source`` is set to what an undeclared gate of the file gets (steps 2-5).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import PurePosixPath

from bot.core.config import FileDecl, GateDecl, RepoConfig
from bot.core.models import Gate, SourceSpec, ThresholdFile
from bot.core.thresholds.shell import SHELL_SUFFIXES, declared_gate, is_shell_script, parse_shell
from bot.core.thresholds.structured import parse_structured


def _char_class(body: str) -> str | None:
    """``[body]`` of a glob as a regex class; None when it is not a valid one (``[z-a]``):
    the ``[`` is then literal."""
    body = "^" + body[1:] if body.startswith("!") else body
    klass = "[" + body.replace("\\", "\\\\").replace("[", "\\[") + "]"
    try:
        re.compile(klass)
    except re.error:
        return None
    return klass


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    pattern = pattern.removeprefix("./")
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif (
            pattern[i] == "["
            and (close := pattern.find("]", i + 2)) > 0
            and (klass := _char_class(pattern[i + 1 : close]))
        ):
            out.append(klass)
            i = close + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_match(pattern: str, path: str) -> bool:
    """Match a repository-relative path: ``*`` within a directory, ``**`` across them."""
    return bool(_glob_regex(pattern).match(path.removeprefix("./")))


def is_candidate(path: str, config: RepoConfig) -> bool:
    """Whether a changed file may hold gates and should be read.

    True for files matching a ``files:`` or ``shell:`` glob, and, without ``shell:`` globs,
    for every ``.sh`` / ``.bash`` file (an extensionless script needs a ``shell:`` glob).
    """
    if any(glob_match(d.path, path) for d in config.files):
        return True
    if config.shell:
        return any(glob_match(g, path) for g in config.shell)
    return PurePosixPath(path).suffix.lower() in SHELL_SUFFIXES


def resolve_source(
    config: RepoConfig,
    gate: GateDecl | None,
    decls: list[FileDecl],
    named_in_file: SourceSpec | None,
) -> SourceSpec | None:
    """A gate's history source, by the precedence in this module's docstring."""
    for name in [gate.source if gate else None] + [d.source for d in decls]:
        if name is not None:
            return config.sources[name]
    default = config.source(None)
    if named_in_file is None:
        return default
    if default is None or default.kind != named_in_file.kind:
        return named_in_file
    named = named_in_file.model_dump(include={"project", "entity"}, exclude_none=True)
    return default.model_copy(update=named)


def _with_source(gate: Gate, source: SourceSpec | None) -> Gate:
    return gate.model_copy(update={"source": source})


def _structured(path: str, text: str, config: RepoConfig, decls: list[FileDecl]) -> ThresholdFile:
    gates: dict[tuple[str, str, str], Gate] = {}
    for decl in decls:
        parsed = parse_structured(path, text, decl)
        for gate, gate_decl in zip(parsed.gates, decl.gates, strict=True):
            source = resolve_source(config, gate_decl, [decl, *decls], None)
            gates.setdefault((gate.name, gate.metric, gate.op), _with_source(gate, source))
    file_source = resolve_source(config, None, decls, None)
    return ThresholdFile(path=path, gates=tuple(gates.values()), source=file_source)


def _shell(path: str, text: str, config: RepoConfig, decls: list[FileDecl]) -> ThresholdFile:
    parsed = parse_shell(path, text)
    declared = [(d, g) for d in decls for g in d.gates]
    overridden = {g.key for _, g in declared}
    gates: list[Gate] = []
    for decl, gate_decl in declared:
        name = gate_decl.name or gate_decl.key
        gate = declared_gate(path, text, name, gate_decl.key, gate_decl.metric, gate_decl.op)
        source = resolve_source(config, gate_decl, [decl, *decls], parsed.source)
        gates.append(_with_source(gate, source))
    file_source = resolve_source(config, None, decls, parsed.source)
    gates += [_with_source(g, file_source) for g in parsed.gates if g.name not in overridden]
    gates.sort(key=lambda g: (g.start, g.name))
    unbound = tuple(u for u in parsed.unbound if u.name not in overridden)
    return ThresholdFile(path=path, gates=tuple(gates), unbound=unbound, source=file_source)


def find_gates(path: str, text: str, config: RepoConfig) -> ThresholdFile | None:
    """The gates of one file, or None when it is not a threshold file.

    A YAML / JSON / TOML file (or any non-shell file) gets the gates its ``files:`` entries
    declare; a shell script (matched by ``shell:``, or any shell script without ``shell:``
    globs, or one named in ``files:``) gets its discovered gates plus declared ones.  A file
    the config does not name and in which nothing is bound gives None.  Raises
    ``ThresholdFileError`` for a declared gate that cannot be found.
    """
    decls = [d for d in config.files if glob_match(d.path, path)]
    listed = any(glob_match(g, path) for g in config.shell)
    shell = is_shell_script(path, text)
    if listed or (shell and (decls or not config.shell)):
        found = _shell(path, text, config, decls)
        return found if found.gates or decls or listed else None
    if any(d.gates for d in decls):
        return _structured(path, text, config, decls)
    if decls:
        return ThresholdFile(path=path, source=resolve_source(config, None, decls, None))
    return None
