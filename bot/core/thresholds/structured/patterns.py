"""Key patterns over a located tree: which literals a ``GateDecl.key`` names, and each
match's key path, captures and neighbours.

A pattern is segments separated by dots (docs/threshold-files.md):

* ``name``: a mapping key, or a list index when the node is a list (``math500.0.min``);
  ``"a.b"`` quotes a key holding dots, brackets, stars or quotes (``\\`` escapes ``"`` and
  ``\\`` inside quotes);
* ``*``: any key (or any list item); ``*_min``: any key ending in ``_min`` (each run of
  stars inside a key is one wildcard); ``**``: any number of levels, none included;
* ``[N]``: item N of a list; ``[*]``: any item; ``[field=value]``: the items whose
  ``field`` is ``value`` (the value runs to the next ``]``; quote it, ``"a]b"``, when it
  holds one); ``[a=1][b=2]``: the items with both.  Selectors follow a key
  (``tasks[name=gsm8k]``) or start a pattern whose top level is a list.

Captures, numbered from 1 in the pattern's order: each wildcard (what it matched: the key,
the part of the key a star stands for, the keys ``**`` crossed joined by ``/``) and each
``[*]`` / ``[field=value]`` selector (the item's identifying field, ``name`` first, else
the selected value, else its index).  Matching takes time linear in the tree for each
step of the pattern: every (node, step) pair is visited once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import re2

from bot.core.bounded import MAX_DEPTH, compile_linear
from bot.core.thresholds.structured.tree import Leaf, Node, Scalar, TomlLeaf

_STOP = re.compile(r"[.\[]")
StepKind = Literal["key", "glob", "deep", "index", "item", "field"]
MAX_STEPS = 2 * MAX_DEPTH
"""Steps of a pattern: a deeper one could match nothing (files nest at most ``MAX_DEPTH``)."""
MAX_DEEP = 4
"""``**`` of a pattern: each may visit every node again."""
IDENTITY_FIELDS = ("name", "metric", "id", "task", "key")
"""Fields that name a list item, in order of preference (captures and key paths)."""


@dataclass(frozen=True)
class Step:
    """One step of a pattern: ``text`` is the key, glob or field; ``value`` the field's value."""

    kind: StepKind
    text: str = ""
    value: str = ""
    index: int = 0
    glob: Any = None  # the compiled glob (RE2: linear time, whatever the key)
    also: tuple[tuple[str, str], ...] = ()  # more fields the item must have: [a=1][b=2]


@dataclass(frozen=True)
class Pattern:
    """A parsed key pattern."""

    source: str
    steps: tuple[Step, ...]
    captures: int

    @property
    def exact(self) -> bool:
        """True when it names one path (keys and indices only): a plain key path."""
        return all(s.kind in ("key", "index") for s in self.steps)


Hop = tuple[Any, str | int]
"""A step down the tree: the container and the key or index taken."""


@dataclass(frozen=True)
class Match:
    """A node a pattern reaches, the hops from the root to it and the captures."""

    node: Node
    trail: tuple[Hop, ...]
    captures: tuple[str, ...]

    @property
    def key(self) -> str:
        """The literal's own key (its index when it is a list item)."""
        return str(self.trail[-1][1]) if self.trail else ""

    def mappings(self) -> list[tuple[dict[str, Node], int]]:
        """The mappings holding the node, nearest first, each with its depth in the trail."""
        return [(c, j) for j, (c, _) in reversed(list(enumerate(self.trail))) if type(c) is dict]


# --------------------------------------------------------------------------- parsing


def _quoted(text: str, pos: int) -> tuple[str, int]:
    """The quoted text starting at ``text[pos] == '"'``, and the position after it."""
    out, i = [], pos + 1
    while i < len(text) and text[i] != '"':
        if text[i] == "\\" and i + 1 < len(text):
            i += 1
        out.append(text[i])
        i += 1
    if i >= len(text):
        raise ValueError(f"unclosed quote at {text[pos : pos + 20]!r}")
    return "".join(out), i + 1


