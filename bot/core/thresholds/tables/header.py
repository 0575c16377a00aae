"""Which columns of a CSV threshold table hold what: declared, or recognised by the header.

A declaration (``CsvDecl``) names the key, value and tolerance columns (or, for a table
without a header row, all of its ``columns``).  Without one a header is recognised only
when it is unambiguous, so that a results table is never read as thresholds:

* name columns: ``benchmark``, ``name``, ``test``, ``metric``, ``model``, ``task`` (or
  ``<word>_name``); several are joined with ``/`` into the gate's name and metric;
* exactly one reference column (``expected``, ``reference``, ``baseline``, ``golden`` or
  ``<word>_value``): a two-sided reference gate per row, with the tolerance of a
  ``tolerance`` / ``tol`` / ``noise_margin`` / ``margin`` / ``rtol`` column (relative) and
  of an ``atol`` column (absolute);
* else a ``min`` and / or a ``max`` column (``minimum``, ``min_value`` …): a limit per
  column per row, ``>=`` and ``<=``;
* a ``threshold``, ``value`` or ``target`` column is a limit only beside an ``op`` column
  holding each row's operator; alone its direction is unknown.

Anything else is not recognised; a table with numbers then gets one hint whose config lines
declare it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from bot.core.config import CONFIG_PATH, CsvDecl
from bot.core.models import GateKind, Op, UnboundVariable
from bot.core.thresholds.errors import ThresholdFileError

_NAMES = ("benchmark", "name", "test", "metric", "model", "task")
_REFERENCES = ("expected", "reference", "baseline", "golden")
_LOWER = ("min", "minimum")
_UPPER = ("max", "maximum")
_NEED_OP = ("threshold", "value", "target")
_OP_COLUMNS = frozenset({"op", "operator", "comparison", "comparator"})
_REL = frozenset({"tolerance", "tol", "noise_margin", "margin", "rtol", "rel_tol"})
_ABS = frozenset({"atol", "abs_tol", "absolute_tolerance"})
_OPS: dict[str, Op] = {">=": ">=", ">": ">", "<=": "<=", "<": "<"}
_SIDES: dict[str, Op] = {"lower": ">=", "upper": "<=", "both": "=="}
_NUMBER = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?\s*")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_SHOWN = 20  # columns named in an error

Texts = tuple[str, ...]
"""A row's cells as text."""
Lines = list[tuple[int, Texts]]
"""A table's records: each one's line and cells (blank and comment lines left out)."""


@dataclass(frozen=True)
class Target:
    """A column of gate values: its kind, its op (None: the row's op column), and what is
    appended to the row's name (``.min`` when a row has two gates)."""

    column: int
    kind: GateKind
    op: Op | None
    suffix: str = ""


@dataclass(frozen=True)
class Layout:
    """What each column of a table holds (indices into a row's cells)."""

    names: tuple[str, ...]  # the columns' names, in order
    key: tuple[int, ...]
    targets: tuple[Target, ...]
    metric: str = "{key}"
    rel: int | None = None
    abs: int | None = None
    op_column: int | None = None
    headerless: bool = False  # the first row is data

    @property
    def widest(self) -> int:
        """The highest column index a row must have."""
        used = (*self.key, *(t.column for t in self.targets), self.rel, self.abs, self.op_column)
        return max(c for c in used if c is not None)

    def row_op(self, cells: Texts) -> Op | None:
        """The operator in a row's op column, or None when it holds none."""
        if self.op_column is None:
            return None
        return _OPS.get(cells[self.op_column].strip())


