"""Names of pattern matches: their key paths, and metric (or name) templates.

``KeyPaths.of(trail)`` writes the key path that names one literal (``a.b``, ``"x.y".min``,
``tasks[name=gsm8k].metrics[name=exact_match,strict-match].value``): list items by their
identifying field when no other item of the list has the same, else by index; it is a
plain key path that names the same literal again.

A template is text with placeholders: ``{1}``, ``{2}`` … (the pattern's captures),
``{key}`` (the literal's own key), ``{.field}`` (a field of the mapping holding the
literal), ``{..field}`` (of the next mapping up: the enclosing list item), more dots for
further up; ``{{`` and ``}}`` are braces.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from bot.core.thresholds.structured.patterns import Hop, Match, identity
from bot.core.thresholds.structured.tree import Node

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_NEEDS_QUOTES = re.compile(r'[.\[\]"*]|^\s|\s$|^$')


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


class KeyPaths:
    """Key paths that name one node each: keys (quoted when they need it), list items by
    their identifying field when no other item of the list has the same, else by index.
    Each list's identities are counted once."""

    def __init__(self) -> None:
        self._counts: dict[int, dict[tuple[str, str] | None, int]] = {}
        self._keys: dict[str, str] = {}  # a key -> as written in a key path

    def of(self, trail: tuple[Hop, ...]) -> str:
        """The key path of the node at the end of ``trail``."""
        out = ""
        for container, key in trail:
            if type(container) is list:
                label = self._item(container, int(key))
                out += label if label.startswith("[") or not out else "." + label
            else:
                part = self._keys.get(str(key))
                if part is None:
                    text = str(key)
                    part = self._keys[text] = _quote(text) if _NEEDS_QUOTES.search(text) else text
                out += "." + part if out else part
        return out

    def _item(self, items: list[Node], index: int) -> str:
        counts = self._counts.get(id(items))
        if counts is None:
            counts = self._counts[id(items)] = {}
            for item in items:
                named = identity(item)
                counts[named] = counts.get(named, 0) + 1
        named = identity(items[index])
        if named is None or counts[named] > 1:
            return str(index)
        field, value = named
        shown = _quote(value) if "]" in value or value.startswith('"') else value
        return f"[{field}={shown}]"


# --------------------------------------------------------------------------- templates

Part = tuple[str, str | int]  # ("text", s) | ("capture", n) | ("key", "") | ("field:N", name)


def parse_template(template: str, captures: int) -> list[Part]:
    """A metric template's parts; ``ValueError`` for an unknown placeholder or a capture the
    pattern does not have.  ``{{`` and ``}}`` are literal braces."""
    parts: list[Part] = []
    last = 0
    for m in _PLACEHOLDER.finditer(template):
        parts.append(("text", template[last : m.start()]))
        last = m.end()
        token, inner = m[0], m[1]
        if token in ("{{", "}}"):
            parts.append(("text", token[0]))
        elif inner is None:
            raise ValueError(f"unmatched {token!r} in {template!r} (write {token * 2})")
        elif inner.isdigit() and 1 <= int(inner) <= captures:
            parts.append(("capture", int(inner)))
        elif inner.isdigit():
            raise ValueError(
                f"{{{inner}}} in {template!r}: "
                f"the pattern has {captures} wildcard(s) or selector(s)"
            )
        elif inner == "key":
            parts.append(("key", ""))
        elif (dots := len(inner) - len(inner.lstrip("."))) and inner[dots:]:
            parts.append((f"field:{dots}", inner[dots:]))
        else:
            raise ValueError(
                f"unknown placeholder {{{inner}}} in {template!r}: use {{1}}, {{2}}…, {{key}}, "
                "{.field} (beside the literal) or {..field} (in the enclosing item)"
            )
    parts.append(("text", template[last:]))
    return [p for p in parts if p != ("text", "")]


def expand(parts: list[Part], match: Match, value: Callable[[Node | None], str | None]) -> str:
    """The template filled from a match; ``LookupError`` naming a field that is not there."""
    out = []
    for kind, arg in parts:
        if kind == "text":
            out.append(str(arg))
        elif kind == "capture":
            out.append(match.captures[int(arg) - 1])
        elif kind == "key":
            out.append(match.key)
        else:
            dots, name = int(kind.split(":")[1]), str(arg)
            mappings = match.mappings()
            found = value(mappings[dots - 1][0].get(name)) if dots <= len(mappings) else None
            if found is None:
                where = "beside the literal" if dots == 1 else f"{dots - 1} level(s) up"
                raise LookupError(f"no field {name!r} {where}")
            out.append(found)
    return "".join(out)
