"""The metric a Python comparison checks, named from the compared expression.

* subscript keys, joined with ``/`` as the history flattens nested objects:
  ``metrics["accuracy"]`` -> ``accuracy``, ``results["gsm8k"]["acc"]`` -> ``gsm8k/acc``
  (integer indices are left out: ``results[0]["acc"]`` -> ``acc``; a key held by a constant
  or a loop variable is resolved: ``results[TASK]``; a call given one name, when the module
  gives it several, is keyed by it: ``run_task("mmlu")["acc"]`` -> ``mmlu/acc``);
* else the attribute: ``result.accuracy`` -> ``accuracy``;
* else the variable: ``acc``; a local assigned once from a subscript or attribute is
  followed (``top1 = evaluate(m)["top1"]`` -> ``top1``).

Conversions are transparent (``float(x)``, ``x.item()``, ``torch.tensor(x)``);
``mean``/``median``/``min``/``max`` of a series record the aggregation (and ``x[-5:]`` the
last steps, ``x[-6:-1]`` a window over them, ``x["loss"][100]`` one step: named with it);
``sum(x) / len(x)`` and ``sum(x[-10:]) / 10`` are means; a function of the file that
returns one expression is read with its parameters bound to the call's arguments
(``mean(data["loss"], -6, -1)``).  An element of a result written ``res[0]`` is the metric
``res[0]``.  A call of an unknown function is its name without ``get_``/``compute_``…
(``compute_accuracy(p, y)`` -> ``accuracy``), unless all its arguments are literals (a unit
test of that function, not a metric).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace

from bot.core.models import Aggregation
from bot.core.thresholds.python.resolver import MAX_DEPTH, Resolver
from bot.core.thresholds.python.scope import dotted
from bot.core.thresholds.python.values import Alias, At, Binding, Group, Num
from bot.core.thresholds.python.words import count_like, metric_like

_AGGREGATIONS: dict[str, Aggregation] = {
    "mean": "mean", "average": "mean", "nanmean": "mean", "fmean": "mean",
    "median": "median", "nanmedian": "median",
    "min": "min", "amin": "min", "nanmin": "min",
    "max": "max", "amax": "max", "nanmax": "max",
}  # fmt: skip
_TRANSPARENT = frozenset(
    {"float", "int", "round", "tensor", "array", "asarray", "as_tensor", "list", "tuple"}
    | {"item", "cpu", "detach", "numpy", "tolist", "double", "squeeze", "cuda", "float32"}
)
_NOT_METRICS = frozenset(
    {"len", "isinstance", "type", "hasattr", "getattr", "str", "repr", "bool", "id", "hash"}
    | {"sum", "any", "all", "sorted", "set", "dict", "open", "range", "zip", "enumerate"}
)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_NAME = re.compile(r"[A-Za-z][\w-]{0,63}")
_VERBS = ("get_", "compute_", "calc_", "calculate_", "measure_", "evaluate_", "eval_", "run_")


@dataclass(frozen=True, slots=True)
class Metric:
    """A compared expression's metric name and what it says about itself."""

    name: str
    like: bool  # the name (or its container's) has a metric word
    count: bool  # a count / size / index: never a gate
    derived: bool = False  # named by a key or an attribute (worth following from a local)
    aggregation: Aggregation | None = None
    last_steps: int | None = None
    steps: str = ""  # the steps read, when not the whole run: ``step 100``, ``steps -6:-1``
    element: bool = False  # an element of a result (``res[0]``, ``a, b = f()``): config may name it


def _literal_args(call: ast.Call) -> bool:
    args = [*call.args, *(k.value for k in call.keywords)]
    return bool(args) and all(
        isinstance(n, ast.Constant | ast.List | ast.Tuple | ast.Dict | ast.UnaryOp) for n in args
    )


def _data(node: ast.expr, depth: int = 0) -> bool:
    """Literal numeric data: ``3``, ``[1, 0, 1]``, ``torch.tensor([[0.2, 0.8]])``."""
    if depth > 8:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _data(node.operand, depth + 1)
    if isinstance(node, ast.List | ast.Tuple):
        return bool(node.elts) and all(_data(e, depth + 1) for e in node.elts)
    if isinstance(node, ast.Call) and len(node.args) == 1:
        return dotted(node.func).rsplit(".", 1)[-1] in _TRANSPARENT and _data(
            node.args[0], depth + 1
        )
    return False


def on_literal_data(call: ast.Call) -> bool:
    """A function applied to literal numbers (``accuracy(torch.tensor([1, 0]), [1, 1])``):
    a unit test of that function, not a metric of a run."""
    return bool(call.args) and all(_data(a) for a in call.args)


def _end(value: object) -> int | None:
    """A slice bound read as an integer (``-5``), None for anything else."""
    if isinstance(value, Num) and value.value is not None and value.value.is_integer():
        return int(value.value) if "." not in value.span.literal else None
    return None


