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
from collections.abc import Mapping
from dataclasses import replace
from pathlib import PurePosixPath

from bot.core.config import FileDecl, GateDecl, RepoConfig
from bot.core.globs import glob_match
from bot.core.models import (
    SIDES_OPS,
    DeclaredSource,
    Gate,
    SourceSpec,
    ThresholdFile,
    Tolerance,
)
from bot.core.thresholds.golden.readers import follow_readers
from bot.core.thresholds.golden.text import (
    TEXT_GOLDEN_SUFFIXES,
    Reading,
    golden_named,
    parse_text_golden,
)
from bot.core.thresholds.python.reader import PYTHON_SUFFIXES, is_test_file, parse_python
from bot.core.thresholds.shell.declared import declared_gates
from bot.core.thresholds.shell.script import (
    SHELL_SUFFIXES,
    is_shell_script,
    parse_shell,
)
from bot.core.thresholds.structured.curves import parse_curves
from bot.core.thresholds.structured.declared import (
    STRUCTURED_SUFFIXES,
    TOML_SUFFIXES,
    coupled_notes,
    parse_structured,
)
from bot.core.thresholds.structured.detect import detect_structured, nothing_read
from bot.core.thresholds.structured.expressions import structured_expressions
from bot.core.thresholds.tables.reader import TABLE_SUFFIXES, parse_table

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


def _declared_source(
    config: RepoConfig,
    where: str,
    decls: list[tuple[int, FileDecl]],
    named_in_file: ThresholdFile | None,
) -> Resolved:
    """The source of the gate declared at ``files.N.gates.M`` (its ``pattern``): its own,
    else its file entry's, else the other matching entries', else the file's."""
    match = re.fullmatch(r"files\.(\d+)\.gates\.(\d+)", where)
    if match is None:
        return resolve_source(config, None, decls, named_in_file)
    index = int(match[1])
    decl = config.files[index]
    own = (where, decl.gates[int(match[2])])
    return resolve_source(config, own, [(index, decl), *decls], named_in_file)


def _metric_names(config: RepoConfig, decls: list[tuple[int, FileDecl]]) -> dict[str, str]:
    """Names as the file writes them -> history keys: the config's, then the files' entries."""
    names = dict(config.metrics)
    for _, decl in reversed(decls):
        names.update(decl.metrics)
    return names


def _per_test(template: str | None, gate: Gate) -> str:
    """The history key ``template`` (the config's name for the gate's metric) gives, with
    ``{test}`` / ``{class}`` filled from the one test checking the gate; the metric as
    written when there is no template or it names a part the gate has not."""
    if template is None:
        return gate.metric
    if "{test}" not in template and "{class}" not in template:
        return template
    test = gate.test
    if test is None or ("{class}" in template and not test[1]):
        return gate.metric
    return template.replace("{test}", test[0]).replace("{class}", test[1])


def _default_tolerance(config: RepoConfig, decls: list[tuple[int, FileDecl]]) -> Tolerance | None:
    """The numeric tolerance the config sets for the file's reference gates (first entry
    naming one, else the config's ``tolerance``); keys naming file values are the parsers'."""
    chosen = next((d.tolerance for _, d in decls if d.tolerance is not None), config.tolerance)
    if chosen is None:
        return None
    rel = chosen.rel if isinstance(chosen.rel, float | int) else None
    absolute = chosen.abs if isinstance(chosen.abs, float | int) else None
    if rel is None and absolute is None:
        return None
    return Tolerance(rel=rel, abs=absolute)


