"""Gates in YAML / JSON / TOML files, declared in the repository config by key path or pattern.

Each ``GateDecl.key`` is a plain key path (``a.b.0.c``) or a pattern (``*.min_al``,
``tasks[name=gsm8k].metrics[*].value``: ``bot.core.thresholds.structured.patterns``).  Every literal
it names becomes a gate with its exact span (``located``, ``literals``), so that the editor
changes only the literal.  Per declaration:

* ``metric`` and ``name`` are templates over the match (``templates``: ``{1}``, ``{key}``,
  ``{.field}``, ``{..field}``); ``metric_from: F`` is ``{.F}``; a gate's name is by default
  the key path of its literal (the plain key path as written, for one);
* ``kind`` / ``op`` / ``sides`` / ``tolerance`` default to the file entry's (and the
  tolerance to the config's); a reference's ``sides`` (else its ``op``, else both) give its
  operator; a tolerance part given as a key names a literal beside the gate's, else in an
  enclosing mapping up to the top level, and its span is kept for ``/rebaseline
  --tolerance``;
* ``coupled`` literals (``factor`` x the gate's value) are found the same way;
* ``ignore: true``, or a ``# threshold-bot: ignore`` comment on the literal's line, makes
  the gate a placeholder; a placeholder that is not a number (``nan``, ``TBD``) gives none.

Errors are ``ThresholdFileError``s: a plain key path that is missing (``gate 'X': key 'y'
not found under a.b``), a pattern that matches nothing (``files.0.gates.1: pattern 'x.*.y'
matches nothing in F``), a match that is not a number, a template field or a tolerance or
coupled key that names nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from bot.core.bounded import collector_paused
from bot.core.config import FileDecl, GateDecl, RepoConfig
from bot.core.models import SIDES_OPS, Coupled, CurvePoint, Gate, GateKind, Op, Span, Tolerance
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.structured.entries import Entry, entry_of
from bot.core.thresholds.structured.literals import (
    IGNORED_IN_CONFIG,
    IGNORED_IN_FILE,
    NUMERIC,
    Literal,
    literal_at,
    literal_span,
    marked_ignore,
    number,
)
from bot.core.thresholds.structured.located import (
    JSON_SUFFIXES,
    STRUCTURED_SUFFIXES,
    TOML_SUFFIXES,
    YAML_SUFFIXES,
    Located,
    locate,
)
from bot.core.thresholds.structured.patterns import (
    Match,
    child,
    find,
    leaf_of,
    leaf_value,
    lookup,
    parse_pattern,
)
from bot.core.thresholds.structured.templates import KeyPaths, Part, expand, parse_template
from bot.core.thresholds.structured.toml_spans import MAX_TOML_CHARS
from bot.core.thresholds.structured.tree import Node

_NAN = frozenset({"nan", "null", "~"})  # a golden list's step that is not checked
__all__ = [  # the suffixes and the TOML bound are discovery's too
    "JSON_SUFFIXES",
    "MAX_TOML_CHARS",
    "STRUCTURED_SUFFIXES",
    "TOML_SUFFIXES",
    "YAML_SUFFIXES",
    "coupled_notes",
    "parse_structured",
]


def parse_structured(
    path: str, text: str, decl: FileDecl, config: RepoConfig
) -> list[tuple[int, Gate]]:
    """The gates ``decl`` declares in a YAML / JSON / TOML file, each with the index of its
    ``GateDecl``, in declaration order and, per pattern, in the file's order."""
    with collector_paused():
        located = locate(path, text)
        where = _where(decl, config)
        paths = KeyPaths()
        gates: list[tuple[int, Gate]] = []
        for index, gate_decl in enumerate(decl.gates):
            declared = _Declared(located, paths, decl, gate_decl, config, f"{where}gates.{index}")
            gates += [(index, gate) for gate in declared.gates()]
        return gates


def _where(decl: FileDecl, config: RepoConfig) -> str:
    """``files.N.`` of the entry in the config (``""`` when it is not there)."""
    for index, entry in enumerate(config.files):
        if entry is decl:
            return f"files.{index}."
    for index, entry in enumerate(config.files):
        if entry == decl:
            return f"files.{index}."
    return ""


def _plain_parts(key: str) -> list[str]:
    """A plain key path's parts; ``ValueError`` for a pattern or an invalid path."""
    pattern = parse_pattern(key)
    if not pattern.exact:
        raise ValueError(f"{key!r} must be a plain key path, not a pattern")
    return [s.text if s.kind == "key" else str(s.index) for s in pattern.steps]


