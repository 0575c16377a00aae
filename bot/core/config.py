"""The repository config, ``.github/threshold-bot.yml``: pydantic schema and loader.

Everything is optional: with no config, shell scripts are discovered with no
configuration and the default rule applies (docs/configuration.md).

The config is hostile input (anyone who can push to the base branch writes it): YAML
aliases, deep nesting and huge integers are refused (``bot.core.bounded.BoundedLoader``);
repository paths and globs must stay inside the repository and are normalised
(``./a//b`` is ``a/b``); ``name_regex`` must run in linear time (``bot.core.history.names``).
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import ErrorDetails

from bot.core.bounded import BoundedLoader, yaml_problem
from bot.core.globs import CONTROL, repo_path
from bot.core.history.names import name_filter
from bot.core.limit_model import MAX_SPEC, MODEL_NAMES
from bot.core.models import MAX_WINDOW, Op, RegimeSettings, RuleSettings, SourceSpec, WindowSpec

CONFIG_PATH = ".github/threshold-bot.yml"

Permission = Literal["read", "triage", "write", "maintain", "admin"]


class ConfigError(ValueError):
    """The repository config is not valid; the message names the problem."""


RepoPath = Annotated[str, AfterValidator(repo_path)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


GateKindName = Literal["limit", "reference"]
SidesName = Literal["lower", "upper", "both"]


class ToleranceDecl(_Strict):
    """A reference gate's tolerance: each part a number, or the key holding it in the
    threshold file (looked up beside the gate's literal, then at the file's top level)."""

    rel: float | str | None = None
    abs: float | str | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_number(cls, value: object) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return {"rel": value}  # "tolerance: 0.08" is relative
        return value


class CoupledDecl(_Strict):
    """A literal derived from the gate's: ``key``'s literal = ``factor`` x the gate's value
    (``key`` beside the gate's literal, else from the file's top level)."""

    key: str
    factor: float = Field(gt=0)


class GateDecl(_Strict):
    """Gates in a YAML / JSON / TOML file (or a variable of a shell script) by key path.

    ``key`` is a path (``a.b.0.c``) or a pattern: ``*`` one level, ``**`` any depth,
    ``list[field=value]`` a list item by a field (docs/threshold-files.md).  ``metric`` may
    name parts of the match: ``{1}`` (what the first wildcard matched), ``{key}`` (the
    literal's key), ``{.field}`` (a sibling field); ``metric_from`` is ``{.FIELD}``.
    """

    key: str  # dotted key path or pattern, e.g. "gsm8k.eval.acc_min", "models.*.min_al"
    metric: str | None = None
    metric_from: str | None = None  # the sibling field holding the metric name
    op: Op | None = None  # limit gates; a reference's ``sides`` default to both
    kind: GateKindName | None = None  # default: the file's, else "limit"
    tolerance: ToleranceDecl | None = None  # reference gates; default: the file's
    sides: SidesName | None = None
    name: str | None = None  # defaults to the key path of each match
    source: str | None = None  # a name in ``sources``; defaults to the file's / config's
    ignore: bool = False  # a placeholder: shown apart, never judged
    coupled: tuple[CoupledDecl, ...] = ()

    @model_validator(mode="after")
    def _metric_named(self) -> GateDecl:
        if self.metric is None and self.metric_from is None:
            raise ValueError(f"gate {self.key!r}: give 'metric' or 'metric_from'")
        if self.op == "==" and self.kind == "limit":
            raise ValueError(f"gate {self.key!r}: op '==' is for reference gates")
        return self


class CsvDecl(_Strict):
    """A CSV threshold table: a gate per row (``key`` column: its name and metric)."""

    key: str  # the column naming the benchmark / metric
    value: str  # the column holding the limit or reference
    tolerance: str | None = None  # a column of tolerances (relative unless ``absolute``)
    absolute: bool = False  # the tolerance column is absolute
    kind: GateKindName = "reference"
    op: Op | None = None  # limit tables: the operator
    sides: SidesName | None = None
    metric: str = "{key}"  # the metric, from the key column: "bench/{key}/time"
    # ("{COLUMN}" names any other column's cell: "{benchmark}/{metric}")
    # a table without a header row: its columns' names, in order (the first row is data)
    columns: tuple[str, ...] = ()


class StepsDecl(_Strict):
    """Where a golden list starts: the step of its first value and the steps between two."""

    start: int = Field(default=0, ge=0)
    interval: int = Field(default=1, ge=1)


class FileDecl(_Strict):
    """Threshold files matched by a glob, and (for structured files) their gates."""

    path: RepoPath = Field(min_length=1)  # a glob relative to the repository root, "ci/**/*.yaml"
    source: str | None = None
    gates: tuple[GateDecl, ...] = ()
    kind: GateKindName | None = None  # default kind of the file's gates
    tolerance: ToleranceDecl | None = None  # default tolerance of its reference gates
    sides: SidesName | None = None
    csv: CsvDecl | None = None
    ignore: tuple[str, ...] = ()  # names of gates (or variables / keys) that are placeholders
    metrics: dict[str, str] = Field(default_factory=dict)  # name in the file -> history key
    steps: StepsDecl | None = None  # a golden list of values: its first step and interval

    @model_validator(mode="before")
    @classmethod
    def _bare_glob(cls, value: object) -> object:
        return {"path": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _limits_have_op(self) -> FileDecl:
        for number, gate in enumerate(self.gates):
            kind = gate.kind or self.kind or "limit"
            if kind == "limit" and gate.op is None:
                raise ValueError(f"gates.{number}.op: a limit gate needs an op (>=, >, <=, <)")
            if kind == "limit" and gate.op == "==":
                raise ValueError(f"gates.{number}.op: '==' is for reference gates")
        return self

    @field_validator("gates")
    @classmethod
    def _unique_gates(cls, gates: tuple[GateDecl, ...]) -> tuple[GateDecl, ...]:
        seen: set[tuple[str, str | None, str | None, str | None]] = set()
        for gate in gates:
            key = (gate.name or gate.key, gate.metric or gate.metric_from, gate.op, gate.kind)
            if key in seen:
                raise ValueError(f"gate {key[0]!r} ({gate.metric} {gate.op}) is declared twice")
            seen.add(key)
        return gates


class PermissionSettings(_Strict):
    """The least repository permission a user needs for each action."""

    rebaseline: Permission = "write"
    approve: Permission = "write"


DriftMode = Literal["issue", "pull_request", "off"]
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")
_DRIFT_FALLBACK = {  # how a problem names the default a drift setting falls back to
    "mode": "issue",
    "min_failures": "3",
    "window": "regime",
    "labels": "no labels",
    "assignees": "no assignees",
    "files": "every threshold file",
}


def _label(value: str) -> str:
    if not value.strip() or CONTROL.search(value):
        raise ValueError(f"{_given(value)} is not a label")
    return value.strip()


def _login(value: str) -> str:
    login = value.strip().removeprefix("@")
    if not _LOGIN.fullmatch(login):
        raise ValueError(f"{_given(value)} is not a GitHub login")
    return login


class DriftSettings(_Strict):
    """The drift watch of the default branch (docs/drift.md): the item opened when gates
    keep failing there. A setting that is not valid falls back to its default, and the item
    says so: it never makes the config invalid."""

    # Lenient (``_lenient``): ``problems`` says in plain words which settings fell back
    # (``drift.mode: expected one of … — using issue``) or were unknown and ignored. It is
    # the loader's, not a setting: not in the JSON Schema.
    mode: DriftMode = "issue"
    min_failures: int = Field(default=3, ge=1, strict=True)  # failing runs in a row
    window: WindowSpec = Field(default_factory=lambda: WindowSpec(kind="regime"))
    labels: tuple[Annotated[str, Field(max_length=50), AfterValidator(_label)], ...] = ()
    assignees: tuple[Annotated[str, AfterValidator(_login)], ...] = ()
    files: tuple[RepoPath, ...] = ()  # globs of the threshold files watched; empty: all
    problems: SkipJsonSchema[tuple[str, ...]] = ()

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, value: object) -> object:
        if not isinstance(value, str | int) or isinstance(value, bool):
            return value
        return WindowSpec.parse(value)

    @field_validator("mode", mode="before")
    @classmethod
    def _bare_off(cls, value: object) -> object:
        return "off" if value is False else value  # YAML 1.1 reads a bare ``off`` as false

    @field_validator("labels", "assignees", "files", mode="before")
    @classmethod
    def _one_item(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="wrap")
    @classmethod
    def _lenient(cls, value: object, handler: ModelWrapValidatorHandler[DriftSettings]) -> Any:
        if isinstance(value, DriftSettings):
            return value
        if value is None:  # ``drift:`` with nothing under it
            return handler({})
        if not isinstance(value, dict):
            problem = f"drift: expected a mapping of settings, not {_given(value)}"
            return handler({"problems": (f"{problem} — using the defaults",)})
        kept: dict[str, object] = {}
        problems: list[str] = []
        for key, item in value.items():
            name = str(key)
            if name not in _DRIFT_FALLBACK:
                close = difflib.get_close_matches(name.strip().lower(), list(_DRIFT_FALLBACK), n=1)
                hint = f" (did you mean `{close[0]}`?)" if close else ""
                problems.append(f"drift.{name}: unknown setting{hint} — ignored")
                continue
            try:
                handler({name: item})
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(part) for part in err["loc"]) or name
                fallback = _DRIFT_FALLBACK[name]
                problems.append(f"drift.{where}: {plain_message(err)} — using {fallback}")
                continue
            kept[name] = item
        return handler({**kept, "problems": tuple(problems)})


class RepoConfig(_Strict):
    """Schema of ``.github/threshold-bot.yml``."""

    rule: RuleSettings = Field(default_factory=RuleSettings)
    regimes: RegimeSettings = Field(default_factory=RegimeSettings)
    sources: dict[str, SourceSpec] = Field(default_factory=dict)
    default_source: str | None = None
    files: tuple[FileDecl, ...] = ()
    # globs of shell scripts to scan for gates; empty = every changed .sh/.bash file
    shell: tuple[RepoPath, ...] = ()
    # globs of Python test files to scan; empty = changed test_*.py / *_test.py files
    python: tuple[RepoPath, ...] = ()
    # names as the threshold files write them -> history keys ("score": "eval/gsm8k/score")
    metrics: dict[str, str] = Field(default_factory=dict)
    tolerance: ToleranceDecl | None = None  # default tolerance of every reference gate
    permissions: PermissionSettings = Field(default_factory=PermissionSettings)
    drift: DriftSettings = Field(default_factory=DriftSettings)  # never invalid: see its problems
    # the PR comment's charts (docs/pr-comment.md#charts): Mermaid blocks, or none
    charts: Literal["mermaid", "off"] = "mermaid"
    # the App's interactive report page linked from the comment (on/off; the operator decides
    # whether the App serves reports at all, and for private repositories)
    report: bool = Field(default=True, strict=True)
    # the threshold dashboard issue (docs/dashboard.md): on/off; unset (None): the App's
    # DASHBOARD setting.  Lenient as ``drift:``: another value is a drift problem, unset.
    dashboard: bool | None = Field(default=None, strict=True)

    @field_validator("charts", mode="before")
    @classmethod
    def _charts_off(cls, value: object) -> object:
        return "off" if value is False else value  # YAML 1.1 reads a bare ``off`` as false

    @field_validator("report", mode="before")
    @classmethod
    def _on_off(cls, value: object) -> object:
        words = {"on": True, "off": False}  # quoted, or read by a YAML 1.2 parser
        return words.get(value.strip().lower(), value) if isinstance(value, str) else value

    @model_validator(mode="wrap")
    @classmethod
    def _lenient_dashboard(
        cls, value: object, handler: ModelWrapValidatorHandler[RepoConfig]
    ) -> Any:
        if not isinstance(value, dict) or "dashboard" not in value:
            return handler(value)
        given = value["dashboard"]
        words = {"on": True, "off": False}  # quoted, or read by a YAML 1.2 parser
        setting = words.get(given.strip().lower(), given) if isinstance(given, str) else given
        if isinstance(setting, bool) or setting is None:
            return handler({**value, "dashboard": setting})
        config = handler({k: v for k, v in value.items() if k != "dashboard"})
        problem = f"dashboard: expected on or off, not {_given(given)} — using the App's setting"
        drift = config.drift.model_copy(update={"problems": (*config.drift.problems, problem)})
        return config.model_copy(update={"drift": drift})

    @field_validator("shell", "python", mode="before")
    @classmethod
    def _one_glob(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("sources")
    @classmethod
    def _complete_sources(cls, sources: dict[str, SourceSpec]) -> dict[str, SourceSpec]:
        complete = dict(sources)
        for name, spec in sources.items():
            if spec.series:  # which series are read is the review's, from the gates
                raise ValueError(f"sources.{name}.series: unknown setting")
            if spec.kind == "file" and not spec.path:
                raise ValueError(f"source {name!r}: a file source needs 'path'")
            if spec.kind == "mlflow" and not spec.experiment:
                raise ValueError(f"source {name!r}: an mlflow source needs 'experiment'")
            if spec.kind != "wandb" and spec.name_regex:  # matched here, by RE2
                try:
                    name_filter(spec.name_regex)
                except ValueError as exc:
                    raise ValueError(f"source {name!r}: name_regex: {exc}") from None
            if spec.kind == "file" and spec.path:
                try:
                    path = repo_path(spec.path)
                except ValueError as exc:  # names its key: sources.NAME.path
                    raise ValueError(f"sources.{name}.path: {exc}") from None
                complete[name] = spec.model_copy(update={"path": path})
        return complete

    @model_validator(mode="after")
    def _sources_exist(self) -> RepoConfig:
        wanted: list[tuple[str, str | None]] = [("default_source", self.default_source)]
        for i, f in enumerate(self.files):
            wanted.append((f"files.{i}.source", f.source))
            wanted += [(f"files.{i}.gates.{j}.source", g.source) for j, g in enumerate(f.gates)]
        defined = ", ".join(sorted(self.sources)) or "none"
        for where, name in wanted:
            if name is not None and name not in self.sources:
                raise ValueError(
                    f"{where}: source {name!r} is not defined under 'sources' (defined: {defined})"
                )
        return self

    def source(self, name: str | None) -> SourceSpec | None:
        """The named source, else the default source, else None."""
        key = name or self.default_source
        return self.sources.get(key) if key else None


def parse_config(text: str, path: str = CONFIG_PATH) -> RepoConfig:
    """Parse the YAML text of a repository config; raise ``ConfigError`` with a clear reason.

    The message names every problem found, in plain words, each after the file and the line
    of its key when it can (``; `` between them): ``.github/threshold-bot.yml:4:
    rule.allowance: must be at most 1, not 5; .github/threshold-bot.yml:6: rule.windw:
    unknown setting (did you mean `window`?)``.
    """
    try:
        data = yaml.load(text, Loader=BoundedLoader) if text.strip() else {}
    except yaml.YAMLError as exc:
        line, problem = yaml_problem(exc, text)
        where = f"{path}:{line}" if line is not None else path
        raise ConfigError(f"{where}: not valid YAML: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    try:
        return RepoConfig.model_validate(data)
    except ValidationError as exc:
        root = yaml.compose(text, Loader=BoundedLoader)
        problems = []
        for err in exc.errors():
            line = _line(root, _location(err))
            problems.append(f"{path}{f':{line}' if line else ''}: {_error_message(err)}")
        raise ConfigError("; ".join(problems)) from None


def _error_message(err: ErrorDetails) -> str:
    """One validation error as ``where: what`` (an unknown key is an ``unknown setting``,
    with the closest setting of its level: ``did you mean `window`?``)."""
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown setting{_did_you_mean(err['loc'])}"
    message = plain_message(err)
    if where and message.startswith(f"{where}."):  # the check named a deeper key
        return message
    if where and _inner_key(err["loc"], message):  # e.g. a file entry's check names its gate
        return f"{where}.{message}"
    return f"{where}: {message}" if where else message


def _inner_key(loc: Sequence[int | str], message: str) -> bool:
    """Whether ``message`` starts with a key inside the model at ``loc``: a model's own
    check names it relative to itself (``gates.0.op: ...`` of a ``files`` entry,
    ``overrides.1.allowance: ...`` of ``rule``)."""
    model = _model_at(loc)
    first = re.match(r"(\w+)[.:]", message)
    return model is not None and first is not None and first[1] in model.model_fields


def _location(err: ErrorDetails) -> Sequence[int | str]:
    """An error's location; a model-level check names it at the start of its message, and
    so may a field's check that names a key inside the field (``sources.NAME.path``)."""
    named = re.match(r"Value error, ([\w.\-]+): ", err["msg"])
    where = ".".join(str(p) for p in err["loc"])
    if named and (not where or named[1].startswith(f"{where}.")):
        return [int(p) if p.isdigit() else p for p in named[1].split(".")]
    if named and _inner_key(err["loc"], named[1] + ":"):  # relative to the model at loc
        return [*err["loc"], *(int(p) if p.isdigit() else p for p in named[1].split("."))]
    return err["loc"]


def _line(node: Any, loc: Sequence[int | str]) -> int | None:
    """The 1-based line of the YAML node at a pydantic error location (deepest one found)."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pairs = [(k, v) for k, v in node.value if str(k.value) == str(part)]
            if not pairs:
                break
            line = pairs[0][0].start_mark.line + 1
            node = pairs[0][1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


_TYPE_WORDS = {
    "dict": "a mapping",
    "list": "a list",
    "tuple": "a list",
    "str": "text",
    "int": "a number",
    "float": "a number",
    "bool": "true or false",
    "NoneType": "nothing",
}
_EXPECTED = {  # pydantic error type -> what was expected, in plain words
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "int_parsing": "expected a whole number",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected text",
    "dict_type": "expected a mapping of settings",
    "model_type": "expected a mapping of settings",
    "model_attributes_type": "expected a mapping of settings",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "date_parsing": "expected a date, YYYY-MM-DD",
    "date_from_datetime_parsing": "expected a date, YYYY-MM-DD",
    "datetime_parsing": "expected a date and time, YYYY-MM-DDTHH:MM:SSZ",
    "datetime_from_date_parsing": "expected a date and time, YYYY-MM-DDTHH:MM:SSZ",
    "datetime_type": "expected a date and time, YYYY-MM-DDTHH:MM:SSZ",
    "finite_number": "expected a finite number",
    "url_parsing": "expected a URL",
}
_BOUNDS = {
    "greater_than_equal": ("ge", "must be at least"),
    "greater_than": ("gt", "must be more than"),
    "less_than_equal": ("le", "must be at most"),
    "less_than": ("lt", "must be less than"),
}


def plain_message(err: ErrorDetails) -> str:
    """A validation error's problem in plain words, without its location: ``expected a
    number, not 'abc'``, ``must be at most 1, not 5``, ``expected one of '>=', '>'…``.

    A check's own message (a ``ValueError``) is kept; unknown error kinds keep pydantic's.
    """
    kind, ctx, given = err["type"], err.get("ctx") or {}, _given(err.get("input"))
    if kind == "value_error":
        return err["msg"].removeprefix("Value error, ")
    if kind == "missing":
        return "required"
    if kind in _EXPECTED:
        return f"{_EXPECTED[kind]}, not {given}"
    if kind in _BOUNDS:
        name, words = _BOUNDS[kind]
        return f"{words} {_given(ctx.get(name))}, not {given}"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected')}, not {given}"
    if kind == "enum":
        return f"expected one of {ctx.get('expected')}, not {given}"
    if kind in ("string_too_short", "too_short"):
        return "must not be empty" if ctx.get("min_length") == 1 else f"too short: {given}"
    if kind in ("string_too_long", "too_long"):
        return f"too long (at most {ctx.get('max_length')})"
    return err["msg"]


def _given(value: object) -> str:
    """What was written, short: ``'abc'``, ``5``, or its kind (``a list``)."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, bool | int) or value is None:
        return "empty" if value is None else str(value).lower()
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "…")
    return _TYPE_WORDS.get(type(value).__name__, type(value).__name__)


