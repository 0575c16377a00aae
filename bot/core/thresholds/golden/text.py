"""Plain-text golden files: ``step value`` lines or one value per line, a golden curve.

::

    # step  lm loss                 3.9124
    0   10.9876                     3.4471      # one value per line: step = start + i * interval
    50  7.4213                      3.1852

Blank lines and ``#`` comments are skipped; tokens are separated by spaces, tabs or a comma.
Every line holds the same number of tokens: two (an integer step, then the value) or one (the
value; its step is ``start + i * interval``, by default 0 and 1, else from the config's
``steps:`` or the script that reads the file).  A value is a decimal number, or ``nan`` (a
step that is not checked).  The file is one reference gate (op ``==``, both sides) with a
``CurvePoint`` per line whose span is the value's text, like a JSON golden curve
(``structured.curves``): ``value`` / ``literal`` are the last step that has a number, and
``/rebaseline`` rewrites any value in place.  The gate's name is the file's stem without
``expected_`` / ``golden_`` / ``reference_`` / ``baseline_`` / ``ref_`` (as a prefix or as a
suffix); its metric is that name unless the reader says otherwise (``Reading``).

Which files: one the config names (``files:``), one a script of the repository compares
with a tolerance (``golden.readers``), else, when a script reads it or its name says
golden / expected / reference / baseline, a hint with the config lines that bind it; any
other text file is not read.

Bounds: at most ``MAX_BYTES`` characters and ``MAX_LINES`` lines (beyond: an error for a
file the config names or a script reads, else not read); a number of more than
``MAX_DIGITS`` digits is refused.  One pass over the lines, no regular expression with
backtracking over a line.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from bot.core.bounded import MAX_DIGITS
from bot.core.config import CONFIG_PATH
from bot.core.models import CurvePoint, Gate, Span, ThresholdFile, Tolerance, UnboundVariable
from bot.core.thresholds.errors import ThresholdFileError

TEXT_GOLDEN_SUFFIXES = frozenset({".txt", ".dat"})
MAX_BYTES = 1024 * 1024
MAX_LINES = 100_000
GOLDEN_WORDS = frozenset(
    {"golden", "goldens", "expected", "reference", "references", "baseline", "baselines"}
)
_AFFIXES = ("expected", "golden", "reference", "baseline", "ref")
_TOKEN = re.compile(r"[^\s,]+")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_STEP = re.compile(r"\d{1,18}")
_NAN = frozenset({"nan", "-nan", "+nan"})
_WORDS = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Reading:
    """What the config or the script reading the file says about it: the metric its values
    are compared with, the comparison's tolerance, the first step and interval of a list,
    and the reader (``tests/test_loss.py``: the gate's context).  Only a reader whose
    comparison with a tolerance was followed (``compared``) makes the file a gate without
    config: one comparing exactly (token ids, counts) leaves a hint."""

    metric: str | None = None
    tolerance: Tolerance | None = None
    start: int | None = None
    interval: int | None = None
    reader: str = ""
    compared: bool = False  # the reader's comparison with a tolerance was followed


def golden_named(path: str) -> bool:
    """Whether the file's name or a folder above it says golden / expected / reference /
    baseline (``tests/golden/loss.txt``, ``ci/expected_val_loss.txt``)."""
    return any(set(_WORDS.findall(part.lower())) & GOLDEN_WORDS for part in path.split("/"))


def curve_name(path: str) -> str:
    """The file's stem without a golden word as prefix or suffix (``expected_val_loss`` ->
    ``val_loss``, ``train_ce_golden`` -> ``train_ce``)."""
    stem = PurePosixPath(path).name.split(".")[0] or PurePosixPath(path).stem
    lowered = stem.lower()
    for word in _AFFIXES:
        for sep in ("_", "-", "."):
            if lowered.startswith(word + sep) and len(stem) > len(word) + 1:
                return stem[len(word) + 1 :]
            if lowered.endswith(sep + word) and len(stem) > len(word) + 1:
                return stem[: -len(word) - 1]
    return stem


@dataclass(frozen=True)
class _Value:
    step: int | None
    value: float | None
    start: int
    end: int
    line: int


class _NotGolden(Exception):
    """The text is not a golden list; ``line`` and ``reason`` say why."""

    def __init__(self, line: int | None, reason: str) -> None:
        super().__init__(reason)
        self.line, self.reason = line, reason
        self.after = 0  # the values read before the line


def _read(text: str) -> list[_Value]:
    """The values, in order; ``_NotGolden`` for text that is not a golden list."""
    if len(text) > MAX_BYTES:
        raise _NotGolden(None, f"more than {MAX_BYTES} characters")
    if text.count("\n") > MAX_LINES:
        raise _NotGolden(None, f"more than {MAX_LINES} lines")
    values: list[_Value] = []
    columns = 0
    offset = 0
    for number, line in enumerate(text.split("\n"), start=1):
        body = line.split("#", 1)[0]
        tokens = list(_TOKEN.finditer(body))
        if tokens:
            if columns == 0:
                columns = len(tokens)
            try:
                if len(tokens) != columns or columns > 2:
                    reason = f"{len(tokens)} columns: a golden list has 1 or 2"
                    raise _NotGolden(number, reason)
                values.append(_value(tokens, offset, number))
            except _NotGolden as exc:
                exc.after = len(values)
                raise
        offset += len(line) + 1
    return values


def _value(tokens: list[re.Match[str]], offset: int, line: int) -> _Value:
    step = None
    if len(tokens) == 2:
        if not _STEP.fullmatch(tokens[0][0]):
            raise _NotGolden(line, f"{tokens[0][0][:40]!r} is not a step")
        step = int(tokens[0][0])
    token = tokens[-1]
    raw = token[0]
    if raw.lower() in _NAN:
        number = None
    elif _NUMBER.fullmatch(raw) and sum(c.isdigit() for c in raw) <= MAX_DIGITS:
        number = float(raw)
        if not math.isfinite(number):
            number = None
    else:
        raise _NotGolden(line, f"{raw[:40]!r} is not a number")
    return _Value(step, number, offset + token.start(), offset + token.end(), line)


def parse_text_golden(
    path: str, text: str, reading: Reading | None, *, named: bool
) -> ThresholdFile | None:
    """The golden curve of a text file, by this module's docstring.

    ``named``: the config names the file; ``reading``: what the config's ``steps:`` or the
    reading script says (None: no script reads it).  Read as a curve when named or read
    (``ThresholdFileError`` with the line for a golden list broken after its first values,
    one too large, or one a script reads; a note for a named file whose first line already is
    not one); else a hint when its name says golden and it is one; else None.
    """
    if PurePosixPath(path).suffix.lower() not in TEXT_GOLDEN_SUFFIXES:
        return None
    read = named or (reading is not None and reading.compared)
    reader = reading.reader if reading is not None else ""
    if not read and not (reader or golden_named(path)):
        return None
    try:
        values = _read(text)
    except _NotGolden as exc:
        if read and (exc.after or exc.line is None or reader):
            raise ThresholdFileError(path, exc.line, f"not a golden list: {exc.reason}") from None
        if read:  # a config glob matching a text file that holds no golden list
            return ThresholdFile(path=path, notes=(f"{path}:{exc.line}: not a golden list",))
        return None
    checked = [v for v in values if v.value is not None]
    if not checked:
        if not read:
            return None
        return ThresholdFile(path=path, notes=(f"{path}: no numeric value to read as a gate",))
    name = curve_name(path)
    last = checked[-1]
    span = Span(literal=text[last.start : last.end], start=last.start, end=last.end, line=last.line)
    if not read:
        reason = (
            f"a golden list read by {reader}, but no comparison with a tolerance was "
            "followed there: declare it to check runs against it"
            if reader
            else "a golden list that neither the config nor a script found reading it "
            "names: declare it to check runs against it"
        )
        hint = UnboundVariable(
            name=name,
            file=path,
            line=span.line,
            literal=span.literal,
            reason=reason,
            config=_config_lines(path, name),
        )
        return ThresholdFile(path=path, unbound=(hint,))
    given = reading or Reading()
    start = given.start if given.start is not None else 0
    interval = given.interval if given.interval is not None else 1
    points = tuple(
        CurvePoint(
            step=v.step if v.step is not None else start + i * interval,
            value=v.value,
            span=Span(literal=text[v.start : v.end], start=v.start, end=v.end, line=v.line),
        )
        for i, v in enumerate(values)
    )
    gate = Gate(
        name=name,
        file=path,
        line=span.line,
        metric=given.metric or name,
        op="==",
        value=float(span.literal),
        literal=span.literal,
        start=span.start,
        end=span.end,
        kind="reference",
        tolerance=given.tolerance,
        points=points,
        context=given.reader,
    )
    return ThresholdFile(path=path, gates=(gate,))


def _config_lines(path: str, name: str) -> str:
    """The ``files:`` entry that reads the file as a golden curve on metric ``name``."""
    lines = (
        f"# {CONFIG_PATH}",
        "files:",
        f"  - path: {json.dumps(path)}",
        "    kind: reference",
        "    tolerance: {rel: 0.05}  # the comparison's tolerance",
        f"    metrics: {{{json.dumps(name)}: {json.dumps(name)}}}  # -> the history's key",
    )
    return "\n".join(lines)