class _Declared:
    """One gate declaration, read against the file."""

    def __init__(
        self,
        located: Located,
        paths: KeyPaths,
        file: FileDecl,
        decl: GateDecl,
        config: RepoConfig,
        where: str,
    ) -> None:
        self.located, self.paths, self.decl, self.where = located, paths, decl, where
        label = decl.name or decl.key
        try:
            self.pattern = parse_pattern(decl.key)
        except ValueError as exc:
            raise ThresholdFileError(located.path, None, f"gate {label!r}: {exc}") from None
        field = decl.metric_from or ""
        template = decl.metric or (f"{{{field}}}" if field.startswith(".") else f"{{.{field}}}")
        self.metric = self._template("metric", template)
        self.name = self._template("name", decl.name) if decl.name else None
        self.kind: GateKind = decl.kind or file.kind or "limit"
        sides = decl.sides or (None if decl.op else file.sides)
        reference_op: Op = SIDES_OPS[sides] if sides else (decl.op or "==")
        self.op: Op = reference_op if self.kind == "reference" else (decl.op or ">=")
        self.tolerance = decl.tolerance or file.tolerance or config.tolerance
        self.steps = file.steps
        if self.kind == "limit":
            self.tolerance = None
        self._extra: dict[str, object] = {"pattern": where} if where.startswith("files.") else {}
        if self.kind != "limit":
            self._extra["kind"] = self.kind
        self._found: dict[tuple[int, str], tuple[Span, str]] = {}
        self._tolerances: dict[tuple[int | None, int | None], Tolerance] = {}

    def _template(self, what: str, template: str) -> list[Part]:
        try:
            return parse_template(template, self.pattern.captures)
        except ValueError as exc:
            raise ThresholdFileError(
                self.located.path, None, f"{self.where}: {what}: {exc}"
            ) from None

    def _fail(self, match: Match | None, reason: str) -> ThresholdFileError:
        leaf = leaf_of(match.node) if match is not None else None
        line = self.located.line(self.located.scalar(leaf, "").start) if leaf else None
        return ThresholdFileError(self.located.path, line, f"{self.where}: {reason}")

    def gates(self) -> list[Gate]:
        """A gate per literal the key names."""
        if self.pattern.exact:
            return [self._gate(self._exact(), self.decl.name or self.decl.key, self.decl.key)]
        matches = find(self.pattern, self.located.root)
        if not matches:
            raise self._fail(
                None, f"pattern {self.decl.key!r} matches nothing in {self.located.path}"
            )
        gates = []
        placeholders = self.decl.ignore or bool(self.located.ignored_lines)
        for match in matches:
            path = self.paths.of(match.trail)
            if not (placeholders and self._placeholder_without_number(match, path)):
                name = self._expand(self.name, match, path) if self.name else path
                gates.append(self._gate(match, name, path))
        if self.name and len({g.name for g in gates}) < len(gates):
            raise self._fail(
                None,
                f"name {self.decl.name!r} is the same for {len(gates)} literals: "
                "give it a placeholder ({1}, {key}, {.field}) or leave it out",
            )
        return gates

    def _placeholder_without_number(self, match: Match, path: str) -> bool:
        """A match marked as a placeholder (``ignore``, or the comment) that is not a number
        (``nan``, ``TBD``): no gate, and no error either."""
        leaf = leaf_of(match.node)
        if leaf is None or NUMERIC.fullmatch(leaf.value) is not None:
            return False
        start = self.located.scalar(leaf, path).start
        return self.decl.ignore or marked_ignore(self.located, self.located.line(start))

    def _exact(self) -> Match:
        """The node at a plain key path; ``gate 'X': key 'y' not found under a.b`` if not."""
        node: Node = self.located.root
        done: list[str] = []
        trail: list[tuple[object, str | int]] = []
        for step in self.pattern.steps:
            part = step.text if step.kind == "key" else str(step.index)
            found = child(node, part)
            if found is None:
                where = ".".join(done) or "the top level"
                reason = (
                    f"key {part!r} not found under {where}"
                    if isinstance(node, dict | list)
                    else f"{where} is a single value, it has no key {part!r}"
                )
                label = self.decl.name or self.decl.key
                raise ThresholdFileError(self.located.path, None, f"gate {label!r}: {reason}")
            trail.append((node, found[1]))
            node = found[0]
            done.append(part)
        return Match(node, tuple(trail), ())

    def _expand(self, parts: list[Part], match: Match, path: str) -> str:
        try:
            return expand(parts, match, leaf_value)
        except LookupError as exc:
            raise self._fail(match, f"{path}: {exc.args[0]}") from None

    def _gate(self, match: Match, name: str, path: str, named_by: Match | None = None) -> Gate:
        """The gate on the literal ``match`` reaches (on an entry's value, for an entry); its
        metric from the template over ``named_by`` (default: ``match``)."""
        entry = entry_of(match.node) if type(match.node) is dict else None
        if entry is not None:
            return self._entry_gate(match, name, entry)
        if self.kind == "reference" and type(match.node) is list and len(match.node) > 1:
            return self._curve_gate(match, name, path)
        span = literal_at(self.located, match.node, path)
        ignored = IGNORED_IN_CONFIG if self.decl.ignore else ""
        if not ignored and marked_ignore(self.located, span.line):
            ignored = IGNORED_IN_FILE
        # only what differs from the defaults: a gate given every field takes twice as long
        extra = dict(self._extra)
        if self.tolerance is not None and (tolerance := self._tolerance(match, path)):
            extra["tolerance"] = tolerance
        if ignored:
            extra["ignored"] = ignored
        if self.decl.coupled:
            extra["coupled"] = tuple(self._coupled(match, path, span))
        return Gate(
            name=name,
            file=self.located.path,
            line=span.line,
            metric=self._expand(self.metric, named_by or match, path),
            op=self.op,
            value=number(span),
            literal=span.literal,
            start=span.start,
            end=span.end,
            **extra,  # type: ignore[arg-type]
        )

    def _entry_gate(self, match: Match, name: str, entry: Entry) -> Gate:
        """A key holding an entry (``fid: {value: 14.2, rtol: 0.05}``): the gate on its value,
        with the entry's own kind, operator and tolerance over the declaration's; the metric
        is the key's (``{key}`` is ``fid``)."""
        mapping: dict[str, Node] = match.node  # type: ignore[assignment]
        hop = (mapping, entry.value_key)
        inner = Match(mapping[entry.value_key], (*match.trail, hop), match.captures)
        path = self.paths.of(inner.trail)
        gate = self._gate(inner, name if self.name or self.pattern.exact else path, path, match)
        kind = entry.kind or self.kind
        if kind == "limit":
            op = entry.op if entry.op not in (None, "==") else (self.decl.op or None)
            if op is None or op == "==":
                raise self._fail(inner, f"{path}: a limit needs an op (>=, >, <=, <) in the entry")
        else:
            op = entry.op or (self.op if self.kind == "reference" else "==")
        update: dict[str, object] = {"kind": kind, "op": op}
        if kind == "limit":
            update["tolerance"] = None
        elif entry.tolerance:
            update["tolerance"] = self._entry_tolerance(inner, path, entry)
        return gate.model_copy(update=update)

    def _curve_gate(self, match: Match, name: str, path: str) -> Gate:
        """A reference holding a list of values: a golden curve, the i-th value at step
        ``start + i * interval`` (the file entry's ``steps:``, else 0 and 1), ``nan`` /
        ``.nan`` / ``null`` a step not checked; the gate's literal is the last value."""
        items: list[Node] = match.node  # type: ignore[assignment]
        points = []
        for i, item in enumerate(items):
            where = f"{path}.{i}"
            leaf = leaf_of(item)
            text = leaf_value(item)
            if leaf is not None and text is not None and text.lower().lstrip(".") in _NAN:
                scalar = self.located.scalar(leaf, where)
                raw = self.located.text[scalar.start : scalar.end]
                span = Span(
                    literal=raw,
                    start=scalar.start,
                    end=scalar.end,
                    line=self.located.line(scalar.start),
                )
                points.append(CurvePoint(step=self._step(i), value=None, span=span))
                continue
            literal = literal_at(self.located, item, where)
            points.append(
                CurvePoint(step=self._step(i), value=number(literal), span=literal.span())
            )
        checked = [p for p in points if p.value is not None]
        if not checked:
            raise self._fail(match, f"{path}: every golden value is nan")
        last = checked[-1].span
        extra: dict[str, object] = {"kind": "reference", "points": tuple(points)}
        if self.tolerance is not None and (tolerance := self._tolerance(match, path)):
            extra["tolerance"] = tolerance
        if "pattern" in self._extra:
            extra["pattern"] = self._extra["pattern"]
        return Gate(
            name=name,
            file=self.located.path,
            line=last.line,
            metric=self._expand(self.metric, match, path),
            op=self.op,
            value=number(last),
            literal=last.literal,
            start=last.start,
            end=last.end,
            **extra,  # type: ignore[arg-type]
        )

    def _step(self, index: int) -> int:
        steps = self.steps
        return (steps.start + index * steps.interval) if steps else index

    def _entry_tolerance(self, inner: Match, path: str, entry: Entry) -> Tolerance:
        spans = {
            side: self._beside(inner, path, key, "tolerance key")[0]
            for side, key in entry.tolerance.items()
        }
        rel, absolute = spans.get("rel"), spans.get("abs")
        return Tolerance(
            rel=number(rel) if rel else None,
            abs=number(absolute) if absolute else None,
            rel_span=rel,
            abs_span=absolute,
        )

    def _tolerance(self, match: Match, path: str) -> Tolerance | None:
        if self.tolerance is None:
            return None
        rel, absolute = self.tolerance.rel, self.tolerance.abs
        rel_span = (
            self._beside(match, path, rel, "tolerance key")[0] if isinstance(rel, str) else None
        )
        abs_span = (
            self._beside(match, path, absolute, "tolerance key")[0]
            if isinstance(absolute, str)
            else None
        )
        key = (rel_span.start if rel_span else None, abs_span.start if abs_span else None)
        if key not in self._tolerances:  # one object for the gates sharing the literals
            self._tolerances[key] = Tolerance(
                rel=_part(rel, rel_span),
                abs=_part(absolute, abs_span),
                rel_span=rel_span,
                abs_span=abs_span,
            )
        return self._tolerances[key]

    def _beside(self, match: Match, path: str, key: str, what: str) -> tuple[Span, str]:
        """The literal at ``key`` beside the match or in an enclosing mapping (nearest
        first), and its key path."""
        try:
            parts = _plain_parts(key)
        except ValueError as exc:
            raise self._fail(None, f"{what}: {exc}") from None
        found = lookup(match, parts)
        if found is None:
            reason = f"{what} {key!r} is not beside {path} nor in a mapping enclosing it"
            raise self._fail(match, reason)
        cache = (id(found.node), key)
        if cache not in self._found:
            name = self.paths.of(found.trail)
            self._found[cache] = (literal_span(self.located, found.node, name), name)
        return self._found[cache]

    def _coupled(self, match: Match, path: str, own: Literal) -> list[Coupled]:
        coupled = []
        for item in self.decl.coupled:
            span, name = self._beside(match, path, item.key, "coupled key")
            if span.start == own.start:
                raise self._fail(match, f"coupled key {item.key!r} is the gate's own literal")
            coupled.append(Coupled(name=name, factor=item.factor, span=span))
        return coupled


