"""Numbers followed to the shell comparisons that fail a CI job (issue 28, shell).

A comparison is a test command — ``[ … ]`` / ``test`` / ``[[ … ]]`` (``-lt -le -gt -ge``,
``<`` ``>``; ``&&``-joined), ``(( … ))``, ``$(echo "$x < 0.55" | bc -l)`` inside them,
``awk -v p="$x" 'BEGIN { exit !(p < 12.8) }'``, ``python -c "…sys.exit(0 if float('$x') >= 27.1
else 1)"`` — a shell function's body (its parameters bound to the call's arguments), or a
repository Python script given the bound as an argument (``argv.argument_checks`` on the
script's text in ``related``).  It fails the job when followed by ``|| exit 1`` /
``|| { …; exit 1; }`` (or ``&& exit 1``), when it is the condition of ``if …; then …
exit 1; fi`` (``!`` flips it), under ``set -e`` / ``set -o errexit``, or as the script's last
command; ``return N`` (N ≠ 0) in a function counts as ``exit``.

Each side is followed: a number literal; a variable assigned a number once (the gate's span
is that assignment); a function parameter (to the call's argument, functions nested at most
``MAX_DEPTH`` deep); a value read by ``jq '.eval.accuracy'`` (metric ``eval/accuracy``, filters
after ``|`` ignored) or a ``python -c`` subscript (``['reward_mean']``), else the variable's name;
in a function, an argument that names the metric (a parameter ``name`` / ``metric`` / ``key``,
or the call's only bare word).  A run must pass ``value op number``; ``==`` / ``!=``, floors at
0 (and ``>= 1``) are no gates; counts and sizes (``num``, ``count``, ``gpus``, ``steps`` …) are
hints, and so is a number whose other side cannot be followed (with config lines when it is a
variable).  Bounds: the lexer's; the ``python -c`` code and called scripts up to
``argv.MAX_CHARS``; one pass over the commands per call of a function.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from typing import cast

from bot.core.models import Gate, Op, UnboundVariable
from bot.core.thresholds.hints import config_lines, guess_metric
from bot.core.thresholds.shell.argv import MAX_CHARS, NEGATED, Arg, Positional, argument_checks
from bot.core.thresholds.shell.calls import script_call
from bot.core.thresholds.shell.lexer import Operator, Token, Word
from bot.core.thresholds.shell.quoting import Part, unquote_offsets
from bot.core.thresholds.shell.scan import NUMBER, Assignment, Scan, marked, shown

MAX_DEPTH = 2
_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!"})
_KEYWORDS |= {"{", "}", "time", "function"}
_SEPARATORS = frozenset({"\n", ";", "&&", "||", "|", "&", "|&", ";;", ";&", ")"})
_REDIRECTS = frozenset({"<", ">", ">>", "<&", ">&", "&>", ">|", "<>", "<<<"})
_TEST_OPS: dict[str, Op | str] = {"-lt": "<", "-le": "<=", "-gt": ">", "-ge": ">=", "<": "<"}
_TEST_OPS |= {">": ">", "-eq": "==", "=": "==", "==": "==", "-ne": "!=", "!=": "!="}
_FLIP: dict[str, str] = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NOT: dict[str, str] = {**cast(dict[str, str], NEGATED), "==": "!=", "!=": "=="}
_NUMBER = re.compile(NUMBER)
_VAR = re.compile(r"\$(?:\{(?P<a>[A-Za-z_]\w*|\d)\}|(?P<b>[A-Za-z_]\w*|\d))")
_NAME = re.compile(r"[A-Za-z_]\w*")
_CMP = r"(?P<a>[^()<>=!&|]+?)\s*(?P<op><=|>=|==|!=|<|>)\s*(?P<b>[^()<>=!&|]+?)"
_BC = re.compile(
    r"\$\(\s*(?:echo\s+(?:-e\s+)?(?:\"(?P<d>[^\"]*)\"|'(?P<s>[^']*)'|(?P<p>[^|\"']*?))"
    r"\s*\|\s*bc(?:\s+-\w+)*"
    r"|bc(?:\s+-\w+)*\s*<<<\s*(?:\"(?P<d2>[^\"]*)\"|'(?P<s2>[^']*)'))\s*\)",
    re.DOTALL,
)
_AWK = (
    (re.compile(rf"exit\s*!\s*\(\s*{_CMP}\s*\)"), True),
    (re.compile(rf"exit\s*\(\s*{_CMP}\s*\)"), False),
    (
        re.compile(rf"if\s*\(\s*{_CMP}\s*\)\s*\{{?\s*(?:print[^;{{}}]*;\s*)?exit\s*\(?\s*[1-9]"),
        False,
    ),
)
_JQ = re.compile(r"\bjq\b(?:\s+-[-\w]+)*\s+(?:'(?P<s>[^']*)'|\"(?P<d>[^\"]*)\"|(?P<p>\.\S*))")
_JQ_KEY = re.compile(
    r"\.(?P<a>[A-Za-z_][\w-]*)|\[\s*\"(?P<b>[^\"]+)\"\s*\]|\.?\[\s*'(?P<c>[^']+)'\s*\]"
)
_PY_KEY = re.compile(r"\[\s*\\?[\"'](?P<k>[^\"'\\\]]+)\\?[\"']\s*\]")
_NAME_PARAMS = frozenset({"name", "metric", "key", "label", "what", "metric_name", "title"})
_COUNTS = frozenset(
    {"count", "counts", "num", "n", "step", "steps", "epoch", "epochs", "gpu", "gpus", "size"}
    | {"len", "length", "iter", "iters", "iteration", "iterations", "nodes", "lines", "rc"}
    | {"status", "code", "retries", "i", "j", "k", "world"}
)
_COUNTED = re.compile(r"\$[#?]|\$\{#|\b(?:wc|nproc|nvidia-smi|ls|find|grep\s+-c)\b")
"""An argument count, exit status, length or a count a command prints: never a metric."""
MAX_CALLS = 256
"""Function calls followed per script, at most."""
MAX_WORK = 100_000
"""Commands visited per script (in the script and the functions it calls), at most."""
_PYTHON = re.compile(r"(?:\S*/)?python(?:\d+(?:\.\d+)?)?")


@dataclass(frozen=True, slots=True)
class Raw:
    """An operand's text as written, at ``start`` in the file (-1: nowhere)."""

    text: str
    start: int
    arith: bool = False  # a bare name is a shell variable (``(( x < 1 ))``)
    metric: str = ""  # a value read at this key (``d['acc']`` in ``python -c``)


