"""Gates in shell scripts, found with no configuration (docs/threshold-files.md).

A gate is a variable assigned a numeric literal exactly once in the file
(``NAME=0.56``, ``export NAME="0.56"``, ``readonly NAME='0.56'``, ``declare -r NAME=.5``,
``local NAME=5.``, or a default ``NAME=${NAME:-0.56}``) and used in a quoted comparison
``"<metric> <op> $NAME"`` / ``'<metric> <op> ${NAME}'`` (``op``: ``>= > <= <``; several
per line, across line continuations, in here-documents too).

Binding rules (never guess):

* a variable compared against several metrics or operators gives one ``Gate`` per distinct
  ``(metric, op)``, all sharing the same literal span; the editor accepts several edits of
  one span only when they agree;
* a compared variable that is assigned twice, assigned something other than a numeric
  literal, or never assigned in the file is reported in ``ThresholdFile.unbound``;
* a numeric variable that no comparison uses is reported in ``unbound`` too.

A W&B project named in the file (``--project_name x``, ``--project-name=x``,
``project_name=x``, ``trainer.project_name=x``, ``WANDB_PROJECT=x``, ``--wandb-project x``;
entity from ``--entity`` / ``WANDB_ENTITY`` / ``wandb.entity=``) becomes the file's
source, declared at the line of its first mention.  Values are read as the shell passes
them on (quotes, escapes, ``$'...'``, adjacent parts), then one more pair of quotes is
removed, as Hydra does for ``trainer.project_name=\\"x\\"``; ``$VAR`` values resolve through
a single assignment in the file.  Two different projects named in one file are ambiguous:
none is used, and ``ThresholdFile.notes`` says so.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import cast

from bot.core.models import DeclaredSource, Gate, Op, SourceSpec, ThresholdFile, UnboundVariable
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.shell_lexer import (
    Heredoc,
    NestingError,
    Operator,
    Part,
    Word,
    lex,
    unquote_part,
)

SHELL_SUFFIXES = frozenset({".sh", ".bash"})
_SHEBANG = re.compile(r"#!\s*(?:\S*/)?(?:env\s+(?:-\S+\s+)*)?(?:ba|z|da|k|a|mk)?sh(?=\s|$)")
NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_NUMBER = re.compile(NUMBER)
_DEFAULT = re.compile(rf"\$\{{(?P<var>[A-Za-z_]\w*):?[-=](?P<num>{NUMBER})\}}")
_ASSIGN = re.compile(r"(?P<name>[A-Za-z_]\w*)(?P<append>\+?)=")
_COMPARISON = re.compile(
    r"(?<![^\s\"'(\[{,;=])(?P<metric>[^\s\"'<>=!$(){}\[\],;`|&]+)\s*"
    r"(?P<op>>=|<=|>|<)(?![=<>])\s*\$(?:(?P<a>[A-Za-z_]\w*)|\{(?P<b>[A-Za-z_]\w*)\})"
)
_REFERENCE = re.compile(r"\$(?:\{[#!]?)?(?P<name>[A-Za-z_]\w*)")
_VARIABLE = re.compile(r"\$(?:(?P<a>[A-Za-z_]\w*)|\{(?P<b>[A-Za-z_]\w*)\})")
_NEWLINE = re.compile("\n")
_SETTING_KEY = re.compile(r"-{0,2}[\w.\-]+")
_SHOWN = 60  # characters of a value quoted in a reason
_DECLARATIONS = frozenset({"export", "readonly", "declare", "local", "typeset"})
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "esac", "!", "{", "}"}
    | {"time", "function", "in", "for", "case", "select"}
)
_SEPARATORS = frozenset({"\n", ";", "&&", "||", "|", "&", "|&", "(", ")", ";;", ";&"})
_PROJECT_KEYS = ("project_name", "wandb_project", "wandb.project")
_ENTITY_KEYS = ("entity", "wandb_entity", "wandb.entity")


@dataclass(frozen=True, slots=True)
class _Assignment:
    name: str
    line: int
    value: str  # unquoted value text
    literal: str | None = None  # the numeric literal, when the value is one
    start: int = 0
    end: int = 0


@dataclass(frozen=True, slots=True)
class _Mention:
    key: str  # normalised: ``--Project-Name`` -> ``project_name``
    value: str
    line: int


@dataclass(frozen=True, slots=True)
class _Comparison:
    name: str
    metric: str
    op: Op
    line: int


@dataclass(slots=True)
class _Scan:
    assignments: list[_Assignment] = field(default_factory=list)
    commands: list[list[Word]] = field(default_factory=list)
    strings: list[Part | Heredoc] = field(default_factory=list)


def is_shell_script(path: str, text: str) -> bool:
    """A ``.sh`` / ``.bash`` file, or one whose first line is a shell shebang."""
    if PurePosixPath(path).suffix.lower() in SHELL_SUFFIXES:
        return True
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    return bool(_SHEBANG.match(first))


def _lines(text: str) -> list[int]:
    return [m.start() for m in _NEWLINE.finditer(text)]


def _line(newlines: list[int], offset: int) -> int:
    return bisect_left(newlines, offset) + 1


def _assignment(word: Word, newlines: list[int]) -> _Assignment | None:
    """``NAME=value`` as a word; the numeric literal's span when the value is one."""
    first = word.parts[0]
    match = _ASSIGN.match(first.text) if first.kind == "plain" else None
    if match is None:
        return None
    name, rest = match["name"], first.text[match.end() :]
    value = ([Part("plain", rest, first.start + match.end())] if rest else []) + word.parts[1:]
    text = "".join(unquote_part(p) for p in value)
    if match["append"] or len(value) != 1:
        return _Assignment(name, _line(newlines, word.start), text)
    part = value[0]
    default = _DEFAULT.fullmatch(part.text) if part.kind != "single" else None
    if _NUMBER.fullmatch(part.text):
        start, end = part.start, part.start + len(part.text)
    elif default and default["var"] == name:  # NAME=${NAME:-0.56}
        start, end = part.start + default.start("num"), part.start + default.end("num")
    else:
        return _Assignment(name, _line(newlines, word.start), text)
    literal = part.text[start - part.start : end - part.start]
    if not math.isfinite(float(literal)):  # 1e999: no usable threshold
        return _Assignment(name, _line(newlines, word.start), text)
    return _Assignment(name, _line(newlines, start), text, literal, start, end)