def _part(given: float | str | None, span: Span | None) -> float | None:
    """A tolerance part: the literal's value when it names one, else the number given."""
    if span is not None:
        return number(span)
    return None if given is None or isinstance(given, str) else float(given)


def coupled_notes(gates: Iterable[Gate]) -> tuple[str, ...]:
    """A note for each coupled literal the file does not write as ``factor`` x the gate's
    value, to the coupled literal's precision (``/rebaseline`` would change it anyway)."""
    notes = []
    for gate in gates:
        for item in gate.coupled:
            expected = item.factor * gate.value
            off = abs(number(item.span) - expected)
            if off > _half_unit(item.span.literal) + 1e-9 * abs(expected):
                notes.append(
                    f"{gate.file}:{item.span.line}: {item.name} is {item.span.literal}, not "
                    f"{item.factor:g} x {gate.literal} ({gate.name}) = {expected:.6g}; "
                    f"/rebaseline will write {item.factor:g} x the new value"
                )
    return tuple(notes)


def _half_unit(literal: str) -> float:
    """Half a unit of the literal's last written digit (``1.88`` -> 0.005)."""
    try:
        exponent = Decimal(literal.replace("_", "")).as_tuple().exponent
    except InvalidOperation:
        return 0.0
    return 0.5 * 10.0 ** int(exponent) if isinstance(exponent, int) else 0.0