@dataclass(frozen=True, slots=True)
class Num:
    literal: str
    start: int
    variable: str = ""  # the variable assigned the number, if any


@dataclass(frozen=True, slots=True)
class Val:
    metric: str


@dataclass(frozen=True, slots=True)
class _Unknown:
    text: str


Operand = Num | Val | _Unknown


@dataclass
class _Cmd:
    words: list[Word] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    before: str = ""
    after: str = ""
    arith: Raw | None = None
    function: str = ""  # a function definition's name


@dataclass(frozen=True, slots=True)
class _Env:
    """A function call: its arguments, the locals bound to them, the argument naming the
    metric; ``caller`` resolves the arguments."""

    args: tuple[Raw, ...]
    params: Mapping[str, int]
    name: str | None
    caller: _Env | None
    depth: int
    returns: bool  # a ``return N`` (N ≠ 0) fails the job: the call's failure does


_TOP = _Env((), {}, None, None, 0, False)


def _word_raw(word: Word, text: str) -> Raw:
    return Raw(text[word.start : word.end], word.start)


def _pseudo(op: Operator) -> Word:
    return Word(op.start, op.start + len(op.text), [Part("plain", op.text, op.start)])


def _arith_end(tokens: list[Token], i: int) -> int | None:
    """Given ``tokens[i]`` after ``((``, the index of the first ``)`` of the closing ``))``."""
    depth = 0
    for j in range(i, len(tokens)):
        t = tokens[j]
        if isinstance(t, Operator) and t.text == "(":
            depth += 1
        elif isinstance(t, Operator) and t.text == ")":
            after = tokens[j + 1] if j + 1 < len(tokens) else None
            if depth == 0 and isinstance(after, Operator) and after.text == ")":
                return j
            depth -= 1
    return None