def _shown(value: str) -> str:
    """A value as a reason quotes it: ``repr``, cut to ``_SHOWN`` characters."""
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "…")


def _scan(path: str, text: str, newlines: list[int]) -> _Scan:
    """Walk the tokens: assignments at command position, command words, quoted strings.

    ``ThresholdFileError`` when quotes and substitutions are nested too deeply.
    """
    try:
        lexed = lex(text)
    except NestingError as exc:
        raise ThresholdFileError(path, _line(newlines, exc.offset), str(exc)) from None
    scan = _Scan(strings=list(lexed.heredocs))
    state, redirect = "start", False
    command: list[Word] = []
    for token in lexed.tokens:
        if isinstance(token, Operator):
            if token.text in _SEPARATORS:
                state, redirect = "start", False
                if command:
                    scan.commands.append(command)
                    command = []
            else:
                redirect = token.text not in ("<<", "<<-")  # the lexer took the delimiter
            continue
        scan.strings += [p for p in token.parts if p.kind != "plain"]
        if redirect or not token.parts:
            redirect = False
            continue
        assignment = _assignment(token, newlines) if state != "args" else None
        if assignment is not None:
            scan.assignments.append(assignment)
            command.append(token)
        elif state == "decl" or (state == "start" and token.unquoted() in _KEYWORDS):
            pass
        elif state == "start" and token.unquoted() in _DECLARATIONS:
            state = "decl"
        else:
            state = "args"
            command.append(token)
    if command:
        scan.commands.append(command)
    return scan


