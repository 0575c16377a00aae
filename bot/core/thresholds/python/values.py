"""What a Python expression is worth without running it: a number, a table of numbers, a
record, a string, or unknown (``python_resolver`` reads expressions into these).

A value read through a constant carries the constant's name (``ACC_MIN``,
``THRESHOLDS[gsm8k]``, ``ACCURACY_CONFIGS[llama].expected_value``): the gate's name.
Loops, ``pytest.mark.parametrize`` and a helper's call sites bind variables per iteration
(``Group``).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TypeAlias

from bot.core.models import Span
from bot.core.thresholds.python.scope import Scope

MAX_ENTRIES = 10_000  # entries of a list or dict read (more: unknown)


@dataclass(frozen=True, slots=True)
class Num:
    """A numeric literal (``value`` None: a ``nan`` golden value) and the name it has."""

    value: float | None
    span: Span
    name: str = ""  # the gate's name when bound through a constant or a parametrized case
    const: str = ""  # the module / class constant it is read from (for hints)
    origin: str = ""  # the other file of the repository it is written in ("": this one)


@dataclass(frozen=True, slots=True)
class Table:
    """A list or dict of numbers (possibly nested): golden values or thresholds by key."""

    entries: tuple[tuple[str | int, Value], ...]
    listed: bool = False  # a list: keys are positions
    name: str = ""
    const: str = ""
    index: dict[str | int, Value] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        self.index.update(self.entries)

    def get(self, key: str | int) -> Value | None:
        """The entry at ``key`` (a list's position may count from the end)."""
        if self.listed and isinstance(key, int) and key < 0:
            key += len(self.entries)
        return self.index.get(key)


@dataclass(frozen=True, slots=True)
class Record:
    """Named fields of mixed values: a parametrized case ``Config(name="x", expected=0.7)``."""

    fields: tuple[tuple[str, Value], ...]
    name: str = ""
    const: str = ""

    def label(self) -> str | None:
        return next((v for _, v in self.fields if isinstance(v, str)), None)


@dataclass(frozen=True, slots=True)
class Choice:
    """A conditional expression's values (``0.65 if on_tpu() else 0.78``): per branch the
    condition under which it is taken (``on_tpu()``, ``not on_tpu()``) and its value; nested
    conditionals are flattened, at most ``MAX_BRANCHES`` branches (more: unknown)."""

    branches: tuple[tuple[str, Value], ...]


MAX_BRANCHES = 16
Value: TypeAlias = Num | Table | Record | Choice | str | int  # int: a loop variable's key


@dataclass(frozen=True, slots=True)
class Group:
    """One loop or parametrization: per iteration a label, a step (int keys) and values."""

    labels: tuple[str, ...]
    steps: tuple[int | None, ...]
    values: Mapping[str, tuple[Value | Alias | None, ...]] = field(hash=False, compare=False)
    table: str = ""  # the constant iterated over, if any ("EXPECTED_LOSS")
    contexts: tuple[str, ...] = ()  # call sites: the calling test, per iteration


@dataclass(frozen=True, slots=True)
class Alias:
    """A variable standing for an expression: the value variable of ``for k, v in
    X.items()`` over an unknown X (``X[k]``), or a helper's parameter at one call site
    (read in the caller's ``scope``)."""

    node: ast.expr
    scope: Scope | None = None


FREE = "free"  # a key variable over an unknown mapping (bound later by a table it indexes)
Binding: TypeAlias = Group | Alias | str | None  # None: an unknown local


@dataclass(frozen=True, slots=True)
class At:
    """Where an expression is read: its scope, loop bindings and the iteration."""

    scope: Scope
    env: dict[str, Binding] = field(default_factory=dict, hash=False, compare=False)
    group: Group | None = None
    index: int = 0

    def bound(self, name: str) -> Binding | None:
        return self.env.get(name)


def named(value: Value, name: str, const: str) -> Value:
    """``value`` with the names of its unnamed parts (``T[k]``, ``R.field``)."""
    if isinstance(value, Num):
        return value if value.name else replace(value, name=name, const=const)
    if isinstance(value, Table):
        if value.name:
            return value
        entries = tuple((k, named(v, f"{name}[{k}]", const)) for k, v in value.entries)
        return Table(entries, value.listed, name, const)
    if isinstance(value, Record):
        if value.name:
            return value
        fields = tuple((k, named(v, f"{name}.{k}", const)) for k, v in value.fields)
        return Record(fields, name, const)
    if isinstance(value, Choice):
        return Choice(tuple((c, named(v, name, const)) for c, v in value.branches))
    return value


def field_of(record: Record, name: str) -> Value | None:
    return next((v for k, v in record.fields if k == name), None)


def entry_of(base: Value | None, key: str | int) -> Value | None:
    if isinstance(base, Record):
        return field_of(base, str(key))
    return base.get(key) if isinstance(base, Table) else None


def flatten(
    table: Table, prefix: tuple[str | int, ...] = ()
) -> list[tuple[tuple[str | int, ...], Num]]:
    """Every number of a (nested) table with its key path."""
    found: list[tuple[tuple[str | int, ...], Num]] = []
    for key, value in table.entries:
        if isinstance(value, Num):
            found.append(((*prefix, key), value))
        elif isinstance(value, Table) and len(prefix) < 8:
            found += flatten(value, (*prefix, key))
    return found
