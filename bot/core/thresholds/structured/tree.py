"""The tree of a YAML / JSON / TOML threshold file: dicts (mapping keys as their text),
lists and leaves that know where they are written (``located`` builds it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias


@dataclass(slots=True)
class Scalar:
    """A scalar's span in the text (quotes included when it is quoted) and its value as text
    (a string unquoted and unescaped; a number, boolean or null as written).  Not frozen:
    a frozen dataclass takes twice as long to build, and a large file has many; nothing
    changes one."""

    start: int
    end: int
    value: str


@dataclass(frozen=True, slots=True, eq=False)
class TomlLeaf:
    """A TOML value, located on demand (``Located.scalar``): tomlkit keeps no offsets."""

    item: Any  # the tomlkit item
    parent: Any  # the tomlkit container holding it
    key: str | int
    value: str


Leaf: TypeAlias = Scalar | TomlLeaf
Node: TypeAlias = dict[str, "Node"] | list["Node"] | Leaf
