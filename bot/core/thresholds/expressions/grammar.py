"""A small, safe grammar for the checks CI writes as strings: a tokenizer and a parser.

``median(data["train/loss"]) < 1.1``, ``(v['value'] <= 3.3) and (v['epoch'] < 10)``,
``mean(data['timing/step_s'][-5:]) <= 42``, ``eval/all/avg_score >= 0.56 && x/y < $MAX``.

Grammar (Python's precedence, a subset of its syntax)::

    expr     := [assert] or [, anything]    # "assert x < 1, 'msg'": the message is skipped
    or       := and (("or" | "||") and)*
    and      := not (("and" | "&&") not)*
    not      := "not" not | compare
    compare  := arith (("<" | "<=" | ">" | ">=" | "==" | "!=" | "in" | "is" ...) arith)*
    arith    := term (("+" | "-") term)*;  term := factor (("*" | "/" | "//" | "%") factor)*
    factor   := ("-" | "+" | "~") factor | atom postfix* ["**" factor]
    postfix  := "(" arguments ")" | "[" index-or-slice "]" | "." NAME
    atom     := NUMBER | STRING+ | NAME | PATH | $VAR | ${VAR} | "(" or ")"

A ``PATH`` is a bare metric path with slashes, written without spaces: ``eval/all/avg_score``
(each segment after the first holds a letter, so ``x/2`` stays a division).  ``$VAR`` is a
shell variable, opaque: it is never a literal nor a metric.

Why hand-written and not ``ast.parse(expr, mode="eval")`` with an allow-list of node types:
bare metric paths are division in Python, ``$VAR`` and ``&&`` are syntax errors there, and
CPython's parser is not bounded by us (it recurses on nested brackets and builds the whole
tree before any allow-list sees it).  This parser never evaluates anything, reads at most
``MAX_EXPRESSION_CHARS`` characters, nests at most ``MAX_NESTING`` levels, and every token
regex is linear (possessive quantifiers).  Any other input is an ``ExpressionError``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

MAX_EXPRESSION_CHARS = 2000
"""Longer strings are not read as expressions (real checks are a few hundred characters)."""
MAX_NESTING = 20
"""Brackets, calls and unary operators nested deeper than this are an ``ExpressionError``."""

TokenKind = Literal["num", "str", "name", "path", "var", "op", "end"]
_TOKEN = re.compile(
    r"(?P<ws>\s++)"
    r"|(?P<num>(?:\d++\.?+\d*+|\.\d++)(?:[eE][+-]?+\d++)?+)(?![\w.])"
    r"|(?P<str>'[^'\\\n]*+(?:\\.[^'\\\n]*+)*+'|\"[^\"\\\n]*+(?:\\.[^\"\\\n]*+)*+\")"
    r"|(?P<path>[A-Za-z_][\w.\-]*+(?:/[\d.\-@]*+[A-Za-z_][\w.\-@]*+)++)"
    r"|(?P<name>[A-Za-z_]\w*+)"
    r"|(?P<var>\$(?:[A-Za-z_]\w*+|\{[A-Za-z_]\w*+\}))"
    r"|(?P<op>\*\*|//|<=|>=|==|!=|&&|\|\||[-+*/%<>()\[\],:.=~])"
)
_STRING_ESCAPE = re.compile(r"\\(.)")
_COMPARE = frozenset({"<", "<=", ">", ">=", "==", "!="})
_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "if", "else", "lambda", "for", "assert"})
_CONSTANTS = frozenset({"True", "False", "None"})


class ExpressionError(ValueError):
    """The text is not an expression of this grammar (the message says where)."""


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str  # as written; strings: their value (quotes removed, \\ \' \" unescaped)
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Node:
    """One node of the tree; ``start``/``end``: its span in the expression text.

    ``kind`` and what ``text`` / ``children`` hold:

    * ``num`` (the literal), ``str`` (the value), ``name``, ``path``, ``var``, ``const``;
    * ``unary`` / ``binary`` (the operator; operands), ``not`` (operand);
    * ``and`` / ``or`` (operands), ``compare`` (operands; ``ops`` between them);
    * ``call`` (function, then arguments; a keyword argument is a ``keyword`` node: its
      name, its value), ``subscript`` (base, index), ``slice`` (lower, upper, step: each
      may be None), ``attr`` (the attribute name; base).
    """

    kind: str
    start: int
    end: int
    text: str = ""
    children: tuple[Node | None, ...] = ()
    ops: tuple[str, ...] = ()


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` (whitespace dropped) ending with an ``end`` token."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"longer than {MAX_EXPRESSION_CHARS} characters")
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ExpressionError(f"unexpected {text[pos]!r} at character {pos + 1}")
        kind = match.lastgroup
        if kind == "str":
            value = _STRING_ESCAPE.sub(_unescape, match[0][1:-1])
            tokens.append(Token("str", value, pos, match.end()))
        elif kind != "ws":
            tokens.append(Token(kind, match[0], pos, match.end()))  # type: ignore[arg-type]
        pos = match.end()
    tokens.append(Token("end", "", len(text), len(text)))
    return tokens


def _unescape(match: re.Match[str]) -> str:
    return match[1] if match[1] in "\\'\"" else match[0]


def parse(text: str) -> Node:
    """The tree of one expression; ``ExpressionError`` for anything else."""
    return _Parser(tokenize(text)).expression()


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.depth = 0

    # ---------------------------------------------------------------- tokens

    def peek(self, ahead: int = 0) -> Token:
        """The current token (``ahead``: a later one); the ``end`` token is never passed."""
        if ahead:
            return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]
        return self.tokens[self.i]

    def accept(self, *texts: str) -> Token | None:
        token = self.tokens[self.i]
        if token.text in texts and token.kind in ("op", "name"):
            self.i += 1
            return token
        return None

    def expect(self, text: str) -> Token:
        token = self.accept(text)
        if token is None:
            raise self.error(f"expected {text!r}")
        return token

    def error(self, what: str) -> ExpressionError:
        token = self.peek()
        shown = repr(token.text) if token.kind != "end" else "the end"
        return ExpressionError(f"{what} at {shown} (character {token.start + 1})")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"nested more than {MAX_NESTING} levels deep")

    # ---------------------------------------------------------------- grammar

    def expression(self) -> Node:
        asserted = self.accept("assert") is not None
        node = self.disjunction()
        if asserted and self.accept(","):  # "assert x < 1, 'message'": skip the message
            self.i = len(self.tokens) - 1
        if self.peek().kind != "end":
            raise self.error("unexpected text")
        return node

    def disjunction(self) -> Node:
        self.enter()
        values = [self.conjunction()]
        while self.accept("or", "||"):
            values.append(self.conjunction())
        self.depth -= 1
        return values[0] if len(values) == 1 else _joined("or", values)

    def conjunction(self) -> Node:
        values = [self.negation()]
        while self.accept("and", "&&"):
            values.append(self.negation())
        return values[0] if len(values) == 1 else _joined("and", values)

    def negation(self) -> Node:
        token = self.accept("not")
        if token is None:
            return self.comparison()
        self.enter()
        operand = self.negation()
        self.depth -= 1
        return Node("not", token.start, operand.end, children=(operand,))

    def comparison(self) -> Node:
        operands = [self.arith()]
        ops: list[str] = []
        while (op := self.comparison_op()) is not None:
            ops.append(op)
            operands.append(self.arith())
        if not ops:
            return operands[0]
        return Node("compare", operands[0].start, operands[-1].end, "", tuple(operands), tuple(ops))

    def comparison_op(self) -> str | None:
        token = self.peek()
        if token.kind == "op" and token.text in _COMPARE:
            self.i += 1
            return token.text
        if self.accept("in"):
            return "in"
        if self.accept("is"):
            return "is not" if self.accept("not") else "is"
        if token.kind == "name" and token.text == "not" and self.peek(1).text == "in":
            self.i += 2
            return "not in"
        return None

    def arith(self) -> Node:
        node = self.term()
        while (op := self.accept("+", "-")) is not None:
            right = self.term()
            node = Node("binary", node.start, right.end, op.text, (node, right))
        return node

    def term(self) -> Node:
        node = self.factor()
        while (op := self.accept("*", "/", "//", "%")) is not None:
            right = self.factor()
            node = Node("binary", node.start, right.end, op.text, (node, right))
        return node

    def factor(self) -> Node:
        op = self.accept("-", "+", "~")
        if op is not None:
            self.enter()
            operand = self.factor()
            self.depth -= 1
            return Node("unary", op.start, operand.end, op.text, (operand,))
        node = self.postfix(self.atom())
        if self.accept("**"):
            self.enter()
            right = self.factor()
            self.depth -= 1
            node = Node("binary", node.start, right.end, "**", (node, right))
        return node

    def postfix(self, node: Node) -> Node:
        while True:
            if self.accept("("):
                args = self.arguments()
                end = self.expect(")").end
                node = Node("call", node.start, end, "", (node, *args))
            elif self.accept("["):
                index = self.index()
                end = self.expect("]").end
                node = Node("subscript", node.start, end, "", (node, index))
            elif self.accept("."):
                name = self.peek()
                if name.kind != "name" or name.text in _KEYWORDS:
                    raise self.error("expected an attribute name")
                self.i += 1
                node = Node("attr", node.start, name.end, name.text, (node,))
            else:
                return node

    def arguments(self) -> list[Node]:
        args: list[Node] = []
        while self.peek().text != ")" or self.peek().kind != "op":
            name, after = self.peek(), self.peek(1)
            if name.kind == "name" and after.kind == "op" and after.text == "=":
                self.i += 2
                value = self.disjunction()
                args.append(Node("keyword", name.start, value.end, name.text, (value,)))
            else:
                args.append(self.disjunction())
            if not self.accept(","):
                break
        return args

    def index(self) -> Node:
        start = self.peek().start
        parts: list[Node | None] = [None, None, None]
        slot = 0
        while True:
            token = self.peek()
            if not (token.kind == "op" and token.text in (":", "]")):
                parts[slot] = self.disjunction()
            if slot < 2 and self.accept(":"):
                slot += 1
                continue
            break
        if slot == 0:
            if parts[0] is None:
                raise self.error("expected an index")
            return parts[0]
        return Node("slice", start, self.peek().start, "", tuple(parts))

    def atom(self) -> Node:
        token = self.peek()
        if token.kind in ("num", "path", "var"):
            self.i += 1
            return Node(token.kind, token.start, token.end, token.text)
        if token.kind == "str":
            value, end = "", token.end
            while self.peek().kind == "str":  # adjacent strings join, as in Python
                value += self.peek().text
                end = self.peek().end
                self.i += 1
            return Node("str", token.start, end, value)
        if token.kind == "name" and token.text not in _KEYWORDS:
            self.i += 1
            kind = "const" if token.text in _CONSTANTS else "name"
            return Node(kind, token.start, token.end, token.text)
        if self.accept("("):
            node = self.disjunction()
            self.expect(")")
            return node
        raise self.error("expected a value")


def _joined(kind: str, values: list[Node]) -> Node:
    return Node(kind, values[0].start, values[-1].end, "", tuple(values))