def _commands(text: str, tokens: list[Token]) -> list[_Cmd]:
    """Simple commands with their leading keywords and the separators around them."""
    out: list[_Cmd] = []
    cur = _Cmd()
    i = 0

    def close(sep: str) -> _Cmd:
        if cur.words or cur.keywords or cur.arith or cur.function:
            cur.after = sep
            out.append(cur)
            return _Cmd(before=sep)
        return cur

    while i < len(tokens):
        t = tokens[i]
        in_test = (
            bool(cur.words) and cur.words[0].unquoted() == "[[" and cur.words[-1].unquoted() != "]]"
        )
        if isinstance(t, Word):
            if not cur.words and cur.arith is None and t.unquoted() in _KEYWORDS:
                cur.keywords.append(t.unquoted())
            else:
                cur.words.append(t)
            i += 1
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if in_test:
            cur.words.append(_pseudo(t))
        elif t.text == "(" and isinstance(nxt, Operator) and nxt.text == "(" and not cur.words:
            end = _arith_end(tokens, i + 2)
            if end is None:
                break
            cur.arith = Raw(text[t.start + 2 : tokens[end].start], t.start + 2, arith=True)
            i = end + 2
            continue
        elif (
            t.text == "(" and len(cur.words) == 1 and isinstance(nxt, Operator) and nxt.text == ")"
        ):
            cur.function, cur.words = cur.words[0].unquoted(), []
            cur = close("\n")
            i += 2
            continue
        elif t.text in _SEPARATORS:
            cur = close(t.text)
        elif t.text in _REDIRECTS and isinstance(nxt, Word):
            i += 1
        i += 1
    close("")
    for c in out:  # ``function name {``
        if "function" in c.keywords and c.words:
            brace = c.words[-1].unquoted() == "{" and len(c.words) > 1
            c.function, c.words = c.words[0].unquoted(), []
            c.keywords += ["{"] * brace
    return out


def _exits(cmd: _Cmd, bare: bool, returns: bool) -> bool:
    """``exit N`` (N ≠ 0; a bare ``exit`` after ``||``), ``return N`` when ``returns`` (the
    function's failure fails the job), or ``false``."""
    words = [w.unquoted() for w in cmd.words]
    if not words:
        return False
    if words[0] == "exit" or (words[0] == "return" and returns):
        return (len(words) == 1 and bare) or (len(words) > 1 and words[1] not in ("0", "$?"))
    return words[0] == "false"