def _finish(
    found: ThresholdFile,
    config: RepoConfig,
    decls: list[tuple[int, FileDecl]],
    named_in_file: ThresholdFile | None = None,
) -> ThresholdFile:
    """What every shape shares: each gate's source (by the precedence above), names mapped
    to history keys, placeholders the config lists, and the config's default tolerance."""
    names = _metric_names(config, decls)
    ignored = {name for _, d in decls for name in d.ignore}
    tolerance = _default_tolerance(config, decls)
    sides = next((d.sides for _, d in decls if d.sides is not None), None)
    file_source = resolve_source(config, None, decls, named_in_file)
    by_pattern: dict[str, Resolved] = {"": file_source}  # one pattern declares many gates
    gates = []
    for gate in found.gates:
        resolved = by_pattern.get(gate.pattern)
        if resolved is None:
            resolved = _declared_source(config, gate.pattern, decls, named_in_file)
            by_pattern[gate.pattern] = resolved
        update: dict[str, object] = {"metric": _per_test(names.get(gate.metric), gate)}
        if gate.name in ignored and not gate.ignored:
            update["ignored"] = "listed under 'ignore' in the config"
        if gate.kind == "reference" and gate.tolerance is None and tolerance is not None:
            update["tolerance"] = tolerance
        if gate.kind == "reference" and sides is not None and not gate.pattern:
            update["op"] = SIDES_OPS[sides]  # a shape found without config: the entry's sides
        update |= {"source": resolved[0], "declared": resolved[1]}
        gates.append(gate.model_copy(update=update))
    return found.model_copy(
        update={"gates": tuple(gates), "source": file_source[0], "declared": file_source[1]}
    )


def _structured(
    path: str, text: str, config: RepoConfig, decls: list[tuple[int, FileDecl]]
) -> ThresholdFile:
    """Declared gates (by key path or pattern), one per match, first declaration winning."""
    gates: dict[tuple[str, str, str], Gate] = {}
    for index, decl in decls:
        for number, gate in parse_structured(path, text, decl, config):
            where = f"files.{index}.gates.{number}"  # parse_structured's own, unless reused
            tagged = gate if gate.pattern == where else gate.model_copy(update={"pattern": where})
            gates.setdefault((gate.name, gate.metric, gate.op), tagged)
    notes = coupled_notes(gates.values())  # coupled literals the file writes otherwise
    return ThresholdFile(path=path, gates=tuple(gates.values()), notes=notes)


def _shell(
    path: str,
    text: str,
    config: RepoConfig,
    decls: list[tuple[int, FileDecl]],
    related: Mapping[str, str],
) -> ThresholdFile:
    parsed = parse_shell(path, text, related)
    gates = declared_gates(path, text, decls)
    overridden = {g.key for _, decl in decls for g in decl.gates}
    gates += [g for g in parsed.gates if g.name not in overridden]
    gates.sort(key=lambda g: (g.start, g.name))
    unbound = tuple(u for u in parsed.unbound if u.name not in overridden)
    found = parsed.model_copy(update={"gates": tuple(gates), "unbound": unbound})
    return _finish(found, config, decls, parsed)


def _python_listed(path: str, config: RepoConfig) -> bool:
    if config.python:
        return any(glob_match(g, path) for g in config.python)
    return is_test_file(path)


def is_candidate(path: str, config: RepoConfig) -> bool:
    """Whether a changed file may hold gates and should be read.

    True for files matching a ``files:``, ``shell:`` or ``python:`` glob; without
    ``shell:`` globs for every ``.sh`` / ``.bash`` file (an extensionless script needs a
    ``shell:`` glob); without ``python:`` globs for Python test files (``test_*.py``,
    ``*_test.py``, ``conftest.py``); a text file (``.txt``, ``.dat``) only when its name
    or folder says golden / expected / reference / baseline.
    """
    if any(glob_match(d.path, path) for d in config.files):
        return True
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in TEXT_GOLDEN_SUFFIXES:
        return golden_named(path)
    if suffix in PYTHON_SUFFIXES:
        return _python_listed(path, config)
    if config.shell:
        return any(glob_match(g, path) for g in config.shell)
    return suffix in SHELL_SUFFIXES


def is_named(path: str, config: RepoConfig) -> bool:
    """Whether the config names ``path`` (a ``files:``, ``shell:`` or ``python:`` glob): else
    the file is read because of its name only, and the App stays quiet about it unless the
    PR changes one of its gates (a test file that merely has an assert is no news)."""
    globs = (*(d.path for d in config.files), *config.shell, *config.python)
    suffix = PurePosixPath(path).suffix.lower()
    if suffix not in PYTHON_SUFFIXES and suffix not in TEXT_GOLDEN_SUFFIXES:
        return True
    return any(glob_match(g, path) for g in globs)