def _normal(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


def _is_data(cells: Texts) -> bool:
    return any(_NUMBER.fullmatch(c) for c in cells)


# --------------------------------------------------------------------------- declared


def declared_layout(path: str, rows: Lines, decl: CsvDecl) -> Layout:
    """The layout ``decl`` declares; ``ThresholdFileError`` naming a missing column."""
    line, first = rows[0] if rows else (None, ())
    names = decl.columns or tuple(c.strip() for c in first)

    def column(name: str) -> int:
        if name in names:
            return names.index(name)
        folded = [n.casefold() for n in names]
        if name.casefold() in folded:
            return folded.index(name.casefold())
        where = "the declared columns" if decl.columns else "the header"
        shown = ", ".join(repr(n[:40]) for n in names[:_SHOWN]) or "nothing"
        shown += ", …" if len(names) > _SHOWN else ""
        message = f"column {name!r} is not in {where} ({shown})"
        if not decl.columns and _is_data(first):
            message += "; the first row looks like data: name the columns with 'columns: [...]'"
        raise ThresholdFileError(path, None if decl.columns else line, message)

    key, value = column(decl.key), column(decl.value)
    tolerance = column(decl.tolerance) if decl.tolerance else None
    for placeholder in _PLACEHOLDER.findall(decl.metric):
        if placeholder != "key":
            column(placeholder)
    return Layout(
        names=names,
        key=(key,),
        targets=(Target(value, decl.kind, _declared_op(path, decl)),),
        metric=decl.metric,
        rel=None if decl.absolute else tolerance,
        abs=tolerance if decl.absolute else None,
        headerless=bool(decl.columns),
    )


def _declared_op(path: str, decl: CsvDecl) -> Op:
    if decl.kind == "reference":
        return _SIDES[decl.sides] if decl.sides else decl.op or "=="
    if decl.op == "==":
        raise ThresholdFileError(path, None, "csv: op '==' is for reference tables")
    if decl.op is not None:
        return decl.op
    value = _normal(decl.value)
    if value in _LOWER or value.startswith("min_"):
        return ">="
    if value in _UPPER or value.startswith("max_"):
        return "<="
    reason = f"csv: a limit table needs 'op' (>=, >, <=, <): {decl.value!r} does not say"
    raise ThresholdFileError(path, None, reason)


# --------------------------------------------------------------------------- detected


def _role(name: str) -> str:
    """What a header cell names: name, reference, lower, upper, need_op, op, rel, abs or ''."""
    word = _normal(name)
    stem = word.removesuffix("_value") if word.endswith("_value") else None
    roles = (
        ("name", word in _NAMES or word.removesuffix("_name") in _NAMES),
        ("reference", word in _REFERENCES or stem in _REFERENCES),
        ("lower", word in _LOWER or stem in _LOWER),
        ("upper", word in _UPPER or stem in _UPPER),
        ("need_op", word in _NEED_OP or stem in _NEED_OP),
        ("op", word in _OP_COLUMNS),
        ("rel", word in _REL),
        ("abs", word in _ABS),
    )
    return next((role for role, found in roles if found), "")


def _limits(names: Texts, lower: list[int], upper: list[int]) -> tuple[Target, ...]:
    """A ``>=`` gate for the min column and a ``<=`` one for the max column (named
    ``NAME.min`` / ``NAME.max`` when a row has both); none when either is ambiguous."""
    if len(lower) > 1 or len(upper) > 1:
        return ()
    both = bool(lower and upper)
    ops: tuple[tuple[list[int], Op], ...] = ((lower, ">="), (upper, "<="))
    return tuple(
        Target(c, "limit", op, f".{_normal(names[c])}" if both else "")
        for cols, op in ops
        for c in cols
    )


def detected_layout(rows: Lines) -> Layout | None:
    """The layout an unambiguous header gives, or None (``_role`` for each column)."""
    if not rows or _is_data(rows[0][1]):
        return None
    names = tuple(c.strip() for c in rows[0][1])
    by_role: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        by_role.setdefault(_role(name), []).append(index)

    def one(role: str) -> int | None:
        found = by_role.get(role, [])
        return found[0] if len(found) == 1 else None

    key = tuple(by_role.get("name", ()))
    values = [c for r in ("reference", "lower", "upper", "need_op") for c in by_role.get(r, [])]
    if not key or not values or len(by_role.get("op", [])) > 1:
        return None
    targets: tuple[Target, ...]
    if (op_column := one("op")) is not None:
        targets = (Target(values[0], "limit", None),) if len(values) == 1 else ()
    elif (reference := one("reference")) is not None and len(values) == 1:
        targets = (Target(reference, "reference", "=="),)
    elif not by_role.get("reference") and not by_role.get("need_op"):
        targets = _limits(names, by_role.get("lower", []), by_role.get("upper", []))
    else:
        targets = ()
    if not targets:
        return None
    return Layout(
        names=names, key=key, targets=targets, rel=one("rel"), abs=one("abs"), op_column=op_column
    )


# --------------------------------------------------------------------------- hint


def hint(path: str, rows: Lines) -> UnboundVariable | None:
    """One hint for a table not recognised: the config lines declaring its first text
    column as the key and its first number column as a reference (the metric made of the
    text columns before it, when there are several); None without numbers."""
    headerless = bool(rows) and _is_data(rows[0][1])
    data = rows if headerless else rows[1:]
    first = next(((line, r) for line, r in data if _is_data(r)), None)
    if first is None:
        return None
    line, row = first
    value = next(i for i, c in enumerate(row) if _NUMBER.fullmatch(c))
    texts = [i for i, c in enumerate(row) if c.strip() and not _NUMBER.fullmatch(c)]
    before = [i for i in texts if i < value]
    if not texts:
        return None
    key = (before or texts)[0]
    width = max(len(r) for _, r in data)
    names = (
        tuple(f"column{i + 1}" for i in range(width))
        if headerless
        else tuple(c.strip() for c in rows[0][1])
    )
    if max(key, value) >= len(names):
        return None
    fields = [f"key: {json.dumps(names[key])}", f"value: {json.dumps(names[value])}"]
    if len(before) > 1 and not any(c in names[i] for i in before for c in "{}"):
        fields.append(f"metric: {json.dumps('/'.join(f'{{{names[i]}}}' for i in before))}")
    if headerless:
        fields.insert(0, f"columns: [{', '.join(json.dumps(n) for n in names)}]")
    entry = f"    csv: {{{', '.join(fields)}, kind: reference}}"
    config = "\n".join((f"# {CONFIG_PATH}", "files:", f"  - path: {json.dumps(path)}", entry))
    reason = (
        "a table without a header row: declare its columns and which holds the threshold (csv:)"
        if headerless
        else "the header does not say which column holds the threshold: declare it (csv:)"
    )
    return UnboundVariable(
        name=row[key].strip(),
        file=path,
        line=line,
        literal=row[value].strip(),
        reason=reason,
        config=config,
    )