@dataclass
class _Shape:
    """Where each ``{`` group ends and which branches of each ``if`` exit: one pass."""

    cmds: list[_Cmd]
    group_end: dict[int, int] = field(default_factory=dict)
    # per ``if``/``elif`` condition: (then, else) branch flags, by exit only and by exit or return
    branches: dict[int, tuple[bool, bool, bool, bool]] = field(default_factory=dict)
    exits: list[int] = field(default_factory=list)  # prefix counts of exit commands
    returns: list[int] = field(default_factory=list)  # … of exit or return commands

    @classmethod
    def of(cls, cmds: list[_Cmd]) -> _Shape:
        shape = cls(cmds)
        braces: list[int] = []
        frames: list[dict[str, object]] = []
        flags: dict[int, list[bool]] = {}
        exits = returns = 0
        for k, c in enumerate(cmds):
            for keyword in c.keywords:
                if keyword == "{":
                    braces.append(k)
                elif keyword == "}" and braces:
                    shape.group_end[braces.pop()] = k
                elif keyword == "if":
                    frames.append({"cond": k, "branch": 0})
                    flags[k] = [False] * 4
                elif keyword == "elif" and frames:
                    frames[-1].update(cond=k, branch=0)
                    flags[k] = [False] * 4
                elif keyword in ("then", "else") and frames:
                    frames[-1]["branch"] = 1 if keyword == "then" else 2
                elif keyword == "fi" and frames:
                    frames.pop()
            by_exit, by_return = _exits(c, False, False), _exits(c, False, True)
            exits, returns = exits + by_exit, returns + by_return
            shape.exits.append(exits)
            shape.returns.append(returns)
            if frames and (branch := cast(int, frames[-1]["branch"])):
                mark = flags[cast(int, frames[-1]["cond"])]
                mark[branch - 1] |= by_exit
                mark[branch + 1] |= by_return
        shape.branches = {k: (f[0], f[1], f[2], f[3]) for k, f in flags.items()}
        return shape

    def group(self, k: int) -> range:
        """The commands of the ``{ … }`` group starting at ``k`` (or that one command)."""
        return range(k, self.group_end.get(k, k) + 1)

    def exit_in(self, span: range, returns: bool) -> bool:
        counts = self.returns if returns else self.exits
        return counts[span[-1]] - (counts[span[0] - 1] if span[0] else 0) > 0

    def branches_exit(self, k: int, returns: bool) -> bool | None:
        """For the ``if`` whose condition is ``k``: True when its ``then`` branch exits,
        False when only its ``else`` branch does, None when neither."""
        then_exit, else_exit, then_any, else_any = self.branches.get(k, (False,) * 4)
        if then_any if returns else then_exit:
            return True
        return False if (else_any if returns else else_exit) else None

    def failing(self, k: int, errexit: bool, last: int, returns: bool) -> bool | None:
        """True: the job fails when command ``k`` succeeds; False: when it fails; None:
        neither.  ``last``: the script's last command (-1 in a function); ``returns``: a
        ``return N`` fails the job (a function whose call fails it)."""
        c = self.cmds[k]
        flip = c.keywords.count("!") % 2 == 1
        result: bool | None = None
        if {"if", "elif"} & set(c.keywords) and c.after not in ("&&", "||", "|"):
            result = self.branches_exit(k, returns)
        elif {"while", "until"} & set(c.keywords) or c.before in ("&&", "||", "|"):
            return None
        elif c.after in ("||", "&&") and k + 1 < len(self.cmds):
            nxt = self.cmds[k + 1]
            exits = _exits(nxt, c.after == "||", returns) or (
                "{" in nxt.keywords and self.exit_in(self.group(k + 1), returns)
            )
            result = (c.after == "&&") if exits else None
        elif c.after == "|":
            return None
        elif (errexit and not flip) or k == last:
            result = False
        if result is None:
            return None
        return not result if flip else result


def _metric_of(value: str) -> str | None:
    """The key a ``$(jq …)`` or ``$(python -c …)`` reads: ``.eval.acc`` -> ``eval/acc``."""
    jq = _JQ.search(value)
    if jq is not None:
        path = (jq["s"] or jq["d"] or jq["p"] or "").split("|")[0].strip()
        keys = [m["a"] or m["b"] or m["c"] for m in _JQ_KEY.finditer(path)]
        return "/".join(keys) if path.startswith(".") and keys else None
    if "python" in value:
        keys = [m["k"] for m in _PY_KEY.finditer(value)]
        return "/".join(keys) if keys else None
    return None


def _stripped(raw: Raw) -> Raw:
    t = raw.text
    lead = len(t) - len(t.lstrip())
    t, start = t.strip(), raw.start + lead
    while len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        t, start = t[1:-1], start + 1
    return Raw(t, start, raw.arith)


def _bc(raw: Raw) -> tuple[Raw, str, Raw] | None:
    """``$(echo "a op b" | bc)``: its comparison."""
    raw = _stripped(raw)
    m = _BC.fullmatch(raw.text)
    if m is None:
        return None
    group = next(g for g in ("d", "s", "d2", "s2", "p") if m[g] is not None)
    split = _top_split(m[group])
    if split is None:
        return None
    a, op, b = split
    at = raw.start + m.start(group)
    return Raw(a, at), op, Raw(b, at + len(a) + len(op))


def _truth(a: Raw, op: str, b: Raw) -> tuple[Raw, str, Raw] | None:
    """``$(… | bc) op k`` (k 0 or 1) as the comparison inside, negated as needed."""
    for x, y, o in ((a, b, op), (b, a, _FLIP[op])):
        inner = _bc(x)
        k = _stripped(y).text
        if inner is None or k not in ("0", "1"):
            continue
        holds = {
            v: {"<": v < int(k), "<=": v <= int(k), ">": v > int(k), ">=": v >= int(k)}.get(
                o, (v == int(k)) == (o == "==")
            )
            for v in (0, 1)
        }
        if holds[1] and not holds[0]:
            return inner
        if holds[0] and not holds[1]:
            return inner[0], _NOT[inner[1]], inner[2]
    return None