def _did_you_mean(loc: Sequence[int | str]) -> str:
    """`` (did you mean `window`?)`` for an unknown key close to a setting of its level."""
    model = _model_at(loc[:-1])
    if model is None or not isinstance(loc[-1], str):
        return ""
    close = difflib.get_close_matches(loc[-1].strip().lower(), list(model.model_fields), n=1)
    return f" (did you mean `{close[0]}`?)" if close else ""


def _model_at(loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model whose settings sit at ``loc`` in the config (None: not a model there)."""
    annotation: Any = RepoConfig
    for part in loc:
        annotation = _unwrapped(annotation)
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation = field.annotation
        elif origin is dict:
            annotation = get_args(annotation)[1]
        elif origin in (tuple, list):
            annotation = get_args(annotation)[0]
        else:
            return None
    annotation = _unwrapped(annotation)
    is_model = isinstance(annotation, type) and issubclass(annotation, BaseModel)
    return annotation if is_model else None


def _unwrapped(annotation: Any) -> Any:
    """``X | None`` and ``Annotated[X, ...]`` as ``X`` (the first model of a union)."""
    while get_origin(annotation) in (Union, types.UnionType, Annotated):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if get_origin(annotation) is Annotated:
            args = args[:1]
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        annotation = (models or args)[0]
    return annotation


SCHEMA_ID = "https://json-schema.org/draft/2020-12/schema"
# a run count of 1 to MAX_WINDOW (a power of ten) as text, leading zeros allowed as the loader's
_RUNS = rf"0*([1-9]\d{{0,{len(str(MAX_WINDOW)) - 2}}}|{MAX_WINDOW})"
_SHORTHANDS: dict[str, list[dict[str, Any]]] = {  # what the validators also accept
    "FileDecl": [{"type": "string", "description": "a glob: the same as {path: GLOB}"}],
    "ToleranceDecl": [{"type": "number", "description": "a relative tolerance: {rel: N}"}],
    "WindowSpec": [
        {"type": "integer", "minimum": 1, "maximum": MAX_WINDOW, "description": "the last N runs"},
        {"type": "string", "pattern": rf"^({_RUNS}|regime|since:\d{{4}}-\d{{2}}-\d{{2}})$"},
    ],
    "LimitModel": [
        {
            "type": "string",
            "pattern": "^\\s*(" + "|".join(MODEL_NAMES) + r")(\s+\w+=\S+)*\s*$",
            "maxLength": MAX_SPEC,
            "description": "the shorthand: percentile p=5, zscore k=3 sigma=std,"
            " prediction confidence=99%, absolute min_limit=0.5",
        }
    ],
}
_PERCENT = {"type": "string", "pattern": r"^\d+(\.\d+)?%?$", "description": "5% or 0.05"}


def config_schema() -> dict[str, Any]:
    """The JSON Schema of ``.github/threshold-bot.yml`` (for editors), from ``RepoConfig``,
    with the shorthands the loader accepts (a glob for a ``files`` entry, a number for a
    tolerance, ``20`` / ``regime`` for a window, ``5%`` for an allowance or a harm, a
    model's shorthand (``zscore k=3``) for a ``rule.model`` or an override's, one glob for
    ``shell`` / ``python``, one label, assignee or glob under ``drift``).  The checks beyond
    types (paths inside the repository, sources defined...) are the loader's:
    ``threshold-bot check-config``."""
    schema = _with_shorthands(RepoConfig.model_json_schema())
    rule = schema["$defs"]["RuleSettings"]["properties"]
    rule["allowance"] = {
        "anyOf": [
            {key: rule["allowance"][key] for key in ("type", "minimum", "maximum")},
            _PERCENT,
        ],
        "default": rule["allowance"]["default"],
        "title": "Allowance",
    }
    for model, key in (("RuleOverride", "allowance"), ("BacktestSettings", "harm")):
        prop = schema["$defs"][model]["properties"][key]
        prop["anyOf"].insert(1, _PERCENT)  # [number, "5%", null]
    drift = schema["$defs"]["DriftSettings"]["properties"]
    mode = drift["mode"]
    drift["mode"] = {
        "anyOf": [
            {key: mode[key] for key in ("type", "enum")},
            {"const": False, "description": "off, as YAML 1.1 reads a bare off"},
        ],
        "default": mode["default"],
        "title": "Mode",
    }
    props = schema["properties"]
    props["charts"] = {
        "anyOf": [
            {key: props["charts"][key] for key in ("type", "enum")},
            {"const": False, "description": "off, as YAML 1.1 reads a bare off"},
        ],
        "default": "mermaid",
        "title": "Charts",
    }
    props["dashboard"] = {
        "anyOf": [{"type": "boolean"}, {"enum": ["on", "off"]}, {"type": "null"}],
        "default": None,
        "title": "Dashboard",
    }
    props["report"] = {
        "anyOf": [{"type": "boolean"}, {"enum": ["on", "off"]}],
        "default": True,
        "title": "Report",
    }
    for props, key in [(schema["properties"], "shell"), (schema["properties"], "python")] + [
        (drift, key) for key in ("labels", "assignees", "files")
    ]:
        prop = props[key]
        props[key] = {
            "anyOf": [{k: v for k, v in prop.items() if k != "default"}, {"type": "string"}],
            "default": prop.get("default", []),
        }
    return {"$schema": SCHEMA_ID, **schema, "title": "threshold-bot repository config"}


def _with_shorthands(node: Any) -> Any:
    """``node`` with each ``$ref`` to a model in ``_SHORTHANDS`` also taking its shorthands."""
    if isinstance(node, list):
        return [_with_shorthands(item) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref", "")
    name = ref.rsplit("/", 1)[-1]
    if name in _SHORTHANDS and len(node) == 1:
        return {"anyOf": [node, *_SHORTHANDS[name]]}
    return {key: _with_shorthands(value) for key, value in node.items()}
