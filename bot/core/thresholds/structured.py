"""Gates in YAML / JSON / TOML files, declared in the repository config by key path.

Each ``GateDecl.key`` (``a.b.0.c``; list items by index; a component with dots in
``"double quotes"``) is located in the file together with the exact character span of
its scalar, so that the editor changes only the literal:

* YAML: PyYAML's composer gives every node's ``start_mark`` / ``end_mark``;
* JSON: a small position-keeping walk over text that ``json.loads`` accepted;
* TOML: tomlkit keeps the literal as written; its offset is where the document, rendered
  with that one value replaced, first differs from the original.

A quoted numeric string (``"0.56"``) is accepted, its span excluding the quotes.
``parse_structured`` returns one gate per declared gate, in declaration order.

The file is hostile (a pull request writes it): YAML aliases, nesting deeper than
``MAX_DEPTH`` and numbers of more than ``MAX_DIGITS`` digits are refused before anything
is built (``bot.core.bounded``; tomlkit refuses TOML nested more than 100 levels), each as
a ``ThresholdFileError`` naming the line.  tomlkit's parser is quadratic on some inputs
(long runs of blank lines, of quotes, long arrays), so TOML files longer than
``MAX_TOML_CHARS`` are refused.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, MutableSequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import tomlkit
import yaml
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Float, Integer, String

from bot.core.bounded import MAX_DIGITS, BoundedLoader, json_bounds, yaml_problem
from bot.core.config import FileDecl, GateDecl, RepoConfig
from bot.core.models import Gate
from bot.core.thresholds.errors import ThresholdFileError

YAML_SUFFIXES = frozenset({".yaml", ".yml"})
JSON_SUFFIXES = frozenset({".json"})
TOML_SUFFIXES = frozenset({".toml"})
MAX_TOML_CHARS = 128 * 1024
"""Longer TOML threshold files are refused: tomlkit would take seconds to minutes."""
STRUCTURED_SUFFIXES = YAML_SUFFIXES | JSON_SUFFIXES | TOML_SUFFIXES
_NUMERIC = re.compile(r"[+-]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?")
_KEY_PART = re.compile(r'"(?P<quoted>[^"]*)"|(?P<plain>[^."][^.]*)')
_DECODER = json.JSONDecoder()
_SHOWN = 60  # characters of a value quoted in an error
_JSON_ATOM = re.compile(r"-?(?:Infinity|\d[\d.eE+-]*)|true|false|null|NaN")


@dataclass(frozen=True)
class Scalar:
    """A scalar's source span and text (quotes included when it is quoted)."""

    start: int
    end: int
    text: str


class _Missing(LookupError):
    """A key path component that is not in the file; carries the path found so far."""


def split_key(key: str) -> list[str]:
    """Split a dotted key path; ``"..."`` protects dots inside one component."""
    parts: list[str] = []
    pos = 0
    while pos <= len(key):
        match = _KEY_PART.match(key, pos)
        end = match.end() if match else pos
        if match is None or (end < len(key) and key[end] != "."):
            raise ValueError(f"invalid key path {key!r}")
        parts.append(match["quoted"] if match["quoted"] is not None else match["plain"])
        pos = end + 1
    return parts


def _descend(container: Any, part: str, done: list[str]) -> Any:
    """One key path step into a mapping or list; ``_Missing`` names where it stops."""
    if isinstance(container, Mapping) and part in container:
        done.append(part)
        return container[part]
    if isinstance(container, MutableSequence) and part.isdigit() and int(part) < len(container):
        done.append(part)
        return container[int(part)]
    where = ".".join(done) or "the top level"
    if isinstance(container, Mapping | MutableSequence):
        raise _Missing(f"key {part!r} not found under {where}")
    raise _Missing(f"{where} is a single value, it has no key {part!r}")


# --------------------------------------------------------------------------- YAML


def _yaml_tree(node: yaml.Node, text: str) -> Any:
    """Composed YAML nodes as dicts, lists and ``Scalar``s (keys as their text)."""
    if isinstance(node, yaml.MappingNode):
        pairs = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
        return {str(k.value): _yaml_tree(v, text) for k, v in pairs}
    if isinstance(node, yaml.SequenceNode):
        return [_yaml_tree(v, text) for v in node.value]
    start, end = node.start_mark.index, node.end_mark.index
    return Scalar(start, end, text[start:end])


def _yaml_locator(path: str, text: str) -> Any:
    try:
        root = yaml.compose(text, Loader=BoundedLoader)
    except yaml.YAMLError as exc:
        line, problem = yaml_problem(exc, text)
        raise ThresholdFileError(path, line, f"not valid YAML: {problem}") from None
    return {} if root is None else _yaml_tree(root, text)


# --------------------------------------------------------------------------- JSON


def _ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\n\r":
        i += 1
    return i


def _json_value(text: str, i: int) -> tuple[Any, int]:
    """Parse the JSON value at ``i`` (already validated) into dicts, lists and ``Scalar``s."""
    i = _ws(text, i)
    char = text[i]
    if char in "{[":
        closer = "}" if char == "{" else "]"
        items: list[tuple[str, Any]] = []
        i = _ws(text, i + 1)
        while text[i] != closer:
            key = ""
            if char == "{":
                key, i = _DECODER.raw_decode(text, i)
                i = _ws(text, i) + 1  # past the colon
            value, i = _json_value(text, i)
            items.append((key, value))
            i = _ws(text, i)
            i = _ws(text, i + 1) if text[i] == "," else i
        tree: Any = dict(items) if char == "{" else [v for _, v in items]
        return tree, i + 1
    if char == '"':
        _, end = _DECODER.raw_decode(text, i)
        return Scalar(i, end, text[i:end]), end
    atom = _JSON_ATOM.match(text, i)
    end = atom.end() if atom else i + 1
    return Scalar(i, end, text[i:end]), end


