"""Bounded parsing and matching of hostile text: a pull request's files, a repository's config.

Everything parsed here may be written by an attacker, so each parser is bounded in time,
memory and recursion, and fails with a reason (and a position) instead of crashing:

* YAML: ``BoundedLoader`` refuses aliases (``*name``, also ``<<: *name``: no "billion laughs"
  expansion, no recursive anchors) and nesting deeper than ``MAX_DEPTH`` while composing,
  before anything is constructed, and integers of more than ``MAX_DIGITS`` digits (and any
  scalar Python cannot convert) when constructing; each refusal is a
  ``yaml.MarkedYAMLError`` with its line.  ``yaml_tree`` builds a document's tree with
  every scalar's offsets, with the same refusals, parsed by libyaml when PyYAML has it
  (about ten times faster than the pure-Python parser, which it falls back to);
* JSON: ``json_bounds`` finds nesting deeper than ``MAX_DEPTH`` and numbers of more than
  ``MAX_DIGITS`` digits before ``json.loads`` recurses or converts them;
* regular expressions from configs: ``compile_linear`` compiles with RE2, whose matching
  time is linear in the text (no backtracking).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, cast

import re2
import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import Node, ScalarNode
from yaml.reader import Reader, ReaderError

MAX_DEPTH = 64
"""Nesting of YAML / JSON collections deeper than this is refused."""
MAX_DIGITS = 100
"""A YAML integer or a JSON number with more digits in a row than this is refused."""
MAX_PATTERN = 1000
"""Characters of a regular expression or a glob a config may hold."""

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # errors are raised, not also written to stderr
_JSON_NESTING = r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{\]}]'  # strings are skipped whole
_LONG_NUMBER = rf"(?<!\d)\d{{{MAX_DIGITS + 1}}}"
_JSON_TOKEN = {
    True: re.compile(f"{_JSON_NESTING}|{_LONG_NUMBER}"),
    False: re.compile(_JSON_NESTING),
}
_LONG = re.compile(_LONG_NUMBER)


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without aliases, nested at most ``MAX_DEPTH`` deep, with integers
    of at most ``MAX_DIGITS`` digits."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        """Compose one node; ``ComposerError`` at an alias or past ``MAX_DEPTH``."""
        if not self.check_event(yaml.AliasEvent, yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        event = self.current_event  # the event just checked
        if self.check_event(yaml.AliasEvent):
            problem = f"aliases (*{event.anchor}) are not allowed"
            raise ComposerError(None, None, problem, event.start_mark)
        if self._depth >= MAX_DEPTH:
            problem = f"nested more than {MAX_DEPTH} levels deep"
            raise ComposerError(None, None, problem, event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """Construct one node; a scalar Python refuses (``2026-13-45``, ``!!int x``) is a
        ``ConstructorError`` with its line instead of a bare ``ValueError``."""
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:
            raise ConstructorError(None, None, str(exc), node.start_mark) from None

    def construct_bounded_int(self, node: ScalarNode) -> int:
        """An integer scalar; ``ConstructorError`` beyond ``MAX_DIGITS`` digits."""
        if sum(c.isdigit() for c in str(node.value)) > MAX_DIGITS:
            problem = f"an integer of more than {MAX_DIGITS} digits"
            raise ConstructorError(None, None, problem, node.start_mark)
        return self.construct_yaml_int(node)


BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_bounded_int)


def yaml_tree(text: str, leaf: Callable[[int, int, str], Any]) -> Any:
    """The document of YAML ``text`` as dicts, lists and ``leaf(start, end, value)`` for each
    scalar (``value`` as written, unquoted); mapping keys are their scalars' text, an entry
    whose key is a collection is left out, an empty document is ``{}``.

    Built straight from the parse events, refusing what ``BoundedLoader`` refuses before
    anything is built (an alias, nesting deeper than ``MAX_DEPTH``) and a second document,
    each as a ``yaml.MarkedYAMLError`` with its line.  Parsed by libyaml when PyYAML has
    it (ten times faster than the pure-Python parser, which it falls back to); offsets are
    character offsets into ``text`` with either: a text libyaml would count differently (a
    byte order mark, which libyaml skips) or whose characters the pure-Python reader
    refuses goes to the pure-Python parser, and a libyaml error is replaced by the
    pure-Python parser's, so that messages and lines do not depend on which is installed.
    """
    fast = (
        yaml.__with_libyaml__
        and not text.startswith("\ufeff")
        and not Reader.NON_PRINTABLE.search(text)
    )
    if not fast:
        return _tree(yaml.SafeLoader(text), leaf)
    try:
        return _tree(yaml.CSafeLoader(text), leaf)
    except yaml.YAMLError as exc:
        _tree(yaml.SafeLoader(text), leaf)
        raise exc from None  # the pure-Python parser accepts the text: libyaml's error stands


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a parser builds a large acyclic tree: a
    2 MB YAML file is some 150,000 objects, which each collection of the older generations
    walks again while the parser allocates (a third of the time).  The input is bounded,
    and the collector runs again after it (unless something else had paused it)."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()


def _tree(loader: Any, leaf: Callable[[int, int, str], Any]) -> Any:
    """``yaml_tree`` from one parser.  A tight loop: a 2 MB file has ~150,000 events."""
    scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
    mapping_start, sequence_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
    mapping_end, sequence_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
    document_start, stream_end = yaml.DocumentStartEvent, yaml.StreamEndEvent
    get_event = loader.get_event
    root: Any = {}
    stack: list[tuple[Any, Any, bool]] = []  # the enclosing collections' (top, key, is_map)
    top: Any = None  # the open collection (a complex key's too, attached nowhere)
    key: Any = None  # its pending mapping key: None (a key comes next) or _SKIP
    is_map = False
    documents = 0
    try:
        while (event := get_event()) is not None:
            kind = type(event)
            if kind is scalar_event:
                if is_map and key is None:
                    key = event.value
                    continue
                node = leaf(event.start_mark.index, event.end_mark.index, event.value)
                if is_map:
                    if key is not _SKIP:
                        top[key] = node
                    key = None
                elif top is not None:
                    top.append(node)
                else:
                    root = node
            elif kind is mapping_start or kind is sequence_start:
                if len(stack) >= MAX_DEPTH:
                    problem = f"nested more than {MAX_DEPTH} levels deep"
                    raise ComposerError(None, None, problem, event.start_mark)
                child: Any = {} if kind is mapping_start else []
                if is_map:
                    if key is not None and key is not _SKIP:
                        top[key] = child
                    stack.append((top, _SKIP if key is None else None, True))
                else:
                    if top is not None:
                        top.append(child)
                    else:
                        root = child
                    stack.append((top, None, False))
                top, key, is_map = child, None, kind is mapping_start
            elif kind is mapping_end or kind is sequence_end:
                top, key, is_map = stack.pop()
            elif kind is alias_event:
                problem = f"aliases (*{event.anchor}) are not allowed"
                raise ComposerError(None, None, problem, event.start_mark)
            elif kind is document_start:
                documents += 1
                if documents > 1:
                    context = "expected a single document in the stream"
                    problem = "but found another document"
                    raise ComposerError(context, None, problem, event.start_mark)
            elif kind is stream_end:
                break
    finally:
        loader.dispose()
    return root


_SKIP = object()


def yaml_problem(exc: yaml.YAMLError, text: str) -> tuple[int | None, str]:
    """The 1-based line (when known) and the one-line reason of a YAML error."""
    if isinstance(exc, yaml.MarkedYAMLError):
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        return line, str(exc.problem or exc.context or "invalid YAML")
    if isinstance(exc, ReaderError) and isinstance(exc.character, int):
        line = text.count("\n", 0, exc.position) + 1
        return line, f"unacceptable character #x{exc.character:04x}: {exc.reason}"
    return None, str(exc).splitlines()[0]


def json_bounds(text: str, *, numbers: bool = True) -> tuple[int, str] | None:
    """The offset and reason of the first place where JSON text is nested deeper than
    ``MAX_DEPTH`` or (``numbers``) has a number of more than ``MAX_DIGITS`` digits; None
    if it has none.

    Strings are skipped; the text need not be valid JSON (``json.loads`` judges that).
    Text with few brackets and no long digit run is passed without a scan.
    """
    tokens = _JSON_TOKEN[numbers]
    if text.count("[") + text.count("{") <= MAX_DEPTH and not (numbers and _LONG.search(text)):
        return None
    depth = 0
    for token in tokens.finditer(text):
        first = token[0][0]
        if first in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return token.start(), f"nested more than {MAX_DEPTH} levels deep"
        elif first in "]}":
            depth -= 1
        elif first != '"':
            return token.start(), f"a number of more than {MAX_DIGITS} digits"
    return None


class LinearPattern(Protocol):
    """A compiled RE2 pattern: matching time linear in the text."""

    def search(self, text: str) -> object | None:
        """A match anywhere in ``text``, or None."""

    def fullmatch(self, text: str) -> object | None:
        """A match of the whole ``text``, or None."""


def compile_linear(pattern: str) -> LinearPattern:
    """Compile with RE2; ``ValueError`` with RE2's reason for a pattern it refuses
    (backreferences, lookaround, a program beyond RE2's memory budget)."""
    try:
        return cast(LinearPattern, re2.compile(pattern, _RE2_OPTIONS))
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise ValueError(text) from None
