"""Literals inside expression strings of YAML / JSON files (issue 12, part 5).

In YAML and JSON files (not TOML) every string value is a candidate expression
(``checks: ['median(data["train/loss"]) < 0.69']``): plain, single- and double-quoted
one-line scalars and the lines of ``|`` block scalars (folded and multi-line flow scalars
are not read).  ``expression_gates`` turns them into gates, each with the span of its
literal in the file; a YAML gate whose line ends with ``# threshold-bot: ignore`` is a
placeholder.  A file with no line holding both a comparison with a number and a sign
of a metric (a quoted subscript, a path with a slash, a call) is not parsed at all.

YAML is read as tokens (libyaml's scanner when PyYAML has it), never composed: no alias
is expanded and nothing recurses.  JSON is validated by ``json.loads`` after the bounds
check (``bot.core.bounded``); its strings are then found by one linear regex pass.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import yaml

from bot.core.bounded import BoundedLoader, yaml_problem
from bot.core.models import ThresholdFile
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.expressions.gates import (
    MAY_COMPARE,
    Located,
    any_plausible,
    expression_gates,
    mark_ignored,
)
from bot.core.thresholds.shell.quoting import decode
from bot.core.thresholds.structured.located import check_json

_LIBYAML: Any = getattr(yaml.cyaml, "CParser", None) if yaml.__with_libyaml__ else None
"""libyaml's scanner, when PyYAML has it: ten times faster than its own."""
_JSON_STRING = re.compile(r'(?P<string>"[^"\\]*+(?:\\.[^"\\]*+)*+")(?P<key>\s*:)?')
_JSON_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)")
_YAML_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.DOTALL)
_YAML_SIMPLE = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v"}
_YAML_SIMPLE |= {"f": "\f", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\"}
_YAML_SIMPLE |= {"N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029"}


def structured_expressions(path: str, text: str) -> ThresholdFile:
    """Gates in the expression strings of a YAML / JSON file's string values.

    ``ThresholdFileError`` when the file is not valid YAML / JSON (only checked when it has
    something that looks like a comparison with a number: other files are not parsed).
    """
    suffix = PurePosixPath(path).suffix.lower()
    if suffix not in (".yaml", ".yml", ".json") or not any_plausible(text):
        return ThresholdFile(path=path)
    strings = _json_strings(path, text) if suffix == ".json" else _yaml_strings(path, text)
    gates, hints = expression_gates(path, text, strings)
    if suffix != ".json":
        gates = mark_ignored(gates, text)
    return ThresholdFile(path=path, gates=tuple(gates), unbound=tuple(hints))


def _json_strings(path: str, text: str) -> list[Located]:
    check_json(path, text)
    strings, key = [], ""
    for match in _JSON_STRING.finditer(text):  # valid JSON: every quote opens or closes one
        body, at = match["string"][1:-1], match.start("string") + 1
        if match["key"]:
            key = json.loads(match["string"])
            continue
        if not MAY_COMPARE.search(body):
            continue
        before = match.start() - 1
        while before >= 0 and text[before] in " \t\r\n":
            before -= 1
        owner = key if before >= 0 and text[before] == ":" else ""
        value, offsets = decode(body, at, _JSON_ESCAPE, _json_char)
        strings.append(Located(value, offsets, owner))
    return strings


def _json_char(match: re.Match[str]) -> str:
    decoded: str = json.loads(f'"{match[0]}"')
    return decoded


def _yaml_tokens(path: str, text: str) -> Iterator[Any]:
    try:
        if _LIBYAML is not None:
            scanner = _LIBYAML(text)
            while (token := scanner.get_token()) is not None:
                yield token
        else:  # pragma: no cover
            yield from yaml.scan(text, Loader=BoundedLoader)
    except yaml.YAMLError as exc:
        line, problem = yaml_problem(exc, text)
        raise ThresholdFileError(path, line, f"not valid YAML: {problem}") from None


def _yaml_strings(path: str, text: str) -> list[Located]:
    strings: list[Located] = []
    key, after_key, after_value = "", False, False
    for token in _yaml_tokens(path, text):
        if isinstance(token, yaml.KeyToken):
            after_key = True
            continue
        if isinstance(token, yaml.ScalarToken):
            if after_key:
                key = str(token.value)
            else:
                owner = key if after_value else ""
                strings += _yaml_scalar(text, token, owner)
        after_key, after_value = False, isinstance(token, yaml.ValueToken)
    return strings


def _yaml_scalar(text: str, token: Any, key: str) -> list[Located]:
    """The string of a one-line scalar, or the lines of a ``|`` block, with their offsets."""
    start, end = token.start_mark.index, token.end_mark.index
    style, value = token.style, token.value
    if not MAY_COMPARE.search(value):
        return []
    if style == "|":
        return list(_block_lines(text, start, end, value, key))
    if style in ("'", '"'):
        escape = re.compile("''") if style == "'" else _YAML_ESCAPE
        decoded, offsets = decode(text[start + 1 : end - 1], start + 1, escape, _yaml_char)
    elif style is None or style == "":
        decoded, offsets = text[start:end], list(range(start, end))
    else:
        return []
    return [Located(decoded, offsets, key)] if decoded == value and "\n" not in decoded else []


def _yaml_char(match: re.Match[str]) -> str:
    if match[0] == "''":
        return "'"
    if len(match[0]) == 2:
        return _YAML_SIMPLE.get(match[0][1], match[0])
    code = int(match[0][2:], 16)
    return chr(code) if code <= 0x10FFFF else match[0]


def _block_lines(text: str, start: int, end: int, value: str, key: str) -> Iterator[Located]:
    cursor = text.find("\n", start, end) + 1
    for line in value.split("\n"):
        at = text.find(line, cursor, end) if line.strip() and cursor > 0 else -1
        if at >= 0:
            yield Located(line, range(at, at + len(line)), key)
            cursor = at + len(line)