def _selector(source: str, pos: int) -> tuple[Step, int]:
    """The ``[...]`` selector at ``source[pos] == '['``."""
    close = source.find("]", pos)
    body = source[pos + 1 : close] if close > 0 else ""
    if body == "*":
        return Step("item"), close + 1
    if body.isdigit():
        return Step("index", index=int(body)), close + 1
    equals = source.find("=", pos)
    field = source[pos + 1 : equals] if equals > 0 else ""
    if not field or any(c in field for c in '[]."*'):
        raise ValueError(f"{source[pos : pos + 20]!r}: use [N], [*] or [field=value]")
    start = equals + 1
    if source.startswith('"', start):
        value, end = _quoted(source, start)
    else:
        end = source.find("]", start)
        value = source[start:end] if end >= 0 else ""
        end = end if end >= 0 else len(source)
    if not source.startswith("]", end):
        raise ValueError(f"unclosed selector at {source[pos : pos + 20]!r}")
    return Step("field", field, value), end + 1


def _key_step(text: str, quoted: bool) -> Step:
    if quoted or "*" not in text:
        return Step("key", text)
    if text == "**":
        return Step("deep")
    parts = re.split(r"\*+", text)
    regex = "(?s)" + "(.*)".join(re2.escape(p) for p in parts)
    return Step("glob", text, index=len(parts) - 1, glob=compile_linear(regex))


def parse_pattern(source: str) -> Pattern:
    """Parse a key path or pattern; ``ValueError`` (``invalid key path 'a..b': an empty
    key``) for an invalid one."""
    try:
        steps = _steps(source)
    except ValueError as exc:
        shown = source if len(source) <= 80 else source[:80] + "…"
        raise ValueError(f"invalid key path {shown!r}: {exc}") from None
    return Pattern(source, tuple(steps), sum(_captures(s) for s in steps))


def _steps(source: str) -> list[Step]:
    steps: list[Step] = []
    pos = 0
    while True:
        if source.startswith('"', pos):
            name, pos = _quoted(source, pos)
            steps.append(_key_step(name, quoted=True))
        else:
            stop = _STOP.search(source, pos)
            end = stop.start() if stop else len(source)
            if end > pos:
                steps.append(_key_step(source[pos:end], quoted=False))
            elif not source.startswith("[", pos):
                raise ValueError("an empty key")
            pos = end
        chained = False  # the previous step is a field selector of this segment
        while source.startswith("[", pos):
            step, pos = _selector(source, pos)
            if step.kind == "field" and chained:  # [a=1][b=2]: one item with both fields
                first = steps[-1]
                also = (*first.also, (step.text, step.value))
                steps[-1] = Step("field", first.text, first.value, also=also)
            else:
                steps.append(step)
            chained = step.kind == "field"
            _bounded(steps)
        _bounded(steps)
        if pos == len(source):
            break
        if source[pos] != ".":
            raise ValueError(f"expected a dot at {source[pos : pos + 20]!r}")
        pos += 1
    return steps


def _bounded(steps: list[Step]) -> None:
    """``ValueError`` past ``MAX_STEPS`` steps (chained selectors included) or ``MAX_DEEP``."""
    size = len(steps) + (len(steps[-1].also) if steps else 0)
    if size > MAX_STEPS or sum(s.kind == "deep" for s in steps) > MAX_DEEP:
        raise ValueError(f"more than {MAX_STEPS} steps or {MAX_DEEP} '**'")


def _captures(step: Step) -> int:
    if step.kind == "glob":
        return step.index  # the number of wildcards in the key
    return 1 if step.kind in ("deep", "item", "field") else 0


# --------------------------------------------------------------------------- matching


def leaf_value(node: Node | None) -> str | None:
    """A leaf's value as text; None for a mapping, a list or nothing."""
    kind = type(node)
    return node.value if kind is Scalar or kind is TomlLeaf else None  # type: ignore[union-attr]


def identity(item: Node) -> tuple[str, str] | None:
    """The field naming a list item and its value (``("name", "gsm8k")``), if it has one."""
    if type(item) is dict:
        for name in IDENTITY_FIELDS:
            value = leaf_value(item.get(name))
            if value is not None:
                return name, value
    return None


def _children(node: Node, step: Step) -> Iterator[tuple[Node, str | int, tuple[str, ...]]]:
    """The children ``step`` leads to from ``node``: child, key or index, captures."""
    if type(node) is dict:
        if step.kind == "key":
            if step.text in node:
                yield node[step.text], step.text, ()
        elif step.kind == "deep" or (step.kind == "glob" and step.text == "*"):
            captured = step.kind == "glob"
            for key, child in node.items():
                yield child, key, (key,) if captured else ()
        elif step.kind == "glob":
            for key, child in node.items():
                if (found := step.glob.fullmatch(key)) is not None:
                    yield child, key, tuple(found.groups())
    elif type(node) is list:
        if step.kind in ("key", "index"):
            index = int(step.text) if step.kind == "key" and step.text.isdigit() else step.index
            if (step.kind == "index" or step.text.isdigit()) and index < len(node):
                yield node[index], index, ()
        elif step.kind == "deep":
            for n, child in enumerate(node):
                yield child, n, ()
        elif step.kind == "item" or (step.kind == "glob" and step.text == "*"):
            for n, child in enumerate(node):
                named = identity(child)
                yield child, n, (named[1] if named else str(n),)
        elif step.kind == "field":
            for n, child in enumerate(node):
                if (
                    type(child) is dict
                    and leaf_value(child.get(step.text)) == step.value
                    and all(leaf_value(child.get(f)) == v for f, v in step.also)
                ):
                    named = identity(child)
                    yield child, n, (named[1] if named else step.value,)