def _top_split(text: str) -> tuple[str, str, str] | None:
    """``a op b`` with ``op`` outside ``$(…)``, brackets and quotes."""
    depth, quote, i = 0, "", 0
    while i < len(text):
        c = text[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and c in "<>=!":
            op = text[i : i + 2] if text[i : i + 2] in ("<=", ">=", "==", "!=") else c
            if op in ("<", ">", "<=", ">=", "==", "!="):
                return text[:i], op, text[i + len(op) :]
        i += 1
    return None


@dataclass
class _Follow:
    path: str
    text: str
    found: Scan
    related: Mapping[str, str]
    shape: _Shape
    errexit: bool = False
    by_name: dict[str, list[Assignment]] = field(default_factory=dict)
    gates: list[Gate] = field(default_factory=list)
    hints: list[UnboundVariable] = field(default_factory=list)
    bodies: dict[str, range] = field(default_factory=dict)
    params: dict[str, dict[str, int]] = field(default_factory=dict)
    calls: int = 0
    work: int = 0

    # ------------------------------------------------------------------ operands

    def _variable(self, name: str, env: _Env) -> Operand:
        if name.isdigit() or name in env.params:
            index = int(name) if name.isdigit() else env.params[name]
            if env.caller is None or not 0 < index <= len(env.args):
                return _Unknown(f"${name}")
            got = self.operand(env.args[index - 1], env.caller)
            return Val(env.name) if isinstance(got, Val) and env.name else got
        assigned = self.by_name.get(name, [])
        if len(assigned) == 1 and assigned[0].literal is not None:
            a = assigned[0]
            return Num(a.literal, a.start, name) if a.literal is not None else _Unknown(name)
        if any(a.literal is not None for a in assigned):
            return _Unknown(f"${name}")
        metric = _metric_of(assigned[0].value) if len(assigned) == 1 else None
        return Val(metric or name)

    def operand(self, raw: Raw, env: _Env) -> Operand:
        if raw.metric:
            return Val(raw.metric)
        r = _stripped(raw)
        if _NUMBER.fullmatch(r.text):
            return Num(r.text, r.start) if r.start >= 0 else _Unknown(r.text)
        var = _VAR.fullmatch(r.text)
        if var is not None:
            return self._variable(var["a"] or var["b"], env)
        if r.arith and _NAME.fullmatch(r.text):
            return self._variable(r.text, env)
        if r.text.startswith("$(") and r.text.endswith(")"):
            metric = _metric_of(r.text)
            return Val(metric) if metric else _Unknown(r.text)
        return _Unknown(r.text)

    # ------------------------------------------------------------------ comparisons

    def _test(self, cmd: _Cmd) -> tuple[list[tuple[Raw, str, Raw]], bool]:
        """The comparisons a test command requires, and whether all must hold (``&&``)."""
        words = [w.unquoted() for w in cmd.words]
        inner = cmd.words[1:-1] if words[-1] in ("]", "]]") else cmd.words[1:]
        groups: list[list[Word]] = [[]]
        joiner = ""
        for w in inner:
            if w.unquoted() in ("&&", "-a", "||", "-o"):
                joiner = joiner or w.unquoted()
                groups.append([])
            else:
                groups[-1].append(w)
        if joiner in ("||", "-o"):
            return [], False
        found = []
        for g in groups:
            flip = len(g) == 4 and g[0].unquoted() == "!"
            g = g[1:] if flip else g
            op = _TEST_OPS.get(g[1].unquoted()) if len(g) == 3 else None
            if op is None:
                return [], False
            a, b = _word_raw(g[0], self.text), _word_raw(g[2], self.text)
            inner_cmp = _truth(a, op, b)
            cmp = inner_cmp or (a, op, b)
            found.append((cmp[0], _NOT[cmp[1]], cmp[2]) if flip else cmp)
        return found, len(found) > 1

    def _arith(self, raw: Raw) -> list[tuple[Raw, str, Raw]]:
        whole = _bc(raw)
        if whole is not None:
            return [whole]
        split = _top_split(raw.text)
        if split is None:
            return []
        a, op, b = split
        ra, rb = Raw(a, raw.start, True), Raw(b, raw.start + len(a) + len(op), True)
        return [_truth(ra, op, rb) or (ra, op, rb)]

    def _awk(self, cmd: _Cmd) -> list[tuple[Raw, str, Raw]]:
        variables: dict[str, Raw] = {}
        program: Word | None = None
        words = cmd.words[1:]
        i = 0
        while i < len(words):
            w = words[i].unquoted()
            if w == "-v" and i + 1 < len(words):
                raw = _word_raw(words[i + 1], self.text)
                name, eq, _ = raw.text.partition("=")
                if eq:
                    variables[name] = Raw(raw.text[len(name) + 1 :], raw.start + len(name) + 1)
                i += 2
                continue
            if not w.startswith("-") and program is None:
                program = words[i]
            i += 1
        if program is None or len(program.parts) != 1:
            return []
        part = program.parts[0]
        for pattern, holds in _AWK:
            m = pattern.search(part.text)
            if m is None:
                continue
            sides = []
            for side in ("a", "b"):
                t, at = m[side], part.start + m.start(side)
                sides.append(variables.get(t.strip(), Raw(t, at if _NUMBER.fullmatch(t) else -1)))
            op = m["op"] if holds else _NOT[m["op"]]
            return [(sides[0], op, sides[1])]
        return []

    def _python(self, cmd: _Cmd) -> list[tuple[Raw, str, Raw]]:
        words = [w.unquoted() for w in cmd.words]
        if "-c" not in words or words.index("-c") + 1 >= len(words):
            return []
        code_word = cmd.words[words.index("-c") + 1]
        if len(code_word.parts) != 1:
            return []
        part = code_word.parts[0]
        code, offsets = (
            unquote_offsets(part)
            if part.kind != "plain"
            else (
                part.text,
                list(range(part.start, part.start + len(part.text))),
            )
        )
        if len(code) > MAX_CHARS:
            return []
        plain: list[str] = []
        where: list[int] = []
        last = 0
        for m in _VAR.finditer(code):
            plain.append(code[last : m.start()])
            where += offsets[last : m.start()]
            name = f"__sh_{m['a'] or m['b']}"
            plain.append(name)
            where += [-1] * len(name)
            last = m.end()
        plain.append(code[last:])
        where += offsets[last:]
        source = "".join(plain)
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError):
            return []
        lines = source.split("\n")
        starts = list(accumulate((len(x) + 1 for x in lines[:-1]), initial=0))

        def side(node: ast.expr) -> Raw:
            while isinstance(node, ast.Call) and ast.unparse(node.func) in ("float", "int"):
                if len(node.args) != 1:
                    break
                node = node.args[0]
            if isinstance(node, ast.Name) and node.id.startswith("__sh_"):
                return Raw("$" + node.id[5:], -1)
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                return Raw(node.value.replace("__sh_", "$"), -1)
            keys: list[str] = []
            while isinstance(node, ast.Subscript):
                key = node.slice
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    break
                keys.insert(0, key.value)
                node = node.value
            if keys:
                return Raw(ast.unparse(node), -1, metric="/".join(keys))
            if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
                at = starts[node.lineno - 1] + node.col_offset
                literal = ast.get_source_segment(source, node) or ""
                start = where[at] if at < len(where) else -1
                ok = start >= 0 and self.text[start : start + len(literal)] == literal
                return Raw(literal, start if ok else -1)
            return Raw(ast.unparse(node), -1)

        def compare(test: ast.expr, holds: bool) -> list[tuple[Raw, str, Raw]]:
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                return compare(test.operand, not holds)
            if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
                return []
            op = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}.get(type(test.ops[0]))
            if op is None:
                return []
            return [(side(test.left), op if holds else _NOT[op], side(test.comparators[0]))]

        found: list[tuple[Raw, str, Raw]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert):
                found += compare(node.test, True)
            elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.exit", "exit"):
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.IfExp) and isinstance(arg.body, ast.Constant):
                    found += compare(arg.test, arg.body.value in (0, None, False))
                elif isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.Not):
                    found += compare(arg.operand, True)
        return found

    # ------------------------------------------------------------------ results

    def _record(self, a: Operand, op: str, b: Operand, line: int, raws: tuple[Raw, Raw]) -> None:
        if isinstance(a, Num) and not isinstance(b, Num):
            a, b, op, raws = b, a, _FLIP[op], (raws[1], raws[0])
        if not isinstance(b, Num) or isinstance(a, Num) or op in ("==", "!="):
            return
        value = float(b.literal)
        if value == 0 or (value == 1 and op in (">=", ">") and "." not in b.literal):
            return
        at = self.found.line(b.start)
        if isinstance(a, _Unknown) and _COUNTED.search(a.text):
            return
        if isinstance(a, _Unknown):
            reason = (
                f"compared on line {line} with {shown(a.text)}, a value whose metric is not"
                " followed"
            )
            config = ""
            if b.variable:
                config = config_lines(
                    self.path, b.variable, guess_metric(b.variable), op, metric_guessed=True
                )
            name = b.variable or f"{a.text} {op}"[:80]
            self.hints.append(
                UnboundVariable(
                    name=name,
                    file=self.path,
                    line=at,
                    literal=b.literal,
                    reason=reason,
                    config=config,
                    compared=True,
                )
            )
            return
        words = set(re.split(r"[^a-z0-9]+", a.metric.lower()))
        if words & _COUNTS:
            reason = f"compared with {a.metric} on line {line}: a count or size, not a metric"
            self.hints.append(
                UnboundVariable(
                    name=b.variable or f"{a.metric} {op}",
                    file=self.path,
                    line=at,
                    literal=b.literal,
                    reason=reason,
                )
            )
            return
        self.gates.append(
            Gate(
                name=b.variable or f"{a.metric} {op}",
                file=self.path,
                line=at,
                metric=a.metric,
                op=cast(Op, op),
                value=value,
                literal=b.literal,
                start=b.start,
                end=b.start + len(b.literal),
                context=f"line {line}",
                ignored=marked(self.found, at, line),
            )
        )

    def _comparisons(self, cmd: _Cmd) -> tuple[list[tuple[Raw, str, Raw]], bool]:
        if cmd.arith is not None:
            return self._arith(cmd.arith), False
        first = cmd.words[0].unquoted() if cmd.words else ""
        if first in ("[", "[[", "test"):
            return self._test(cmd)
        if first in ("awk", "gawk", "mawk", "nawk"):
            return self._awk(cmd), False
        if _PYTHON.fullmatch(first):
            return self._python(cmd), False
        return [], False

    def walk(self, span: range, env: _Env) -> None:
        """Follow the commands in ``span`` (the script, or a function's body)."""
        last = len(self.shape.cmds) - 1 if env.depth == 0 else -1
        k = span.start
        while k < span.stop and self.work < MAX_WORK:
            self.work += 1
            cmd = self.shape.cmds[k]
            if cmd.function:  # a definition: followed at its calls
                k = self._body(k).stop
                continue
            failing = self.shape.failing(k, self.errexit, last, env.returns)
            first = cmd.words[0].unquoted() if cmd.words else ""
            k += 1
            if first in self.bodies and env.depth < MAX_DEPTH:  # its ``exit`` exits the job
                self._call(first, cmd, env, returns=failing is False)
                continue
            if failing is None:
                continue
            start = cmd.arith.start if cmd.arith else cmd.words[0].start if cmd.words else 0
            line = self.found.line(start)
            if not failing:
                self._script(cmd, env, line)
            found, joined = self._comparisons(cmd)
            if joined and failing:
                continue
            for a, op, b in found:
                op = _NOT[op] if failing else op
                self._record(self.operand(a, env), op, self.operand(b, env), line, (a, b))

    def _body(self, k: int) -> range:
        """The commands of the function defined at ``k`` (``name() {`` then its group, or
        ``function name {``)."""
        if "{" in self.shape.cmds[k].keywords:
            group = self.shape.group(k)
            return range(k + 1, group.stop)
        if k + 1 < len(self.shape.cmds) and "{" in self.shape.cmds[k + 1].keywords:
            return self.shape.group(k + 1)
        return range(k + 1, k + 1)

    def _call(self, name: str, cmd: _Cmd, env: _Env, *, returns: bool) -> None:
        self.calls += 1
        if self.calls > MAX_CALLS:
            return
        args = tuple(_word_raw(w, self.text) for w in cmd.words[1:])
        params = self.params[name]
        named = next((i for p, i in params.items() if p.lower() in _NAME_PARAMS), None)
        bare = [r for r in args if _NAME.fullmatch(_stripped(r).text) and "$" not in r.text]
        label: str | None = None
        if named is not None and named <= len(args):
            got = self.operand(args[named - 1], env)
            label = (
                _stripped(args[named - 1]).text
                if "$" not in args[named - 1].text
                else (got.metric if isinstance(got, Val) else None)
            )
        elif len(bare) == 1:
            label = _stripped(bare[0]).text
        inner = _Env(args, params, label, env, env.depth + 1, returns)
        self.walk(self.bodies[name], inner)

    def _script(self, cmd: _Cmd, env: _Env, line: int) -> None:
        call = script_call(cmd.words, "")
        text = (
            next((self.related[p] for p in call.paths if p in self.related), None) if call else None
        )
        if call is None or text is None:
            return
        for check in argument_checks(text):
            bound = self._argument(call.args, check.bound)
            if bound is None:
                continue
            metric: Operand = Val(check.key) if check.key else _Unknown("")
            if check.metric is not None:
                raw = self._argument(call.args, check.metric)
                if raw is not None:
                    r = _stripped(raw)
                    metric = Val(r.text) if "$" not in r.text and r.text else self._named(r, env)
            self._record(metric, check.op, self.operand(bound, env), line, (Raw("", -1), bound))

    def _named(self, raw: Raw, env: _Env) -> Operand:
        var = _VAR.fullmatch(raw.text)
        assigned = self.by_name.get(var["a"] or var["b"] or "", []) if var else []
        if len(assigned) == 1 and assigned[0].value and "$" not in assigned[0].value:
            return Val(assigned[0].value.strip("\"'"))
        return self.operand(raw, env)

    def _argument(self, args: list[Word], arg: Arg) -> Raw | None:
        raws = [_word_raw(w, self.text) for w in args]
        if isinstance(arg, int):
            return raws[arg - 1] if arg <= len(raws) else None
        if isinstance(arg, Positional):
            plain = [r for r, w in zip(raws, args, strict=True) if not w.unquoted().startswith("-")]
            return plain[arg.index - 1] if arg.index <= len(plain) else None
        for i, w in enumerate(args):
            word = w.unquoted()
            if word in arg and i + 1 < len(raws):
                return raws[i + 1]
            key, eq, _ = word.partition("=")
            if eq and key in arg:
                r = raws[i]
                at = r.text.index("=") + 1
                return Raw(r.text[at:], r.start + at)
        return None