def _json_locator(path: str, text: str) -> Any:
    if (found := json_bounds(text)) is not None:
        line = text.count("\n", 0, found[0]) + 1
        raise ThresholdFileError(path, line, f"not valid JSON: {found[1]}")
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise ThresholdFileError(path, exc.lineno, f"not valid JSON: {exc.msg}") from None
    return _json_value(text, 0)[0]


# --------------------------------------------------------------------------- TOML


def _toml_scalar(path: str, text: str, parts: list[str]) -> Scalar:
    """Locate a TOML value by replacing it and diffing the rendering against the original."""
    if len(text) > MAX_TOML_CHARS:
        reason = f"TOML threshold files are read up to {MAX_TOML_CHARS:,} characters"
        raise ThresholdFileError(path, None, f"{reason}; this one has {len(text):,}")
    try:
        doc = tomlkit.parse(text)
    except TOMLKitError as exc:
        line = getattr(exc, "line", None)
        raise ThresholdFileError(path, line, f"not valid TOML: {exc}") from None
    done: list[str] = []
    parent: Any = doc
    for part in parts[:-1]:
        parent = _descend(parent, part, done)
    item = _descend(parent, parts[-1], done)
    if not isinstance(item, Integer | Float | String):
        raise _Missing(f"{'.'.join(parts)} is {str(item)[:40]!r}, not a number")
    raw = item.as_string()
    last = int(parts[-1]) if isinstance(parent, MutableSequence) else parts[-1]
    starts = []
    for marker in (True, False):  # they differ in their first character: one differs from raw
        parent[last] = marker
        pairs = zip(text, doc.as_string(), strict=False)
        starts.append(next((i for i, (a, b) in enumerate(pairs) if a != b), len(text)))
    start = min(starts)
    if text[start : start + len(raw)] != raw:
        raise ThresholdFileError(path, None, f"cannot locate the literal of {'.'.join(parts)!r}")
    return Scalar(start, start + len(raw), raw)


# --------------------------------------------------------------------------- gates


def _literal(path: str, text: str, key: str, scalar: Scalar) -> tuple[str, int, int]:
    """The numeric literal inside a scalar (unquoted) and its span."""
    raw, start, end = scalar.text, scalar.start, scalar.end
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        raw, start, end = raw[1:-1], start + 1, end - 1
    line = text.count("\n", 0, start) + 1
    shown = repr(raw if len(raw) <= _SHOWN else raw[:_SHOWN] + "…")
    if sum(c.isdigit() for c in raw) > MAX_DIGITS:
        raise ThresholdFileError(path, line, f"{key}: {shown} has more than {MAX_DIGITS} digits")
    if not _NUMERIC.fullmatch(raw) or not math.isfinite(float(raw.replace("_", ""))):
        raise ThresholdFileError(path, line, f"{key}: {shown} is not a number")
    return raw, start, end


def _locate(path: str, text: str, parts: list[str], tree: Any) -> Scalar:
    node, done = tree, list[str]()
    for part in parts:
        node = _descend(node, part, done)
    if not isinstance(node, Scalar):
        kind = "mapping" if isinstance(node, dict) else "list"
        raise _Missing(f"{'.'.join(parts)} is a {kind}, not a number")
    return node


def parse_structured(
    path: str, text: str, decl: FileDecl, config: RepoConfig
) -> list[tuple[int, Gate]]:
    """The gates ``decl`` declares in a YAML / JSON / TOML file, each with the index of its
    ``GateDecl``; ``ThresholdFileError`` if one is missing."""
    suffix = PurePosixPath(path).suffix.lower()
    if suffix not in STRUCTURED_SUFFIXES:
        raise ThresholdFileError(
            path, None, "gates by key path need a .yaml, .yml, .json or .toml file"
        )
    tree = _yaml_locator(path, text) if suffix in YAML_SUFFIXES else None
    if suffix in JSON_SUFFIXES:
        tree = _json_locator(path, text)
    return [(i, _gate(path, text, suffix, gate, tree)) for i, gate in enumerate(decl.gates)]


def _gate(path: str, text: str, suffix: str, decl: GateDecl, tree: Any) -> Gate:
    try:
        parts = split_key(decl.key)
        if suffix in TOML_SUFFIXES:
            scalar = _toml_scalar(path, text, parts)
        else:
            scalar = _locate(path, text, parts, tree)
    except (_Missing, ValueError) as exc:
        if isinstance(exc, ThresholdFileError):
            raise
        raise ThresholdFileError(path, None, f"gate {decl.name or decl.key!r}: {exc}") from None
    literal, start, end = _literal(path, text, decl.key, scalar)
    return Gate(
        name=decl.name or decl.key,
        file=path,
        line=text.count("\n", 0, start) + 1,
        metric=decl.metric or decl.key,
        op=decl.op or ">=",
        value=float(literal.replace("_", "")),
        literal=literal,
        start=start,
        end=end,
    )
