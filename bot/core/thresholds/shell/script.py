"""Gates in shell scripts, found with no configuration (docs/threshold-files.md).

Three shapes:

1. A variable assigned a numeric literal exactly once in the file (``NAME=0.56``,
   ``export NAME="0.56"``, ``readonly NAME='0.56'``, ``declare -r NAME=.5``, ``local NAME=5.``,
   or a default ``NAME=${NAME:-0.56}``) and used in a quoted comparison
   ``"<metric> <op> $NAME"`` / ``'<metric> <op> ${NAME}'`` (``op``: ``>= > <= <``; several per
   line, across line continuations, in here-documents too).
2. A literal inside a quoted expression (``--check 'median(data["train/loss"]) < 1.1'``,
   ``--asserts "eval/acc >= 0.56"``), also in a quoted string inside a quoted command
   (``CHECK="python c.py 'max(data[\\"x\\"]) < 2'"``) and on a line of a here-document:
   ``expression_gates`` reads it, and the literal's span is its place in the file, through
   the quoting and escapes (strings inside strings: up to ``MAX_NESTED_CHARS``).

3. A number followed to a test command, ``bc`` / ``awk`` / ``python -c`` comparison, shell
   function or called repository script that fails the job (``|| exit 1``, ``if …; then exit
   1``, ``set -e``): ``follow.follow``; the called scripts' texts come as ``related``.

Binding rules for variables (never guess):

* a variable compared against several metrics or operators gives one ``Gate`` per distinct
  ``(metric, op)``, all sharing the same literal span; the editor accepts several edits of
  one span only when they agree;
* a compared variable that is assigned twice, assigned something other than a numeric
  literal, or never assigned in the file is reported in ``ThresholdFile.unbound``;
* a numeric variable that no comparison uses is reported in ``unbound`` too; when its name
  reads like a threshold and the script passes it to a program, the reason says how
  (``shell_hints``) and ``config`` holds the lines that would declare it a gate.

``# threshold-bot: ignore`` in a comment on a gate's line (for a variable: its assignment's
or its comparison's line) makes the gate a placeholder (``Gate.ignored``); hints on such a
line are dropped.  The W&B project named in the file is the file's source (``shell_source``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import cast

from bot.core.models import DeclaredSource, Gate, Op, ThresholdFile, UnboundVariable
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.expressions.gates import MAY_COMPARE, Located, expression_gates
from bot.core.thresholds.hints import config_lines, guess_metric, metric_like
from bot.core.thresholds.shell.follow import follow
from bot.core.thresholds.shell.hints import variable_uses
from bot.core.thresholds.shell.lexer import Heredoc, NestingError, Word, lex
from bot.core.thresholds.shell.quoting import heredoc_offsets, unquote_offsets
from bot.core.thresholds.shell.scan import Assignment, Scan, marked, scan, shown
from bot.core.thresholds.shell.source import named_source

SHELL_SUFFIXES = frozenset({".sh", ".bash"})
_SHEBANG = re.compile(r"#!\s*(?:\S*/)?(?:env\s+(?:-\S+\s+)*)?(?:ba|z|da|k|a|mk)?sh(?=\s|$)")
_COMPARISON = re.compile(
    r"(?<![^\s\"'(\[{,;=])(?P<metric>[^\s\"'<>=!$(){}\[\],;`|&]+)\s*"
    r"(?P<op>>=|<=|>|<)(?![=<>])\s*\$(?:(?P<a>[A-Za-z_]\w*)|\{(?P<b>[A-Za-z_]\w*)\})"
)
_REFERENCE = re.compile(r"\$(?:\{[#!]?)?(?P<name>[A-Za-z_]\w*)")
MAX_NESTED_CHARS = 64 * 1024
"""A quoted string longer than this is not searched for quoted checks inside it."""


@dataclass(frozen=True, slots=True)
class _Comparison:
    name: str
    metric: str
    op: Op
    line: int


def is_shell_script(path: str, text: str) -> bool:
    """A ``.sh`` / ``.bash`` file, or one whose first line is a shell shebang."""
    if PurePosixPath(path).suffix.lower() in SHELL_SUFFIXES:
        return True
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    return bool(_SHEBANG.match(first))


def _comparisons(found: Scan) -> Iterator[_Comparison]:
    for string in found.strings:
        for match in _COMPARISON.finditer(string.text):
            line = found.line(string.start + match.start())
            op = cast(Op, match["op"])
            yield _Comparison(match["a"] or match["b"], match["metric"], op, line)


def _references(found: Scan) -> set[str]:
    names: set[str] = set()
    for command in found.commands:
        for word in command:
            for part in word.parts:
                names.update(m["name"] for m in _REFERENCE.finditer(part.text))
    for string in found.strings:
        names.update(m["name"] for m in _REFERENCE.finditer(string.text))
    return names


def _strings(found: Scan) -> Iterator[Located]:
    """The quoted strings and here-document lines that may hold an expression, as the
    programs reading them see them; one level of quoted strings inside a quoted string."""
    for string in found.strings:
        if not MAY_COMPARE.search(string.text):
            continue
        if isinstance(string, Heredoc):
            text, offsets = heredoc_offsets(string.text, string.start, string.expands)
            at = 0
            for line in text.split("\n"):
                if MAY_COMPARE.search(line):
                    yield Located(line, offsets[at : at + len(line)])
                at += len(line) + 1
            continue
        text, offsets = unquote_offsets(string)
        quoted = ("'" in text or '"' in text) and len(text) <= MAX_NESTED_CHARS
        nested = list(_nested(text, offsets)) if quoted else []
        yield Located(text, offsets, hint=not nested)
        yield from nested


def _nested(text: str, offsets: Sequence[int]) -> Iterator[Located]:
    try:
        tokens = lex(text).tokens
    except NestingError:
        return
    for token in tokens:
        for part in token.parts if isinstance(token, Word) else ():
            if part.kind != "plain" and MAY_COMPARE.search(part.text):
                inner, at = unquote_offsets(part)
                yield Located(inner, [offsets[i] for i in at])


def _unbound(
    name: str, path: str, line: int, literal: str, reason: str, *, compared: bool = False
) -> UnboundVariable:
    return UnboundVariable(
        name=name, file=path, line=line, literal=literal, reason=reason, compared=compared
    )


def _variable_gates(
    path: str,
    found: Scan,
    by_name: dict[str, list[Assignment]],
    compared: dict[str, list[_Comparison]],
) -> tuple[list[Gate], list[UnboundVariable]]:
    """Gates of compared variables, and why the others are not."""
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
            numeric = first.literal is not None  # a number reaching a comparison
            literal = first.literal or first.value
            unbound.append(_unbound(name, path, first.line, literal, reason, compared=numeric))
        elif first.literal is None:
            reason = (
                f"compared on line {uses[0].line} but assigned {shown(first.value)}, not a number"
            )
            unbound.append(_unbound(name, path, first.line, first.value, reason))
        else:
            literal = first.literal
            gates += [
                Gate(
                    name=name,
                    file=path,
                    line=first.line,
                    metric=use.metric,
                    op=use.op,
                    value=float(literal),
                    literal=literal,
                    start=first.start,
                    end=first.end,
                    ignored=marked(found, first.line, use.line),
                )
                for use in uses
            ]
    return gates, unbound


def _uncompared(
    path: str, found: Scan, by_name: dict[str, list[Assignment]], compared: set[str]
) -> Iterator[UnboundVariable]:
    """Numeric variables no comparison uses; how the script uses those named like a threshold,
    with the config lines that would declare them."""
    references = _references(found)
    numeric = {n for n, a in by_name.items() if a[0].literal is not None and n not in compared}
    uses = variable_uses(found, {n for n in numeric & references if metric_like(n)})
    for name, assigned in by_name.items():
        literal, line = assigned[0].literal, assigned[0].line
        if name not in numeric or literal is None:
            continue
        if name in uses:
            reason = f"{uses[name]}, not in a '<metric> <op> ${name}' comparison"
            config = config_lines(path, name, guess_metric(name), metric_guessed=True)
            hint = _unbound(name, path, line, literal, reason)
            yield hint.model_copy(update={"config": config if len(assigned) == 1 else ""})
            continue
        where = "used elsewhere in the file" if name in references else "never used in the file"
        reason = f"not used in a '<metric> <op> ${name}' comparison ({where})"
        yield _unbound(name, path, line, literal, reason)


def parse_shell(path: str, text: str, related: Mapping[str, str] | None = None) -> ThresholdFile:
    """Find the gates of a shell script, what could not be bound, and its W&B project.

    ``related``: texts of the repository scripts it runs (``calls.called_scripts``), by path.
    """
    found = scan(path, text)
    by_name: dict[str, list[Assignment]] = {}
    for a in found.assignments:
        by_name.setdefault(a.name, []).append(a)
    compared: dict[str, list[_Comparison]] = {}
    for c in _comparisons(found):
        if (c.metric, c.op) not in {(o.metric, o.op) for o in compared.get(c.name, [])}:
            compared.setdefault(c.name, []).append(c)
    gates, unbound = _variable_gates(path, found, by_name, compared)
    followed, shell_hints = follow(path, text, found, related or {})
    bound = set(compared) | {g.name for g in followed if g.name in by_name}
    hinted = {h.name: h for h in shell_hints if h.name in by_name}
    for u in _uncompared(path, found, by_name, bound):
        better = hinted.get(u.name)
        unbound.append(u if better is None or u.config else better)
    unbound += [h for h in shell_hints if h.name not in by_name]
    in_strings, hints = expression_gates(path, text, _strings(found))
    gates += [g.model_copy(update={"ignored": marked(found, g.line)}) for g in in_strings]
    known = {(g.start, g.metric, g.op) for g in gates}
    names = Counter(g.name for g in gates)
    for g in followed:
        if (g.start, g.metric, g.op) in known:
            continue
        names[g.name] += 1
        count = 1 if g.name in by_name else names[g.name]  # a variable's gates share its name
        gates.append(g if count == 1 else g.model_copy(update={"name": f"{g.name} #{count}"}))
    unbound = [u for u in unbound + hints if u.line not in found.marked]
    gates.sort(key=lambda g: (g.start, g.line))
    unbound.sort(key=lambda u: u.line)
    source, line, notes = named_source(found)
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
    A ``# threshold-bot: ignore`` comment on its line makes it a placeholder.
    """
    found = scan(path, text)
    assigned = [a for a in found.assignments if a.name == variable]
    a = assigned[0] if len(assigned) == 1 else None
    if a is None or a.literal is None:
        if not assigned:
            reason = "is never assigned"
        elif a is None:
            reason = f"is assigned {len(assigned)} times"
        else:
            reason = f"is assigned {shown(a.value)}, not a number"
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
        ignored=marked(found, a.line),
    )