def _comparisons(scan: _Scan, newlines: list[int]) -> Iterator[_Comparison]:
    for string in scan.strings:
        for match in _COMPARISON.finditer(string.text):
            line = _line(newlines, string.start + match.start())
            op = cast(Op, match["op"])
            yield _Comparison(match["a"] or match["b"], match["metric"], op, line)


def _references(scan: _Scan) -> set[str]:
    names: set[str] = set()
    for command in scan.commands:
        for word in command:
            for part in word.parts:
                names.update(m["name"] for m in _REFERENCE.finditer(part.text))
    for string in scan.strings:
        names.update(m["name"] for m in _REFERENCE.finditer(string.text))
    return names


def _dequote(value: str) -> str:
    """``"x"`` / ``'x'`` -> ``x``: the quoting a program (Hydra, argparse in a shell) removes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _settings(scan: _Scan, newlines: list[int]) -> Iterator[_Mention]:
    """Every ``key=value``, ``--key=value`` and ``--key value``, keys normalised."""
    for a in scan.assignments:
        yield _Mention(a.name.lower(), _dequote(a.value), a.line)
    for command in scan.commands:
        words = [w.unquoted() for w in command]
        for i, word in enumerate(words):
            key, eq, value = word.partition("=")
            if not (eq or key.startswith("--")) or not _SETTING_KEY.fullmatch(key):
                continue
            normal = key.lstrip("-").replace("-", "_").lower()
            line = _line(newlines, command[i].start)
            if eq:
                yield _Mention(normal, _dequote(value), line)
            elif key.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("-"):
                yield _Mention(normal, _dequote(words[i + 1]), line)


def _resolve(value: str, strings: dict[str, str | None]) -> str | None:
    """Replace ``$VAR`` / ``${VAR}`` from single string assignments; None if any is unknown."""
    unknown = False

    def sub(match: re.Match[str]) -> str:
        nonlocal unknown
        resolved = strings.get(match["a"] or match["b"])
        unknown = unknown or resolved is None or "$" in resolved
        return resolved or ""

    result = _VARIABLE.sub(sub, value).strip()
    return None if unknown or "$" in result or not result else result


def _named(
    mentions: Iterable[_Mention], keys: tuple[str, ...], strings: dict[str, str | None]
) -> dict[str, int]:
    """The distinct values named under ``keys``, each with the line of its first mention."""
    found: dict[str, int] = {}
    for m in mentions:
        if m.key in keys or m.key.endswith(tuple("." + k for k in keys)):
            resolved = _resolve(m.value, strings)
            if resolved is not None:
                found[resolved] = min(found.get(resolved, m.line), m.line)
    return found


def _ambiguous(what: str, found: dict[str, int]) -> str:
    named = ", ".join(f"{value} on line {line}" for value, line in sorted(found.items()))
    return f"the script names {len(found)} different W&B {what} ({named}): none of them is used"


def _source(scan: _Scan, newlines: list[int]) -> tuple[SourceSpec | None, int, tuple[str, ...]]:
    """The W&B project (and entity) the script names, the line naming it, and notes."""
    strings: dict[str, str | None] = {}
    for a in scan.assignments:
        strings[a.name] = _dequote(a.value) if a.name not in strings else None
    mentions = list(_settings(scan, newlines))
    projects = _named(mentions, _PROJECT_KEYS, strings)
    entities = _named(mentions, _ENTITY_KEYS, strings)
    notes = tuple(
        _ambiguous(w, f) for w, f in (("projects", projects), ("entities", entities)) if len(f) > 1
    )
    if len(projects) != 1:
        return None, 0, notes
    ((project, line),) = projects.items()
    entity = next(iter(entities)) if len(entities) == 1 else None
    return SourceSpec(kind="wandb", project=project, entity=entity), line, notes


def _unbound(name: str, path: str, line: int, literal: str, reason: str) -> UnboundVariable:
    return UnboundVariable(name=name, file=path, line=line, literal=literal, reason=reason)


def parse_shell(path: str, text: str) -> ThresholdFile:
    """Find the gates of a shell script, what could not be bound, and its W&B project."""
    newlines = _lines(text)
    scan = _scan(path, text, newlines)
    by_name: dict[str, list[_Assignment]] = {}
    for a in scan.assignments:
        by_name.setdefault(a.name, []).append(a)
    compared: dict[str, list[_Comparison]] = {}
    for c in _comparisons(scan, newlines):
        if (c.metric, c.op) not in {(o.metric, o.op) for o in compared.get(c.name, [])}:
            compared.setdefault(c.name, []).append(c)
    gates: list[Gate] = []
    unbound: list[UnboundVariable] = []
    for name, uses in compared.items():
        assigned = by_name.get(name, [])
        first = assigned[0] if assigned else None
        if first is None:
            reason = f"compared on line {uses[0].line} but never assigned in this file"
            unbound.append(_unbound(name, path, uses[0].line, "", reason))
        elif len(assigned) > 1:
            lines = ", ".join(str(a.line) for a in assigned)
            reason = (
                f"assigned {len(assigned)} times (lines {lines}): which value applies is unclear"
            )
            unbound.append(_unbound(name, path, first.line, first.literal or first.value, reason))
        elif first.literal is None:
            reason = (
                f"compared on line {uses[0].line} but assigned {_shown(first.value)}, not a number"
            )
            unbound.append(_unbound(name, path, first.line, first.value, reason))
        else:
            gates += [
                Gate(
                    name=name,
                    file=path,
                    line=first.line,
                    metric=use.metric,
                    op=use.op,
                    value=float(first.literal),
                    literal=first.literal,
                    start=first.start,
                    end=first.end,
                )
                for use in uses
            ]
    references = _references(scan)
    for name, assigned in by_name.items():
        first = assigned[0]
        if name in compared or first.literal is None:
            continue
        where = "used elsewhere in the file" if name in references else "never used in the file"
        reason = f"not used in a '<metric> <op> ${name}' comparison ({where})"
        unbound.append(_unbound(name, path, first.line, first.literal, reason))
    gates.sort(key=lambda g: (g.start, g.line))
    unbound.sort(key=lambda u: u.line)
    source, line, notes = _source(scan, newlines)
    declared = DeclaredSource.of(source, f"script:{line}") if source is not None else None
    return ThresholdFile(
        path=path,
        gates=tuple(gates),
        unbound=tuple(unbound),
        source=source,
        declared=declared,
        notes=notes,
    )


def declared_gate(path: str, text: str, name: str, variable: str, metric: str, op: Op) -> Gate:
    """A gate the repository config declares on a shell variable (``GateDecl.key``).

    For comparisons this module cannot see (``bc``, a Python file reading the variable):
    the variable must be assigned a numeric literal exactly once, else ``ThresholdFileError``.
    """
    assigned = [a for a in _scan(path, text, _lines(text)).assignments if a.name == variable]
    a = assigned[0] if len(assigned) == 1 else None
    if a is None or a.literal is None:
        if not assigned:
            reason = "is never assigned"
        elif a is None:
            reason = f"is assigned {len(assigned)} times"
        else:
            reason = f"is assigned {_shown(a.value)}, not a number"
        line = assigned[0].line if assigned else None
        raise ThresholdFileError(path, line, f"declared gate {name!r}: ${variable} {reason}")
    return Gate(
        name=name,
        file=path,
        line=a.line,
        metric=metric,
        op=op,
        value=float(a.literal),
        literal=a.literal,
        start=a.start,
        end=a.end,
    )