def _errexit(cmds: list[_Cmd], text: str) -> bool:
    if re.match(r"#!\S+(?:\s+\S+)?\s+-\w*e", text):
        return True
    for c in cmds:
        words = [w.unquoted() for w in c.words]
        if words[:1] == ["set"]:
            if any(re.fullmatch(r"-[a-z]*e[a-z]*", w) for w in words[1:]):
                return True
            if "errexit" in words and "-o" in words:
                return True
    return False


def follow(
    path: str, text: str, found: Scan, related: Mapping[str, str]
) -> tuple[list[Gate], list[UnboundVariable]]:
    """The gates the script's failing comparisons bind, and the numbers they reach that
    are no gates or cannot be followed (hints)."""
    cmds = _commands(text, found.tokens)
    state = _Follow(path, text, found, related, _Shape.of(cmds), _errexit(cmds, text))
    for a in found.assignments:
        state.by_name.setdefault(a.name, []).append(a)
    for k, cmd in enumerate(cmds):
        if cmd.function:
            body = state.bodies[cmd.function] = state._body(k)
            locals_: dict[str, int] = {}
            for c in (cmds[j] for j in body):
                for w in c.words:
                    name, eq, value = w.unquoted().partition("=")
                    var = _VAR.fullmatch(value) if eq else None
                    if var is not None and (var["a"] or var["b"] or "").isdigit():
                        locals_[name] = int(var["a"] or var["b"])
            state.params[cmd.function] = locals_
    state.walk(range(len(cmds)), _TOP)
    unique: dict[tuple[int, str, str], Gate] = {}
    for g in state.gates:
        unique.setdefault((g.start, g.metric, g.op), g)
    return list(unique.values()), state.hints
