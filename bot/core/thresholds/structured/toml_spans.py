"""TOML threshold files: the tomlkit document as a tree, and where each value is written.

tomlkit keeps every value as written but no offsets.  ``TomlSpans`` finds them all with
one rendering: each value is replaced by a marker that the text does not hold, the document
rendered, the values put back (the rendering is the text again, checked), and each marker's
place in the rendering, less what the markers before it added, is where its value is.  A
value the batch cannot place is found alone: rendered with just it replaced, it starts
where the rendering first differs from the text.

tomlkit's parser is quadratic on some inputs (long runs of blank lines, of quotes, long
arrays), so TOML files longer than ``MAX_TOML_CHARS`` are refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableSequence
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Bool, Float, Integer, Item, String

from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.structured.tree import Node, Scalar, TomlLeaf

MAX_TOML_CHARS = 128 * 1024
"""Longer TOML threshold files are refused: tomlkit would take seconds to minutes."""
_LOCATABLE = (Integer, Float, String, Bool)


def toml_document(path: str, text: str) -> Any:
    """The tomlkit document; ``ThresholdFileError`` for a file too long or not TOML."""
    if len(text) > MAX_TOML_CHARS:
        reason = f"TOML threshold files are read up to {MAX_TOML_CHARS:,} characters"
        raise ThresholdFileError(path, None, f"{reason}; this one has {len(text):,}")
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        line = getattr(exc, "line", None)
        raise ThresholdFileError(path, line, f"not valid TOML: {exc}") from None


def toml_tree(container: Any) -> Node:
    """tomlkit's tables and arrays as dicts and lists of ``TomlLeaf``s."""
    if isinstance(container, Mapping):
        return {str(k): _child(container, str(k), v) for k, v in container.items()}
    return [_child(container, i, v) for i, v in enumerate(container)]


def _child(parent: Any, key: str | int, item: Any) -> Node:
    if isinstance(item, Mapping | MutableSequence):
        return toml_tree(item)
    if isinstance(item, String):
        value = str(item)
    elif isinstance(item, Bool):
        value = "true" if item.value else "false"
    else:
        value = item.as_string().strip() if isinstance(item, Item) else str(item)
    return TomlLeaf(item, parent, key, value)


class TomlSpans:
    """Where the values of one TOML document are written, all found at the first request."""

    def __init__(self, path: str, text: str, document: Any, root: Node) -> None:
        self.path, self.text, self.document, self.root = path, text, document, root
        self._spans: dict[int, Scalar] | None = None

    def scalar(self, leaf: TomlLeaf, where: str) -> Scalar:
        """``leaf``'s span; ``where`` (its key path) names it in errors."""
        if not isinstance(leaf.item, _LOCATABLE):
            reason = f"{where} is {leaf.value[:40]!r}, not a number"
            raise ThresholdFileError(self.path, None, reason)
        if self._spans is None:
            self._spans = self._all()
        found = self._spans.get(id(leaf))
        return found if found is not None else self._alone(leaf, where)

    def _all(self) -> dict[int, Scalar]:
        leaves = [leaf for leaf in _leaves(self.root) if isinstance(leaf.item, _LOCATABLE)]
        prefix = next(p for p in (f"tbm{n}x" for n in range(100)) if p not in self.text)
        markers: list[str] = []
        try:
            for n, leaf in enumerate(leaves):
                leaf.parent[leaf.key] = f"{prefix}{n}"
                markers.append(leaf.parent[leaf.key].as_string())
            rendered = self.document.as_string()
        finally:
            for leaf in leaves:
                leaf.parent[leaf.key] = leaf.item
        if self.document.as_string() != self.text:  # never seen: then nothing is trusted
            raise ThresholdFileError(self.path, None, "cannot locate the values of this TOML")
        spans: dict[int, Scalar] = {}
        shift = 0
        for found in re.finditer(re.escape(prefix) + r"(\d+)", rendered):
            n = int(found[1])
            leaf, marker = leaves[n], markers[n]
            start = found.start() - marker.index(prefix) - shift
            raw = leaf.item.as_string()
            if self.text.startswith(raw, start):
                spans[id(leaf)] = Scalar(start, start + len(raw), leaf.value)
            shift += len(marker) - len(raw)
        return spans

    def _alone(self, leaf: TomlLeaf, where: str) -> Scalar:
        """One value: rendered with just it replaced, it starts at the first difference."""
        raw = leaf.item.as_string()
        leaf.parent[leaf.key] = raw[:1] != "t"  # "true" / "false": differs from raw at once
        try:
            rendered = self.document.as_string()
        finally:
            leaf.parent[leaf.key] = leaf.item
        start = _common_prefix(self.text, rendered)
        if not self.text.startswith(raw, start):
            raise ThresholdFileError(self.path, None, f"cannot locate the literal of {where!r}")
        return Scalar(start, start + len(raw), leaf.value)


def _leaves(node: Node) -> list[TomlLeaf]:
    out: list[TomlLeaf] = []
    work = [node]
    while work:
        current = work.pop()
        if isinstance(current, dict):
            work.extend(current.values())
        elif isinstance(current, list):
            work.extend(current)
        elif isinstance(current, TomlLeaf):
            out.append(current)
    return out


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix (a binary search of slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low