class Metrics:
    """Names the metrics of one module's comparisons."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self.keyed_calls: dict[str, bool] = {}  # called with several names (``_named_call``)

    def of(self, node: ast.expr, at: At, depth: int = 0) -> Metric | None:
        """The metric ``node`` reads, or None when it is no metric (a literal, ``len(x)``)."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, ast.Call):
            return self._call(node, at, depth)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            mean = _sum_over_len(node)
            found = self.of(mean, at, depth + 1) if mean is not None else None
            return replace(found, aggregation="mean") if found else None
        if isinstance(node, ast.Subscript):
            return self._subscript(node, at, depth)
        if isinstance(node, ast.Attribute):
            base = node.value
            container = base.attr if isinstance(base, ast.Attribute) else dotted(base)
            return Metric(node.attr, metric_like(node.attr, container), count_like(node.attr), True)
        if isinstance(node, ast.Name):
            return self._name(node.id, at, depth)
        return None

    def _name(self, name: str, at: At, depth: int) -> Metric | None:
        binding = at.bound(name)
        if isinstance(binding, Group) and binding is at.group:
            entry = binding.values[name][at.index]
            binding = entry if isinstance(entry, Alias) else None
        if isinstance(binding, Alias):
            where = At(binding.scope) if binding.scope is not None else at
            return self.of(binding.node, where, depth + 1)
        measured = False  # a value a call returned: the config may name it (a hint)
        if name not in at.env:
            scope = self.resolver.lookup(name, at.scope)
            written = scope.assigned.get(name, []) if scope else []
            if scope is not None and scope.kind != "class" and len(written) == 1:
                assigned = written[0]
                if isinstance(assigned, ast.Call) and on_literal_data(assigned):
                    return None
                if assigned is not None and self.resolver.value(assigned, at) is None:
                    followed = self.of(assigned, at, depth + 1)
                    if followed is not None and followed.derived:
                        return followed
                measured = name in scope.unpacked or isinstance(assigned, ast.Call)
        return Metric(name, metric_like(name), count_like(name), element=measured)

    def _bound(self, node: ast.expr | None, at: At) -> int | bool | None:
        """A slice bound: an integer, None when left out (or ``None``), False when unknown."""
        if node is None or (isinstance(node, ast.Constant) and node.value is None):
            return None
        if isinstance(node, ast.Name) and isinstance(alias := at.bound(node.id), Alias):
            return self._bound(alias.node, At(alias.scope) if alias.scope else at)
        found = _end(self.resolver.value(node, at))
        return False if found is None else found

    def _window(self, node: ast.Subscript, at: At, depth: int) -> Metric | None:
        """``x[-5:]``: the last 5 steps; ``x[-6:-1]``: a window over the last steps (recorded
        as the last 6, the window in ``steps``); another slice: the steps it names."""
        assert isinstance(node.slice, ast.Slice)
        lower, upper = self._bound(node.slice.lower, at), self._bound(node.slice.upper, at)
        found = self.of(node.value, at, depth + 1)
        if found is None or node.slice.step is not None or lower is False or upper is False:
            return found
        if isinstance(lower, int) and lower < 0 and upper is None:
            return replace(found, last_steps=-lower)
        shown = f"steps {'' if lower is None else lower}:{'' if upper is None else upper}"
        if isinstance(lower, int) and lower < 0 and isinstance(upper, int) and lower < upper < 0:
            return replace(found, last_steps=-lower, steps=shown)
        return replace(found, steps=shown)

    def _subscript(self, node: ast.Subscript, at: At, depth: int) -> Metric | None:
        if isinstance(node.slice, ast.Slice):
            return self._window(node, at, depth)
        keys: list[str] = []
        base: ast.expr = node
        step: int | None = None  # ``x["loss"][100]``: one step of a series
        while isinstance(base, ast.Subscript) and len(keys) < 16:
            key = self.resolver.key(base.slice, at)
            if isinstance(key, str):
                keys.append(key)
            elif isinstance(key, int) and base is node and isinstance(base.slice, ast.Constant):
                step = key  # written in the check (a loop's variable: a golden curve's step)
            base = _got(base.value)
        keys.reverse()
        inner = self.of(base, at, depth + 1)
        if not keys:
            element = step is not None and step >= 0 and node.value is base
            if element and inner is not None and not inner.derived:
                # ``res[0]`` of ``res = evaluate(...)``: an element of a result
                return Metric(f"{inner.name}[{step}]", inner.like, inner.count, element=True)
            return inner
        called = base if inner is None else self._local_call(base, at)
        if called is not None and (name := self._named_call(called)) is not None:
            keys.insert(0, name)
        container = inner.name if inner else dotted(base)
        prefix = [inner.name] if inner and inner.derived and isinstance(base, ast.Name) else []
        name = "/".join([*prefix, *keys])
        shown = f"step {step}" if step is not None and step >= 0 else ""
        like = metric_like(name, container)
        # a keyed value whose name says nothing (``report["drift"]``): the config may name it
        return Metric(name, like, count_like(keys[-1]), True, steps=shown, element=bool(keys))

    def _local_call(self, node: ast.expr, at: At) -> ast.Call | None:
        """The call a function's local is assigned once (``out = run("de-en")``), if any."""
        if not isinstance(node, ast.Name) or node.id in at.env:
            return None
        scope = self.resolver.lookup(node.id, at.scope)
        written = scope.assigned.get(node.id, []) if scope else []
        if scope is None or scope.kind != "function" or len(written) != 1:
            return None
        return written[0] if isinstance(written[0], ast.Call) else None

    def _named_call(self, node: ast.expr) -> str | None:
        """The name a call's results are keyed by: ``run_task("mmlu")["acc"]`` is
        ``mmlu/acc`` when the module calls ``run_task`` with several such names (they tell
        its results apart); with one name everywhere (``evaluate("resnet50")``) none."""
        name = _one_name(node)
        if name is None or not isinstance(node, ast.Call):
            return None
        called = dotted(node.func)
        if called not in self.keyed_calls:  # the module's call sites are read once per name
            sites = self.resolver.module.calls.get(called.rsplit(".", 1)[-1], [])
            names = {_one_name(c) for c, _ in sites if dotted(c.func) == called}
            self.keyed_calls[called] = len(names - {None}) > 1
        return name if self.keyed_calls[called] else None

    def _call(self, node: ast.Call, at: At, depth: int) -> Metric | None:
        name = dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        method = isinstance(node.func, ast.Attribute)
        subject: ast.expr | None = None
        if node.args:
            subject = node.args[0]
        elif method and isinstance(node.func, ast.Attribute):
            subject = node.func.value
        if last in _AGGREGATIONS and subject is not None and len(node.args) <= 1:
            found = self.of(subject, at, depth + 1)
            return replace(found, aggregation=_AGGREGATIONS[last]) if found else None
        if last in _TRANSPARENT and subject is not None:
            return self.of(subject, at, depth + 1)
        if last == "get" and method and node.args and isinstance(node.func, ast.Attribute):
            item = ast.Subscript(node.func.value, node.args[0], ast.Load())
            return self._subscript(item, at, depth)
        helper = self._helper(node, at, depth) if isinstance(node.func, ast.Name) else None
        if helper is not None:
            return helper
        if last in _NOT_METRICS or not last or _literal_args(node) or on_literal_data(node):
            return None
        short = next((last[len(v) :] for v in _VERBS if last.startswith(v)), last)
        return Metric(short, metric_like(short), count_like(short))

    def _helper(self, node: ast.Call, at: At, depth: int) -> Metric | None:
        """A call of a function of this file that returns one expression
        (``def mean(xs, a, b): return np.mean(xs[a:b])``), read with its parameters bound
        to the call's arguments: the metric it returns when a key or attribute names it."""
        assert isinstance(node.func, ast.Name)
        scope = self.resolver.lookup(node.func.id, at.scope)
        function = scope.children.get(node.func.id) if scope else None
        returned = scope.returns.get(node.func.id) if scope else None
        if function is None or returned is None or not isinstance(function.node, _FUNCTIONS):
            return None
        args = function.node.args
        params = [*args.posonlyargs, *args.args]
        if len(node.args) > len(params) or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        env: dict[str, Binding] = {}
        for param, default in zip(params[::-1], args.defaults[::-1], strict=False):
            env[param.arg] = Alias(default, scope)
        for param, arg in zip(params, node.args, strict=False):
            env[param.arg] = Alias(arg, at.scope)
        for keyword in node.keywords:
            if keyword.arg:
                env[keyword.arg] = Alias(keyword.value, at.scope)
        found = self.of(returned, At(function, env), depth + 1)
        return found if found is not None and found.derived else None