def _crossed(trail: tuple[Hop, ...], since: int) -> str:
    """What ``**`` crossed: the keys (list items by their identity) joined by ``/``."""
    parts = []
    for container, key in trail[since:]:
        named = identity(container[int(key)]) if type(container) is list else None
        parts.append(named[1] if named else str(key))
    return "/".join(parts)


def find(pattern: Pattern, root: Node) -> list[Match]:
    """Every node the pattern reaches, once each, in the file's order."""
    if not any(step.kind == "deep" for step in pattern.steps):
        return _find_levels(pattern, root)
    steps = pattern.steps
    found: dict[int, Match] = {}
    seen: set[tuple[int, int]] = set()
    # (node, step index, trail, captures, trail length when this step was reached)
    work: list[tuple[Node, int, tuple[Hop, ...], tuple[str, ...], int]] = [(root, 0, (), (), 0)]
    while work:
        node, i, trail, caps, entered = work.pop()
        if (id(node), i) in seen:
            continue
        seen.add((id(node), i))
        if i == len(steps):
            found.setdefault(id(node), Match(node, trail, caps))
            continue
        step = steps[i]
        nexts = []
        if step.kind == "deep":
            nexts.append((node, i + 1, trail, (*caps, _crossed(trail, entered)), len(trail)))
        for child, key, more in _children(node, step):
            hop = (*trail, (node, key))
            if step.kind == "deep":
                nexts.append((child, i, hop, caps, entered))
            else:
                nexts.append((child, i + 1, hop, caps + more, len(hop)))
        work.extend(reversed(nexts))  # the first child is taken next: the file's order
    matches = list(found.values())
    if all(isinstance(m.node, Scalar) for m in matches):
        matches.sort(key=lambda m: m.node.start if isinstance(m.node, Scalar) else 0)
    return matches


def _find_levels(pattern: Pattern, root: Node) -> list[Match]:
    """``find`` for a pattern without ``**``: one level per step, each node reached once, in
    order (a large file has tens of thousands of matches)."""
    level: list[tuple[Node, tuple[Hop, ...], tuple[str, ...]]] = [(root, (), ())]
    for step in pattern.steps:
        level = [
            (child, (*trail, (node, key)), caps + more if more else caps)
            for node, trail, caps in level
            for child, key, more in _children(node, step)
        ]
    return [Match(node, trail, caps) for node, trail, caps in level]


def child(node: Node, part: str) -> tuple[Node, str | int] | None:
    """The child at one part of a plain key path (a mapping's key, a list's index) and the
    key or index; None when there is none."""
    if type(node) is dict:
        return (node[part], part) if part in node else None
    if type(node) is list and part.isdigit() and int(part) < len(node):
        return node[int(part)], int(part)
    return None


def descend(start: Node, parts: list[str]) -> tuple[Node, tuple[Hop, ...]] | None:
    """The node at the plain key path ``parts`` below ``start`` and the hops to it; None
    when it is not there."""
    node, hops = start, list[Hop]()
    for part in parts:
        found = child(node, part)
        if found is None:
            return None
        hops.append((node, found[1]))
        node = found[0]
    return node, tuple(hops)


def lookup(match: Match, parts: list[str]) -> Match | None:
    """The node at the key path ``parts`` beside the match (in its mapping), else in each
    enclosing mapping, nearest first, up to the top level."""
    for depth in range(len(match.trail) - 1, -1, -1):
        mapping = match.trail[depth][0]
        if type(mapping) is dict and (found := descend(mapping, parts)) is not None:
            return Match(found[0], match.trail[:depth] + found[1], ())
    return None


def leaf_of(node: Node) -> Leaf | None:
    """The node when it is a leaf."""
    return node if isinstance(node, Scalar | TomlLeaf) else None
