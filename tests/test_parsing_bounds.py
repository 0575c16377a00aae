"""Parsing hostile input is bounded, and every failure is a clear error (issue 10, items 4-5).

Each attack is built here; none of these tests times anything: an attack must end in the
exact error (file and line) or in the result an honest matcher gives.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bot.adapters.history.mlflow_source import wanted
from bot.core.bounded import MAX_DEPTH, MAX_DIGITS, MAX_PATTERN
from bot.core.config import (
    CONFIG_PATH,
    ConfigError,
    FileDecl,
    GateDecl,
    RepoConfig,
    parse_config,
)
from bot.core.history.formats import parse_csv, parse_jsonl, select_runs
from bot.core.history.names import name_filter
from bot.core.history.sources import BadHistory
from bot.core.models import Gate, History, Run, SourceSpec
from bot.core.thresholds.discover import find_gates, glob_match
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.shell.lexer import MAX_NESTING
from bot.core.thresholds.shell.script import declared_gate, parse_shell
from bot.core.thresholds.structured.declared import MAX_TOML_CHARS, parse_structured


def decl(key: str = "a") -> FileDecl:
    return FileDecl(path="x", gates=(GateDecl(key=key, metric="m", op=">="),))


def gates_of(path: str, text: str, decl: FileDecl) -> list[Gate]:
    """The gates ``decl`` declares in the file, without their declarations' indices."""
    return [gate for _, gate in parse_structured(path, text, decl, RepoConfig())]


