"""YAML / JSON / TOML text as a tree whose scalars know where they are written.

``locate(path, text)`` gives a ``Located``: its ``root`` is made of dicts (mapping keys as
their text), lists and leaves; ``scalar(leaf)`` is a leaf's exact span, so that an editor
changes only its characters:

* YAML: ``bot.core.bounded.yaml_tree`` (libyaml when installed; no aliases, nesting at
  most ``MAX_DEPTH`` deep) gives each scalar's start and end offsets; a mapping entry whose
  key is not a scalar is left out;
* JSON: a small position-keeping walk over text that ``json.loads`` accepted (after
  ``json_bounds`` refused deep nesting and long numbers);
* TOML: tomlkit keeps each literal as written; ``toml_spans`` finds where (files longer
  than ``MAX_TOML_CHARS`` are refused: tomlkit's parser is quadratic on some inputs).

Every failure is a ``ThresholdFileError`` naming the file and, when known, the line.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePosixPath
from typing import cast

import yaml

from bot.core.bounded import json_bounds, yaml_problem, yaml_tree
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.structured.toml_spans import TomlSpans, toml_document, toml_tree
from bot.core.thresholds.structured.tree import Leaf, Node, Scalar

YAML_SUFFIXES = frozenset({".yaml", ".yml"})
JSON_SUFFIXES = frozenset({".json"})
TOML_SUFFIXES = frozenset({".toml"})
STRUCTURED_SUFFIXES = YAML_SUFFIXES | JSON_SUFFIXES | TOML_SUFFIXES
_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")
IGNORE_COMMENT = re.compile(r"#\s*threshold-bot:\s*ignore\b")
"""A literal's line with this comment makes its gate a placeholder."""
_JSON_ATOM = re.compile(r"-?(?:Infinity|\d[\d.eE+-]*)|true|false|null|NaN")


@dataclass
class Located:
    """A parsed threshold file: its tree, and the spans and lines of its leaves."""

    path: str
    text: str
    root: Node
    toml: TomlSpans | None = None  # where a TOML file's values are
    comments: bool = True  # whether the format has comments (JSON has none)
    _cursor: tuple[int, int] = field(default=(0, 1), repr=False)  # an offset and its line
    _newlines: list[int] | None = field(default=None, repr=False)  # once asked out of order

    @cached_property
    def ignored_lines(self) -> frozenset[int]:
        """The lines carrying a ``# threshold-bot: ignore`` comment (YAML and TOML), found
        in one pass over the text."""
        if not self.comments or "threshold-bot" not in self.text:
            return frozenset()
        lines, last, line = set(), 0, 1
        for found in IGNORE_COMMENT.finditer(self.text):
            line += self.text.count("\n", last, found.start())
            last = found.start()
            lines.add(line)
        return frozenset(lines)

    def line(self, offset: int) -> int:
        """The 1-based line of a character offset: counted on from the last one asked for
        while they come in the file's order (the usual), else from an index of the lines."""
        if self._newlines is None:
            last, line = self._cursor
            if offset >= last:
                line += self.text.count("\n", last, offset)
                self._cursor = (offset, line)
                return line
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        return bisect_right(self._newlines, offset - 1) + 1

    def scalar(self, leaf: Leaf, where: str) -> Scalar:
        """``leaf``'s span; ``where`` (its key path) names it in errors."""
        if isinstance(leaf, Scalar):
            return leaf
        assert self.toml is not None  # TOML leaves come from TOML files
        return self.toml.scalar(leaf, where)


def suffix_of(path: str) -> str:
    """The file's lower-case suffix (``.yaml``)."""
    return PurePosixPath(path).suffix.lower()


def locate(path: str, text: str) -> Located:
    """The located tree of a YAML / JSON / TOML file (by its suffix)."""
    suffix = suffix_of(path)
    if suffix in YAML_SUFFIXES:
        return Located(path, text, _yaml_tree(path, text))
    if suffix in JSON_SUFFIXES:
        return Located(path, text, _json_tree(path, text), comments=False)
    if suffix in TOML_SUFFIXES:
        document = toml_document(path, text)
        root = toml_tree(document)
        return Located(path, text, root, toml=TomlSpans(path, text, document, root))
    raise ThresholdFileError(
        path, None, "gates by key path need a .yaml, .yml, .json or .toml file"
    )


# --------------------------------------------------------------------------- YAML


def _yaml_tree(path: str, text: str) -> Node:
    """The tree of a YAML document, built straight from its parse events."""
    try:
        return cast(Node, yaml_tree(text, Scalar))
    except yaml.YAMLError as exc:
        line, problem = yaml_problem(exc, text)
        raise ThresholdFileError(path, line, f"not valid YAML: {problem}") from None


# --------------------------------------------------------------------------- JSON


def _ws(text: str, i: int) -> int:
    """Past the JSON whitespace at ``i``."""
    return _WHITESPACE.match(text, i).end()  # type: ignore[union-attr]  # always matches


def _json_value(text: str, i: int) -> tuple[Node, int]:
    """The JSON value at ``i`` (already validated) as a tree."""
    i = _ws(text, i)
    char = text[i]
    if char in "{[":
        closer = "}" if char == "{" else "]"
        items: list[tuple[str, Node]] = []
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
        tree: Node = dict(items) if char == "{" else [v for _, v in items]
        return tree, i + 1
    if char == '"':
        string, end = _DECODER.raw_decode(text, i)
        return Scalar(i, end, string), end
    atom = _JSON_ATOM.match(text, i)
    end = atom.end() if atom else i + 1
    return Scalar(i, end, text[i:end]), end


def check_json(path: str, text: str) -> None:
    """``ThresholdFileError`` (with its line) unless ``text`` is JSON within the bounds of
    ``bot.core.bounded.json_bounds``: what a position-keeping walk may then assume."""
    if (found := json_bounds(text)) is not None:
        line = text.count("\n", 0, found[0]) + 1
        raise ThresholdFileError(path, line, f"not valid JSON: {found[1]}")
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise ThresholdFileError(path, exc.lineno, f"not valid JSON: {exc.msg}") from None
    except RecursionError:  # json_bounds passed it: cannot happen, but never crash
        raise ThresholdFileError(path, None, "not valid JSON: nested too deep") from None


def _json_tree(path: str, text: str) -> Node:
    check_json(path, text)
    return _json_value(text, 0)[0]
