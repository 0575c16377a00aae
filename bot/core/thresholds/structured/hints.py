"""Hints for YAML / JSON / TOML literals that look like thresholds but are not bound.

Each hint is an ``UnboundVariable`` with the reason and the config lines that would declare
it (``hints.config_lines``).  Literals that share a layout (the same keys under different
top-level keys: ``llama.min_al``, ``qwen.min_al``) get one pattern for all of them
(``key: "*.min_al"``, ``metric: "{1}/al"``).
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

from bot.core.models import Op, UnboundVariable
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.hints import config_lines
from bot.core.thresholds.structured.literals import literal_span
from bot.core.thresholds.structured.located import Located
from bot.core.thresholds.structured.patterns import Match
from bot.core.thresholds.structured.templates import KeyPaths

MAX_HINTS = 50
"""Hints shown per file; a file with more says how many were left out."""
MAX_FALLBACK = 20
"""Numbers shown for a named file in which nothing looks like a threshold."""
_OP_LINE = re.compile(r"^(\s*)op: .*$", re.MULTILINE)


class _Item(NamedTuple):
    match: Match
    metric: str
    op: Op | None
    reason: str
    declare: Match
    coupled: tuple[str, float] | None


class Hints:
    """The hints of one file, collected while its gates are detected."""

    def __init__(self, located: Located, paths: KeyPaths) -> None:
        self.located = located
        self.paths = paths
        self._items: list[_Item] = []

    def add(
        self,
        match: Match,
        metric: str,
        op: Op | None,
        reason: str,
        *,
        declare: Match | None = None,
        coupled: tuple[str, float] | None = None,
    ) -> None:
        """A literal (its match, guessed metric and operator) and why it is no gate;
        ``declare``: the literal the config lines declare instead (a limit beside this
        reference), with this one ``coupled`` (its key and factor)."""
        self._items.append(_Item(match, metric, op, reason, declare or match, coupled))

    def unbound(self) -> tuple[UnboundVariable, ...]:
        """The hints in the file's order, at most ``MAX_HINTS``."""
        groups: dict[str, int] = {}
        for item in self._items:
            if (shared := self._shared(item.declare, item.metric)) is not None:
                groups[shared[0]] = groups.get(shared[0], 0) + 1
        out = []
        for item in self._items[:MAX_HINTS]:  # the file's order: the first ones
            key, declared, reason = self.paths.of(item.declare.trail), item.metric, item.reason
            shared = self._shared(item.declare, item.metric)
            if shared is not None and groups[shared[0]] > 1:
                key, declared = shared
                reason += f" (one pattern declares the {groups[shared[0]]} alike)"
            lines = config_lines(
                self.located.path, key, declared, None if item.op == "==" else item.op
            )
            if item.op == "==":
                lines = _OP_LINE.sub(r"\1kind: reference", lines, count=1)
            if item.coupled is not None:
                name, factor = item.coupled
                lines += f"\n        coupled: [{{key: {json.dumps(name)}, factor: {factor:g}}}]"
            if (hint := self._hint(item.match, reason, lines)) is not None:
                out.append(hint)
        out.sort(key=lambda u: u.line)
        return tuple(out[:MAX_HINTS])

    def fallback(self, numbers: list[Match]) -> tuple[UnboundVariable, ...]:
        """For a file the config names in which nothing looks like a threshold: its first
        numbers, each with the lines that would declare it."""
        out = []
        for match in numbers[:MAX_FALLBACK]:
            key = self.paths.of(match.trail)
            reason = "a number under a key that names no metric nor bound: not read as a gate"
            lines = config_lines(self.located.path, key, key.replace(".", "/"))
            if (hint := self._hint(match, reason, lines)) is not None:
                out.append(hint)
        return tuple(out)

    def _shared(self, match: Match, metric: str) -> tuple[str, str] | None:
        """The pattern and metric template covering this literal's siblings under other
        top-level keys, when its metric starts with its top-level key."""
        if len(match.trail) < 2 or not isinstance(match.trail[0][0], dict):
            return None
        first = str(match.trail[0][1])
        if not metric.startswith(first + "/"):
            return None
        rest = self.paths.of(match.trail[1:])
        pattern = "*" + rest if rest.startswith("[") else "*." + rest
        return pattern, "{1}/" + metric[len(first) + 1 :]

    def _hint(self, match: Match, reason: str, lines: str) -> UnboundVariable | None:
        where = self.paths.of(match.trail)
        try:
            span = literal_span(self.located, match.node, where)
        except ThresholdFileError:  # not a finite number after all: no hint
            return None
        return UnboundVariable(
            name=where,
            file=self.located.path,
            line=span.line,
            literal=span.literal,
            reason=reason,
            config=lines,
        )