def _text_golden(
    path: str, text: str, decls: list[tuple[int, FileDecl]], related: Mapping[str, str]
) -> ThresholdFile | None:
    """A text golden: what the script reading it says, the config's ``steps:`` first."""
    reading = follow_readers(path, related) if related else None
    steps = next((d.steps for _, d in decls if d.steps is not None), None)
    if steps is not None:
        reading = replace(reading or Reading(), start=steps.start, interval=steps.interval)
    return parse_text_golden(path, text, reading, named=bool(decls))


def _other(
    path: str,
    text: str,
    config: RepoConfig,
    decls: list[tuple[int, FileDecl]],
    related: Mapping[str, str],
) -> ThresholdFile | None:
    """A Python test, a CSV table, a text golden or a YAML / JSON / TOML file: its gates
    and hints."""
    suffix = PurePosixPath(path).suffix.lower()
    named = bool(decls)
    found: ThresholdFile | None = None
    if suffix in TEXT_GOLDEN_SUFFIXES:
        found = _text_golden(path, text, decls, related)
    elif suffix in PYTHON_SUFFIXES:
        found = parse_python(path, text, decls, _metric_names(config, decls), related)
    elif suffix in TABLE_SUFFIXES:
        table = next((d.csv for _, d in decls if d.csv is not None), None)
        found = parse_table(path, text, table)
    elif suffix in STRUCTURED_SUFFIXES:
        curves = parse_curves(path, text)
        if any(d.gates for _, d in decls):
            found = _structured(path, text, config, decls)
            found = _merged(found, curves) if curves is not None else found
        else:
            found = curves or detect_structured(path, text, named=named)
        if suffix not in TOML_SUFFIXES:
            found = _merged(found, structured_expressions(path, text))
    elif named:
        found = ThresholdFile(path=path)
    if found is None or not (found.gates or found.unbound or named):
        return None
    return _finish(found, config, decls)


def _merged(first: ThresholdFile | None, second: ThresholdFile) -> ThresholdFile | None:
    """Both files' gates and hints; a gate on a literal already bound is the first's.  The
    first's note that it read no number goes when the second reads one."""
    if first is None:
        return second if second.gates or second.unbound else None
    spans = {(g.start, g.end) for g in first.gates}
    extra = tuple(g for g in second.gates if (g.start, g.end) not in spans)
    notes = first.notes
    if second.gates or second.unbound:
        notes = tuple(n for n in notes if n != nothing_read(first.path))
    return first.model_copy(
        update={
            "gates": first.gates + extra,
            "unbound": first.unbound + second.unbound,
            "notes": notes,
        }
    )


def find_gates(
    path: str, text: str, config: RepoConfig, related: Mapping[str, str] | None = None
) -> ThresholdFile | None:
    """The gates of one file, or None when it is not a threshold file.

    A shell script (matched by ``shell:``, or any shell script without ``shell:`` globs, or
    one named in ``files:``) gets its discovered gates plus declared ones; a Python file its
    asserts (docs/threshold-files.md); a CSV file its table's rows; a YAML / JSON / TOML file
    the gates its ``files:`` entries declare, else the shapes recognised without
    configuration (golden curves, accuracy lists, expression strings).  A file the config
    does not name in which nothing is found gives None; one it names gives a
    ``ThresholdFile`` with its hints.  Raises ``ThresholdFileError`` for a file that cannot
    be read as its shape, or a declared gate (or pattern) that matches nothing.

    ``related``: other files of the repository by repository path, as the shell read them
    for this file (``bot.core.thresholds.related`` says which; bounded by the shell): a
    Python file's imported helpers and constants, the tests importing a constants module,
    the scripts a shell script runs, the tests reading a text golden.  None or empty: the
    file alone.
    """
    decls = [(i, d) for i, d in enumerate(config.files) if glob_match(d.path, path)]
    listed = any(glob_match(g, path) for g in config.shell)
    shell = is_shell_script(path, text)
    if listed or (shell and (decls or not config.shell)):
        found = _shell(path, text, config, decls, related or {})
        # a literal reaching a comparison, or one the config lines would bind (a checker's
        # LOSS_THRESHOLD): never dropped silently
        hinted = any(u.config or u.compared for u in found.unbound)
        return found if found.gates or decls or listed or hinted else None
    return _other(path, text, config, decls, related or {})