def _got(node: ast.expr) -> ast.expr:
    """``d.get("k", default)`` read as ``d["k"]`` (other expressions as they are)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
    ):
        return ast.Subscript(node.func.value, node.args[0], ast.Load())
    return node


def _one_name(node: ast.expr) -> str | None:
    """The one string a call is given, when it reads as a name (``"mmlu"``, not a path)."""
    if not isinstance(node, ast.Call) or len(node.args) != 1 or node.keywords:
        return None
    arg = node.args[0]
    if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
        return None
    return arg.value if _NAME.fullmatch(arg.value) else None


def _sum_over_len(node: ast.BinOp) -> ast.expr | None:
    """``sum(x) / len(x)`` -> ``x``; ``sum(x[-10:]) / 10`` -> ``x[-10:]``."""
    left, right = node.left, node.right
    if not (isinstance(left, ast.Call) and dotted(left.func) == "sum" and len(left.args) == 1):
        return None
    if (
        isinstance(right, ast.Call)
        and dotted(right.func) == "len"
        and len(right.args) == 1
        and ast.dump(left.args[0]) == ast.dump(right.args[0])
    ):
        return left.args[0]
    window = left.args[0]  # sum(x[-10:]) / 10
    part = window.slice if isinstance(window, ast.Subscript) else None
    lower = part.lower if isinstance(part, ast.Slice) else None
    if (
        isinstance(part, ast.Slice)
        and part.upper is None
        and isinstance(lower, ast.UnaryOp)
        and isinstance(lower.op, ast.USub)
        and isinstance(lower.operand, ast.Constant)
        and isinstance(right, ast.Constant)
        and lower.operand.value == right.value
    ):
        return window
    return None
