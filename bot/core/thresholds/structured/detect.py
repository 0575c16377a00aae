"""YAML / JSON / TOML threshold files recognised without configuration.

Conservative: a literal becomes a gate only in a shape that says both what it bounds and
how (docs/threshold-files.md); anything else that looks like a metric's value is a hint
(``UnboundVariable`` with the config lines that would declare it), never a guessed gate.

* lm-eval-harness accuracy lists: ``tasks: [{name: T, metrics: [{name: M, value: V}]}]``
  -> a reference gate ``T/M`` per value, both sides unless an ``op`` beside it says
  otherwise, its tolerance from an ``rtol`` / ``atol`` / ``tolerance`` key beside it, in
  the task or at the top level (else none: the config's default applies);
* bound keys (``key_words.affixed``): ``acc_min``, ``max_latency``, ``ttft_ms_threshold``
  -> limit gates; ``expected_loss``, ``ref_al``, ``*_golden`` -> reference gates with
  the tolerance found beside them (``rtol``, ``atol``, ``tolerance``, ``<stem>_tol``).
  The metric is the stem under its enclosing keys (``llama/ttft_ms``).  A key is a gate
  when its stem names a metric, or when the mapping reads as thresholds (the file or an
  enclosing key says so, ``perf_thresholds.yaml``; or most of its numbers are bounds); never
  when its stem names a setting (``max_steps``, ``min_lr``), nor under sweep ranges.  A
  reference beside a limit of the same stem (``ref_al`` and ``min_al``) is a hint: the limit
  is what CI checks;
* entries: ``{metric: M, threshold: V, op: ">="}``, ``{name: M, min: V, max: W}``,
  ``{metric: M, upperLimit: V}``, ``{expected: V, rtol: R}``, or a mapping named after its
  metric holding them (``fid: {max: 12.4}``);
* a metric-named number (``accuracy: 66.4``) in a file or under a key that says references
  (``references/mmlu.yaml``, ``golden:``) -> a reference gate.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath

from bot.core.bounded import collector_paused
from bot.core.models import Gate, Op, Span, ThresholdFile, Tolerance
from bot.core.thresholds.structured import key_words as kw
from bot.core.thresholds.structured.entries import VALUE_KEYS, entry_of
from bot.core.thresholds.structured.hints import Hints
from bot.core.thresholds.structured.literals import (
    IGNORED_IN_FILE,
    is_number,
    literal_span,
    marked_ignore,
    number,
)
from bot.core.thresholds.structured.located import Located, locate
from bot.core.thresholds.structured.patterns import Hop, Match, identity, leaf_value
from bot.core.thresholds.structured.templates import KeyPaths
from bot.core.thresholds.structured.tree import Node

_TOLERANCES = (
    ("rel", ("{s}_rtol", "rtol_{s}", "{s}_rel_tol", "rtol", "rel_tol", "relative_tolerance")),
    ("abs", ("{s}_atol", "atol_{s}", "{s}_abs_tol", "{s}_tol", "{s}_tolerance", "atol")),
    ("abs", ("abs_tol", "absolute_tolerance", "tolerance", "tol")),
)


def nothing_read(path: str) -> str:
    """The note of a file the config names in which no shape reads a number."""
    return f"{path}: no numeric value to read as a gate"


def detect_structured(path: str, text: str, *, named: bool) -> ThresholdFile | None:
    """Gates in shapes recognised without configuration; ``named``: the config names the file
    (then hints are given for metric-like literals even when no gate is found).  None for a
    file the config does not name in which no gate is found; ``ThresholdFileError`` for one
    that is not valid YAML / JSON / TOML."""
    with collector_paused():
        located = locate(path, text)
        found = _Detection(located)
        found.lm_eval()
        found.walk()
    if not found.gates and not named:
        return None
    unbound = found.hints.unbound()
    if named and not found.gates and not unbound:
        unbound = found.hints.fallback(found.numbers())
    notes = () if found.gates or unbound else (nothing_read(path),)
    return ThresholdFile(path=path, gates=tuple(found.gates), unbound=unbound, notes=notes)


class _Detection:
    """One walk over the located tree, claiming each literal at most once."""

    def __init__(self, located: Located) -> None:
        self.located = located
        self.paths = KeyPaths()
        self.gates: list[Gate] = []
        self.hints = Hints(located, self.paths)
        self.claimed: set[int] = set()
        self.spans: dict[int, Span] = {}
        self.tolerance_keys: dict[str, list[tuple[str, str]]] = {}
        self.labels: dict[int, list[str | None]] = {}  # id(list) -> its items' labels
        parts = PurePosixPath(located.path).parts
        self.file_context = set().union(*(kw.context_words(p) for p in parts)) if parts else set()

    # ----------------------------------------------------------------- shapes

    def lm_eval(self) -> None:
        """``tasks: [{name, metrics: [{name, value}]}]`` at the top level."""
        root = self.located.root
        tasks = root.get("tasks") if isinstance(root, dict) else None
        if not isinstance(tasks, list):
            return
        for t, task in enumerate(tasks):
            metrics = task.get("metrics") if isinstance(task, dict) else None
            name = leaf_value(task.get("name")) if isinstance(task, dict) else None
            if name is None or not isinstance(metrics, list):
                continue
            for m, entry in enumerate(metrics):
                metric = leaf_value(entry.get("name")) if isinstance(entry, dict) else None
                if metric is None or not isinstance(entry, dict) or "value" not in entry:
                    continue
                trail: tuple[Hop, ...] = ((root, "tasks"), (tasks, t), (task, "metrics"))
                trail += ((metrics, m), (entry, "value"))
                match = Match(entry["value"], trail, ())
                op = kw.entry_op(entry) or "=="
                self._gate(match, f"{name}/{metric}", op, "reference", stem="value")

    def walk(self) -> None:
        """Every mapping of the file, outside sweep ranges, with its trail."""
        for mapping, trail in self._mappings():
            keys = [str(k).lower() for _, k in trail if isinstance(k, str)]
            if any(k in kw.SWEEP_KEYS for k in keys):
                continue
            context = bool(self.file_context) or any(kw.context_words(k) for k in keys)
            self._entry(mapping, trail, context)
            self._keys(mapping, trail, context)

    def _mappings(self) -> Iterator[tuple[dict[str, Node], tuple[Hop, ...]]]:
        work: list[tuple[Node, tuple[Hop, ...]]] = [(self.located.root, ())]
        while work:
            node, trail = work.pop()
            if isinstance(node, dict):
                yield node, trail
                work += [(v, (*trail, (node, k))) for k, v in reversed(node.items())]
            elif isinstance(node, list):
                work += [(v, (*trail, (node, i))) for i, v in reversed(list(enumerate(node)))]

    def _entry(self, mapping: dict[str, Node], trail: tuple[Hop, ...], context: bool) -> None:
        """A mapping holding bounds of one metric: ``{metric: M, min: V}``, ``fid: {max: V}``."""
        fields = {str(k).lower(): k for k in mapping}
        name_field = next((fields[f] for f in kw.NAME_FIELDS if f in fields), None)
        named = leaf_value(mapping.get(name_field)) if name_field is not None else None
        if named is not None and name_field in ("metric", "metric_name"):
            metric = named
        elif named is not None:
            metric = self._metric(trail, named)
        else:
            metric = self._metric(trail, "")
        own = self._own_key(trail)
        trusted = named is not None or (
            (kw.metric_like(own) or context) and not kw.setting_like(own)
        )
        op = kw.entry_op(mapping)
        for lowered, key in fields.items():
            node = mapping[key]
            if not is_number(node) or not metric:
                continue
            match = Match(node, (*trail, (mapping, key)), ())
            if lowered in kw.LOWER_FIELDS | kw.UPPER_FIELDS:
                bound: Op = ">=" if lowered in kw.LOWER_FIELDS else "<="
                self._decide(match, trusted, metric, bound, "limit", own)
            elif lowered in kw.REFERENCE_FIELDS:
                sides = op if op in (">=", "<=") else "=="
                self._decide(match, trusted, metric, sides, "reference", own)
            elif lowered in kw.VALUE_FIELDS:
                chosen = op or (kw.direction(metric) if lowered == "threshold" else None)
                said = entry_of(mapping) if lowered in VALUE_KEYS else None
                if chosen is None and said is not None and (said.tolerance or said.kind):
                    # its own tolerance, or kind: reference, says "compared with a tolerance"
                    chosen = "==" if said.kind != "limit" else None
                kind = (said.kind if said else None) or ("reference" if chosen == "==" else "limit")
                if kind == "limit" and chosen == "==":
                    chosen = None
                reason = "the entry does not say how runs are compared with it"
                self._decide(
                    match, trusted and chosen is not None, metric, chosen, kind, key, reason
                )

    def _keys(self, mapping: dict[str, Node], trail: tuple[Hop, ...], context: bool) -> None:
        """Bound keys (``acc_min``, ``expected_loss``) and, under references, metric keys."""
        numbers = {k: v for k, v in mapping.items() if is_number(v)}
        bounds = {k: b for k in numbers if (b := kw.affixed(k)) is not None}
        limits = {b.stem.lower() for b in bounds.values() if b.bound != "reference"}
        pair = any(b.bound == "reference" and b.stem.lower() in limits for b in bounds.values())
        thresholds = context or pair or (len(bounds) >= 2 and 2 * len(bounds) >= len(numbers))
        references = bool(self.file_context & kw.REFERENCE_CONTEXT) or any(
            kw.words(str(k)) & kw.REFERENCE_CONTEXT for _, k in trail if isinstance(k, str)
        )
        for key, node in numbers.items():
            match = Match(node, (*trail, (mapping, key)), ())
            bound = bounds.get(key)
            if bound is None:
                if kw.metric_like(key) and not kw.setting_like(key):
                    trusted = references and self._labelled(trail)
                    reason = "a metric's value, not named as a bound (min, max, expected …)"
                    self._decide(
                        match, trusted, self._metric(trail, key), "==", "reference", key, reason
                    )
                continue
            stem, trusted = bound.stem, not kw.setting_like(bound.stem)
            trusted = trusted and (kw.metric_like(stem) or thresholds)
            metric = self._metric(trail, stem)
            if bound.bound == "reference" and stem.lower() in limits:
                self._beside_limit(match, mapping, bounds, metric)
            elif bound.bound == "reference":
                self._decide(match, trusted, metric, "==", "reference", stem)
            else:
                op = kw.BOUND_OPS.get(bound.bound) or kw.direction(stem)
                reason = "the name does not say whether runs must stay above or below it"
                self._decide(match, trusted and op is not None, metric, op, "limit", stem, reason)

    def _beside_limit(
        self, match: Match, mapping: dict[str, Node], bounds: dict[str, kw.Affixed], metric: str
    ) -> None:
        """A reference beside a limit on the same stem (``ref_al``, ``min_al``): the limit
        is the gate; the hint declares it with this one ``coupled`` (factor from the file)."""
        key = str(match.trail[-1][1])
        stem = bounds[key].stem.lower()
        limit_key, limit = next(
            (k, b) for k, b in bounds.items() if b.stem.lower() == stem and b.bound != "reference"
        )
        limit_match = Match(mapping[limit_key], (*match.trail[:-1], (mapping, limit_key)), ())
        reference, floor = (
            float(str(leaf_value(n)).replace("_", "")) for n in (match.node, limit_match.node)
        )
        coupled = (key, round(reference / floor, 4)) if floor else None
        op = kw.BOUND_OPS.get(limit.bound) or kw.direction(stem)
        reason = (
            f"a reference beside the limit {limit_key!r}, which is the gate: "
            "declared `coupled` to it, /rebaseline rewrites both"
        )
        self.hints.add(match, metric, op, reason, declare=limit_match, coupled=coupled)
        self.claimed.add(id(match.node))

    # ----------------------------------------------------------------- gates

    def _decide(
        self,
        match: Match,
        trusted: bool,
        metric: str,
        op: Op | None,
        kind: str,
        stem: str,
        reason: str = "its key does not read as a metric's bound",
    ) -> None:
        if id(match.node) in self.claimed:
            return
        if trusted and op is not None:
            self._gate(match, metric, op, kind, stem)
        elif not kw.setting_like(stem):
            self.hints.add(match, metric, op, reason)
            self.claimed.add(id(match.node))

    def _gate(self, match: Match, metric: str, op: Op, kind: str, stem: str) -> None:
        node = match.node
        if id(node) in self.claimed or not is_number(node):
            return
        self.claimed.add(id(node))
        path = self.paths.of(match.trail)
        span = literal_span(self.located, node, path)
        reference = kind == "reference"
        self.gates.append(
            Gate(
                name=path,
                file=self.located.path,
                line=span.line,
                metric=metric,
                op=op,
                value=number(span),
                literal=span.literal,
                start=span.start,
                end=span.end,
                kind="reference" if reference else "limit",
                tolerance=self._tolerance(match, stem) if reference else None,
                ignored=IGNORED_IN_FILE if marked_ignore(self.located, span.line) else "",
            )
        )

    def _tolerance(self, match: Match, stem: str) -> Tolerance | None:
        """The tolerance keys beside the literal, else in the nearest mapping above that
        has one (``{stem}_rtol`` before ``rtol``)."""
        found: dict[str, Span] = {}
        candidates = self.tolerance_keys.get(stem)
        if candidates is None:
            candidates = [
                (side, name.format(s=stem)) for side, names in _TOLERANCES for name in names
            ]
            self.tolerance_keys[stem] = candidates
        for depth in range(len(match.trail) - 1, -1, -1):
            mapping = match.trail[depth][0]
            if type(mapping) is not dict:
                continue
            for side, name in candidates:
                node = mapping.get(name)
                if node is None or side in found or node is match.node or not is_number(node):
                    continue
                found[side] = self._span(Match(node, (*match.trail[:depth], (mapping, name)), ()))
        if not found:
            return None
        rel, absolute = found.get("rel"), found.get("abs")
        return Tolerance(
            rel=number(rel) if rel else None,
            abs=number(absolute) if absolute else None,
            rel_span=rel,
            abs_span=absolute,
        )

    # ----------------------------------------------------------------- helpers

    def _span(self, match: Match) -> Span:
        """A tolerance literal's span, once per literal (one ``rtol`` serves many gates)."""
        if id(match.node) not in self.spans:
            path = self.paths.of(match.trail)
            self.spans[id(match.node)] = literal_span(self.located, match.node, path)
        return self.spans[id(match.node)]

    @staticmethod
    def _own_key(trail: tuple[Hop, ...]) -> str:
        return str(trail[-1][1]) if trail and isinstance(trail[-1][1], str) else ""

    def _metric(self, trail: tuple[Hop, ...], last: str) -> str:
        """The enclosing keys (list items by their identifying field; container words such
        as ``thresholds`` left out) and ``last``, joined by ``/``."""
        parts = []
        for container, key in trail:
            if isinstance(container, list):
                label = self._labels(container)[int(key)]
                if label is not None and label != last:
                    parts.append(label)
            elif str(key).lower() not in kw.CONTAINER_KEYS:
                parts.append(str(key))
        return "/".join([*parts, last] if last else parts)

    def _labels(self, items: list[Node]) -> list[str | None]:
        """``item_labels`` of a list, once per list."""
        labels = self.labels.get(id(items))
        if labels is None:
            labels = self.labels[id(items)] = item_labels(items)
        return labels

    def _labelled(self, trail: tuple[Hop, ...]) -> bool:
        """Whether every list item on the way has a label: else two items' values would
        share one metric."""
        return all(self._labels(c)[int(k)] is not None for c, k in trail if isinstance(c, list))

    def numbers(self) -> list[Match]:
        """Every numeric leaf of the file, in order (for the hints of a named file)."""
        found = []
        for mapping, trail in self._mappings():
            for key, node in mapping.items():
                if is_number(node):
                    found.append(Match(node, (*trail, (mapping, key)), ()))
        return found


def item_labels(items: list[Node]) -> list[str | None]:
    """What names each item of a list in a metric: its identifying field (``name: gsm8k``),
    else the text fields that tell the items apart (``quantization: fp8`` among entries of
    one model; every text field of a lone item), joined by ``/``; None for an item without
    one, and for every item but the named ones when two share a label. Linear in the list."""
    named = [None if (found := identity(item)) is None else found[1] for item in items]
    if all(label is not None for label in named):
        return named
    labels = list(named)
    texts = [
        {k: v for k, n in item.items() if (v := leaf_value(n)) is not None and not is_number(n)}
        if type(item) is dict
        else {}
        for item in items
    ]
    seen: dict[str, set[str]] = {}
    for fields in texts:
        for key, value in fields.items():
            seen.setdefault(key, set()).add(value)
    telling = {k for k, values in seen.items() if len(values) > 1 or len(items) == 1}
    for index, fields in enumerate(texts):
        if labels[index] is None and (told := [v for k, v in fields.items() if k in telling]):
            labels[index] = "/".join(told)
    if len(set(labels)) < len(items):
        return named
    return labels
