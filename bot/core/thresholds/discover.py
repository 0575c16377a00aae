"""Which files are threshold files, their gates, and each gate's history source.

Source precedence for a gate (first that applies):

1. the ``GateDecl.source`` of a gate declared in the config;
2. the ``FileDecl.source`` of the first config entry matching the file that names one;
3. the W&B project named in a shell script, merged over the config's default source when
   that is a W&B source too (so entity and run filters carry over);
4. the config's ``default_source``;
5. none (the caller decides, e.g. the CLI's ``--history``).

``ThresholdFile.source`` is set to what an undeclared gate of the file gets (steps 2-5).
Each gate's ``declared`` (and the file's) records which of these named its source and
where: ``config:files.N.gates.M``, ``config:files.N``, ``script:LINE`` or
``config:default_source``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import PurePosixPath

from bot.core.bounded import LinearPattern, compile_linear
from bot.core.config import FileDecl, GateDecl, RepoConfig
from bot.core.models import DeclaredSource, Gate, SourceSpec, ThresholdFile
from bot.core.thresholds.shell import SHELL_SUFFIXES, declared_gate, is_shell_script, parse_shell
from bot.core.thresholds.structured import parse_structured


def _char_class(body: str) -> str | None:
    """``[body]`` of a glob as a regex class; None when it is not a valid one (``[z-a]``):
    the ``[`` is then literal."""
    body = "^" + body[1:] if body.startswith("!") else body
    klass = "[" + body.replace("\\", "\\\\").replace("[", "\\[") + "]"
    try:
        compile_linear(klass)
    except ValueError:
        return None
    return klass


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> LinearPattern:
    """The glob as an RE2 pattern: matching takes time linear in the path, however many
    ``*`` the glob has (a backtracking regex took minutes on ``*a*a*a*a*a*a*b.sh``)."""
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
    return compile_linear("".join(out))


def glob_match(pattern: str, path: str) -> bool:
    """Match a repository-relative path: ``*`` within a directory, ``**`` across them.

    Time O(len(pattern) x len(path)) at worst.  ``ValueError`` for a glob too long for
    RE2 to compile (the config refuses globs of more than ``MAX_PATTERN`` characters).
    """
    return _glob_regex(pattern).fullmatch(path.removeprefix("./")) is not None


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


Resolved = tuple[SourceSpec | None, DeclaredSource | None]
"""A gate's history source and where it is named (both None: no source)."""


def resolve_source(
    config: RepoConfig,
    gate: tuple[str, GateDecl] | None,
    decls: list[tuple[int, FileDecl]],
    named_in_file: ThresholdFile | None,
) -> Resolved:
    """A gate's history source, by the precedence in this module's docstring.

    ``gate``: the config path of a declared gate and its declaration; ``decls``: the
    config's ``files`` entries matching the file, with their indices; ``named_in_file``:
    the parsed shell script, whose ``source`` is the W&B project it names.
    """
    if gate is not None and gate[1].source is not None:
        spec = config.sources[gate[1].source]
        return spec, DeclaredSource.of(spec, f"config:{gate[0]}")
    for index, decl in decls:
        if decl.source is not None:
            spec = config.sources[decl.source]
            return spec, DeclaredSource.of(spec, f"config:files.{index}")
    default = config.source(None)
    named = named_in_file.source if named_in_file is not None else None
    if named is None or named_in_file is None or named_in_file.declared is None:
        declared = DeclaredSource.of(default, "config:default_source") if default else None
        return default, declared
    origin = named_in_file.declared.origin
    if default is None or default.kind != named.kind:
        return named, DeclaredSource.of(named, origin)
    merged = default.model_copy(
        update=named.model_dump(include={"project", "entity"}, exclude_none=True)
    )
    return merged, DeclaredSource.of(merged, origin)


def _with_source(gate: Gate, resolved: Resolved) -> Gate:
    return gate.model_copy(update={"source": resolved[0], "declared": resolved[1]})


def _structured(
    path: str, text: str, config: RepoConfig, decls: list[tuple[int, FileDecl]]
) -> ThresholdFile:
    gates: dict[tuple[str, str, str], Gate] = {}
    for index, decl in decls:
        parsed = parse_structured(path, text, decl)
        for number, (gate, gate_decl) in enumerate(zip(parsed.gates, decl.gates, strict=True)):
            where = (f"files.{index}.gates.{number}", gate_decl)
            resolved = resolve_source(config, where, [(index, decl), *decls], None)
            gates.setdefault((gate.name, gate.metric, gate.op), _with_source(gate, resolved))
    source, declared = resolve_source(config, None, decls, None)
    return ThresholdFile(path=path, gates=tuple(gates.values()), source=source, declared=declared)


def _shell(
    path: str, text: str, config: RepoConfig, decls: list[tuple[int, FileDecl]]
) -> ThresholdFile:
    parsed = parse_shell(path, text)
    declared_gates = [
        (index, decl, number, g) for index, decl in decls for number, g in enumerate(decl.gates)
    ]
    overridden = {g.key for _, _, _, g in declared_gates}
    gates: list[Gate] = []
    for index, decl, number, gate_decl in declared_gates:
        name = gate_decl.name or gate_decl.key
        gate = declared_gate(path, text, name, gate_decl.key, gate_decl.metric, gate_decl.op)
        where = (f"files.{index}.gates.{number}", gate_decl)
        resolved = resolve_source(config, where, [(index, decl), *decls], parsed)
        gates.append(_with_source(gate, resolved))
    file_source = resolve_source(config, None, decls, parsed)
    gates += [_with_source(g, file_source) for g in parsed.gates if g.name not in overridden]
    gates.sort(key=lambda g: (g.start, g.name))
    unbound = tuple(u for u in parsed.unbound if u.name not in overridden)
    return ThresholdFile(
        path=path,
        gates=tuple(gates),
        unbound=unbound,
        source=file_source[0],
        declared=file_source[1],
        notes=parsed.notes,
    )


def find_gates(path: str, text: str, config: RepoConfig) -> ThresholdFile | None:
    """The gates of one file, or None when it is not a threshold file.

    A YAML / JSON / TOML file (or any non-shell file) gets the gates its ``files:`` entries
    declare; a shell script (matched by ``shell:``, or any shell script without ``shell:``
    globs, or one named in ``files:``) gets its discovered gates plus declared ones.  A file
    the config does not name and in which nothing is bound gives None.  Raises
    ``ThresholdFileError`` for a declared gate that cannot be found.
    """
    decls = [(i, d) for i, d in enumerate(config.files) if glob_match(d.path, path)]
    listed = any(glob_match(g, path) for g in config.shell)
    shell = is_shell_script(path, text)
    if listed or (shell and (decls or not config.shell)):
        found = _shell(path, text, config, decls)
        return found if found.gates or decls or listed else None
    if any(d.gates for _, d in decls):
        return _structured(path, text, config, decls)
    if decls:
        source, declared = resolve_source(config, None, decls, None)
        return ThresholdFile(path=path, source=source, declared=declared)
    return None