def laughs(levels: int = 9) -> str:
    """The "billion laughs": each level lists the previous one ten times (10**levels)."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    return "\n".join(lines) + "\na: 0.5\n"


# --------------------------------------------------------------------------- YAML


@pytest.mark.parametrize(
    ("text", "line", "alias"),
    [(laughs(), 2, "l0"), ("a: &a [*a]\n", 1, "a"), ("base: &b {x: 1}\nc:\n  <<: *b\n", 3, "b")],
    ids=["billion-laughs", "cycle", "merge-key"],
)
def test_yaml_aliases_are_refused_in_threshold_files(text: str, line: int, alias: str) -> None:
    with pytest.raises(ThresholdFileError) as err:
        gates_of("ci/t.yaml", text, decl())
    assert str(err.value) == f"ci/t.yaml:{line}: not valid YAML: aliases (*{alias}) are not allowed"


def test_yaml_aliases_are_refused_in_the_config() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(laughs())
    assert str(err.value) == f"{CONFIG_PATH}:2: not valid YAML: aliases (*l0) are not allowed"
    with pytest.raises(ConfigError, match=r":2: not valid YAML: aliases \(\*r\) are not allowed$"):
        parse_config("rule: &r {allowance: 0.1}\nregimes: *r\n")


def test_anchors_without_aliases_are_fine() -> None:
    (gate,) = gates_of("t.yaml", "b: &keep\n  a: 0.5\n", decl("b.a"))
    assert (gate.value, gate.line) == (0.5, 2)
    assert parse_config("rule: &r {allowance: 0.25}\n").rule.allowance == 0.25


def test_yaml_nesting_is_limited() -> None:
    deep = "a: " + "[" * 100_000
    with pytest.raises(ThresholdFileError) as err:
        gates_of("t.yaml", deep, decl())
    assert str(err.value) == f"t.yaml:1: not valid YAML: nested more than {MAX_DEPTH} levels deep"
    with pytest.raises(ConfigError) as config_err:
        parse_config("rule:\n  window: " + "{a: " * 100_000)
    assert str(config_err.value) == (
        f"{CONFIG_PATH}:2: not valid YAML: nested more than {MAX_DEPTH} levels deep"
    )
    # MAX_DEPTH levels, the top mapping included, are read
    keys = [f"k{i}" for i in range(MAX_DEPTH - 1)]
    text = "".join(f"{'  ' * i}{k}:\n" for i, k in enumerate(keys)) + "  " * len(keys) + "a: 2\n"
    (gate,) = gates_of("t.yaml", text, decl(".".join([*keys, "a"])))
    assert (gate.value, gate.line) == (2.0, MAX_DEPTH)


def test_yaml_integers_and_bad_scalars_in_the_config_are_errors_with_lines() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config("rule:\n  allowance: " + "1" * 5000 + "\n")
    assert str(err.value) == (
        f"{CONFIG_PATH}:2: not valid YAML: an integer of more than {MAX_DIGITS} digits"
    )
    with pytest.raises(ConfigError) as err:
        parse_config("sources:\n  a: {kind: file, path: h.jsonl, created_after: 2026-13-45}\n")
    assert str(err.value) == f"{CONFIG_PATH}:2: not valid YAML: month must be in 1..12"


def test_a_huge_yaml_literal_is_refused_and_shown_short() -> None:
    digits = "1" * 5000
    with pytest.raises(ThresholdFileError) as err:
        gates_of("t.yaml", f"b: 1\na: {digits}\n", decl())
    shown = repr(digits[:60] + "…")
    assert str(err.value) == f"t.yaml:2: a: {shown} has more than {MAX_DIGITS} digits"


# --------------------------------------------------------------------------- JSON and TOML


def test_deep_json_is_refused_with_its_line() -> None:
    text = '{"a": 1,\n "b": ' + "[" * 100_000
    with pytest.raises(ThresholdFileError) as err:
        gates_of("t.json", text, decl())
    assert str(err.value) == f"t.json:2: not valid JSON: nested more than {MAX_DEPTH} levels deep"
    # brackets inside strings do not count; MAX_DEPTH levels are read
    inner = '{"a": 3, "s": "' + "[" * 500 + '"}'
    text = '{"n": ' * (MAX_DEPTH - 1) + inner + "}" * (MAX_DEPTH - 1)
    (gate,) = gates_of("t.json", text, decl(".".join(["n"] * (MAX_DEPTH - 1) + ["a"])))
    assert gate.value == 3.0


def test_long_json_numbers_are_refused_with_their_line() -> None:
    text = '{\n  "b": "' + "9" * 5000 + '",\n  "a": ' + "1" * 5000 + "\n}"
    with pytest.raises(ThresholdFileError) as err:
        gates_of("t.json", text, decl())
    assert str(err.value) == f"t.json:3: not valid JSON: a number of more than {MAX_DIGITS} digits"
    (gate,) = gates_of("t.json", '{"a": ' + "1" * MAX_DIGITS + "}", decl())
    assert gate.value == float("1" * MAX_DIGITS)


def test_toml_beyond_its_size_limit_is_refused() -> None:
    text = "a = 1\n" + "\n" * MAX_TOML_CHARS
    with pytest.raises(ThresholdFileError) as err:
        gates_of("t.toml", text, decl())
    assert str(err.value) == (
        f"t.toml: TOML threshold files are read up to {MAX_TOML_CHARS:,} characters; "
        f"this one has {len(text):,}"
    )
    assert gates_of("t.toml", text[: MAX_TOML_CHARS - 1], decl())[0].value == 1.0


def test_deep_toml_and_long_toml_integers_are_errors() -> None:
    with pytest.raises(ThresholdFileError, match=r"^t\.toml:1: not valid TOML: .*nested"):
        gates_of("t.toml", "a = " + "[" * 100_000, decl())
    with pytest.raises(ThresholdFileError, match=r"^t\.toml:1: not valid TOML: Invalid number"):
        gates_of("t.toml", "a = " + "1" * 5000, decl())


# --------------------------------------------------------------------------- history files


def history_line(run_id: str, summary: object) -> str:
    return json.dumps({"id": run_id, "created_at": "2026-07-01T00:00:00Z", "summary": summary})


def test_deep_history_lines_are_bad_lines_never_crashes() -> None:
    deep = '{"id": "d", "created_at": "2026-07-01", "summary": ' + "[" * 100_000
    nested: object = 1
    for _ in range(MAX_DEPTH):
        nested = {"k": nested}
    lines = [history_line("a", {"m": 1}), deep, history_line("n", nested)]
    with pytest.raises(BadHistory) as err:
        parse_jsonl("\n".join(lines), "h.jsonl")
    column = deep.index("[") + MAX_DEPTH  # the first bracket past the limit ({ is level 1)
    assert str(err.value) == (
        f"h.jsonl:2: not valid JSON: nested more than {MAX_DEPTH} levels deep (column {column})"
    )
    history = parse_jsonl("\n".join(lines), "h.jsonl", skip_bad_lines=True)
    assert [r.id for r in history.runs] == ["a"]
    assert history.stats.skipped_lines == 2  # the nested summary is one level too deep too


def test_history_integers_beyond_python_s_limit_are_bad_lines() -> None:
    text = '{"id": "x", "created_at": "2026-07-01", "summary": {"m": ' + "1" * 5000 + "}}"
    with pytest.raises(BadHistory) as err:
        parse_jsonl(text, "h.jsonl")
    assert str(err.value) == (
        "h.jsonl:1: not valid JSON: Exceeds the limit (4300 digits) for integer string conversion"
    )


def test_huge_csv_fields_are_bad_lines() -> None:
    huge = "9" * 200_000
    text = f"id,created_at,m\na,2026-07-01,1\nc,2026-07-03,{huge}\nb,2026-07-02,2\n"
    with pytest.raises(BadHistory) as err:
        parse_csv(text, "h.csv")
    assert str(err.value) == "h.csv:3: not valid CSV: field larger than field limit (131072)"
    history = parse_csv(text, "h.csv", skip_bad_lines=True)
    assert [r.id for r in history.runs] == ["a", "b"]
    assert history.stats.skipped_lines == 1


# --------------------------------------------------------------------------- shell


def nested_quotes(pairs: int) -> str:
    return '"$(' * pairs + "echo" + ')"' * pairs


def test_deeply_nested_shell_substitutions_are_an_error_with_the_line() -> None:
    text = f'X=0.5\necho {nested_quotes(400)}\necho "m >= $X"\n'
    with pytest.raises(ThresholdFileError) as err:
        parse_shell("ci/deep.sh", text)
    reason = f"quotes and substitutions nested more than {MAX_NESTING} levels deep"
    assert str(err.value) == f"ci/deep.sh:2: {reason}"
    with pytest.raises(ThresholdFileError, match=r"^ci/deep\.sh:2: quotes and"):
        find_gates("ci/deep.sh", text, parse_config(""))
    with pytest.raises(ThresholdFileError, match=r"^ci/deep\.sh:2: quotes and"):
        declared_gate("ci/deep.sh", text, "X", "X", "m", ">=")


def test_shell_nesting_up_to_the_limit_is_read() -> None:
    # each '"$(' opens two levels: a double quote, then a substitution
    fits = f'X=0.5\necho {nested_quotes(MAX_NESTING // 2)}\necho "m >= $X"\n'
    (gate,) = parse_shell("ci/ok.sh", fits).gates
    assert (gate.name, gate.value, gate.line) == ("X", 0.5, 1)
    one_more = "$(" + nested_quotes(MAX_NESTING // 2) + ")"  # MAX_NESTING + 1 levels
    with pytest.raises(ThresholdFileError, match=r"^ci/ok\.sh:2: quotes and substitutions"):
        parse_shell("ci/ok.sh", fits.replace("echo ", f"echo {one_more}", 1))


def test_blank_lines_still_end_commands_and_heredocs() -> None:
    text = 'cat <<EOF\nm >= $X\nEOF\n\n\n\nX=0.5\n\n\n# c\n\necho "n < $X"\n'
    gates = parse_shell("a.sh", text).gates
    assert [(g.metric, g.op, g.line) for g in gates] == [("m", ">=", 7), ("n", "<", 7)]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("f.yaml", "f.yaml:1: not valid YAML: unacceptable character #x0000: "),
        ("f.json", "f.json:1: not valid JSON: Expecting value"),
        ("f.toml", "f.toml:1: not valid TOML: "),
    ],
)
def test_binary_files_are_threshold_file_errors(path: str, message: str) -> None:
    config = parse_config("files:\n  - path: 'f.*'\n    gates: [{key: a, metric: m, op: '>='}]\n")
    garbage = bytes(range(256)).decode("latin-1") * 16
    with pytest.raises(ThresholdFileError) as err:
        find_gates(path, garbage, config)
    assert str(err.value).startswith(message)


def test_binary_and_huge_shell_scripts_have_no_gates() -> None:
    config = parse_config("")
    assert find_gates("f.sh", bytes(range(256)).decode("latin-1") * 16, config) is None
    assert find_gates("f.sh", "\x00" * 100_000 + "\n" + "a" * 1_000_000, config) is None


# --------------------------------------------------------------------------- globs and names


def test_glob_with_many_stars_ends_with_the_right_answer() -> None:
    path = "a" * 123
    assert glob_match("*a*a*a*a*a*a*b.sh", path) is False
    assert glob_match("*a*a*a*a*a*a*b.sh", path[:-3] + "b.sh") is True
    assert glob_match("**/" * 300 + "x.sh", "d/" * 1000 + "x.sh") is True


def test_name_regex_is_matched_in_linear_time() -> None:
    spec = SourceSpec(kind="file", path="h.jsonl", name_regex="(a+)+$")
    at = datetime(2026, 7, 1, tzinfo=UTC)
    names = ["a" * 30 + "b", "aaa", "b"]
    runs = tuple(Run(id=f"r{i}", name=n, created_at=at) for i, n in enumerate(names))
    kept = select_runs(History(runs=runs, source="h.jsonl"), spec)
    assert [r.name for r in kept.runs] == ["aaa"]
    mlflow = spec.model_copy(update={"kind": "mlflow", "experiment": "e"})
    assert [wanted(mlflow, "FINISHED", n, {}) for n in names] == [False, True, False]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(?=a)", "not supported by linear-time matching (RE2): invalid perl operator: (?="),
        (r"(a)\1", r"not supported by linear-time matching (RE2): invalid escape sequence: \1"),
        ("([", "unterminated character set at position 1"),
        ("a" * (MAX_PATTERN + 1), f"longer than {MAX_PATTERN} characters"),
    ],
)
def test_refused_name_regex(pattern: str, reason: str) -> None:
    with pytest.raises(ValueError) as err:
        name_filter(pattern)
    assert str(err.value) == reason
    text = f"sources:\n  a: {{kind: mlflow, experiment: e, name_regex: {json.dumps(pattern)}}}\n"
    with pytest.raises(ConfigError) as config_err:
        parse_config(text)
    assert str(config_err.value) == f"{CONFIG_PATH}:1: sources: source 'a': name_regex: {reason}"


# --------------------------------------------------------------------------- config paths


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("files:\n  - path: ../x.yaml\n", 2, "files.0.path: '../x.yaml': '..' is not allowed"),
        ("files:\n  - ci/../../x.sh\n", 2, "files.0.path: 'ci/../../x.sh': '..' is not allowed"),
        ("shell: [a.sh, /etc/passwd]\n", 1, "shell.1: '/etc/passwd': must be relative"),
        ("shell:\n  - 'ci\\x.sh'\n", 2, r"shell.0: 'ci\\x.sh': backslashes are not allowed"),
        ('shell: "ci/\\0.sh"\n', 1, r"shell.0: 'ci/\x00.sh': control characters are not allowed"),
        ("shell: ['./']\n", 1, "shell.0: './': names no file"),
        (
            "sources:\n  off-line:\n    kind: file\n    path: /etc/passwd\n",
            4,
            "sources.off-line.path: '/etc/passwd': must be relative to the repository root",
        ),
        (
            "sources:\n  h: {kind: file, path: ../../h.jsonl}\n",
            2,
            "sources.h.path: '../../h.jsonl': '..' is not allowed",
        ),
    ],
)
def test_config_paths_stay_inside_the_repository(text: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    assert str(err.value).startswith(f"{CONFIG_PATH}:{line}: {message}")


def test_config_paths_are_normalised() -> None:
    config = parse_config(
        "files:\n  - path: ./ci//**/t.yaml\nshell: [./a/./b.sh, 'c//']\n"
        "sources:\n  h: {kind: file, path: ./hist//runs.jsonl}\n"
    )
    assert [f.path for f in config.files] == ["ci/**/t.yaml"]
    assert config.shell == ("a/b.sh", "c")
    assert config.sources["h"].path == "hist/runs.jsonl"
    assert config.sources["h"].describe() == "file:hist/runs.jsonl"
