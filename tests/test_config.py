"""The repository config ``.github/threshold-bot.yml``: schema, defaults and error messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.config import CONFIG_PATH, ConfigError, RepoConfig, parse_config
from bot.core.models import RuleSettings, WindowSpec

DATA = Path(__file__).resolve().parent / "data"


def test_empty_config_is_all_defaults() -> None:
    for text in ("", "\n# nothing\n", "---\n"):
        config = parse_config(text)
        assert config == RepoConfig()
        assert config.rule == RuleSettings()
        assert config.source(None) is None
        assert config.permissions.rebaseline == "write"


def test_full_example_config() -> None:
    config = parse_config((DATA / "threshold-bot.yml").read_text(encoding="utf-8"))
    assert config.rule.allowance == 0.05
    assert config.rule.window == WindowSpec(kind="regime")
    assert config.rule.significant_digits == 3
    assert config.rule.failure_lookback == 40
    assert config.regimes.min_regime_runs == 6
    nightly = config.sources["nightly"]
    assert (nightly.kind, nightly.entity, nightly.project) == ("wandb", "rl-team", "gsm8k_ci")
    assert nightly.states == ("finished", "failed", "crashed")
    assert nightly.tags == ("nightly",)
    assert nightly.summary_keys == {"eval/all/avg_score": "eval/avg_score"}
    offline = config.sources["offline"]
    assert (offline.kind, offline.path) == ("file", "ci/history/runs.jsonl")
    assert config.default_source == "nightly"
    assert config.source(None) == nightly
    assert config.source("offline") == offline
    assert config.shell == ("tests/ci/*.sh", "scripts/nightly")
    (structured, bare) = config.files
    assert structured.path == "ci/**/thresholds.yaml" and structured.source == "offline"
    (gate,) = structured.gates
    assert (gate.key, gate.metric, gate.op, gate.name) == (
        "gsm8k.eval.acc_min",
        "eval/all/avg_score",
        ">=",
        "GSM8K_ACC_MIN",
    )
    assert bare.path == "ci/extra/*.sh" and bare.gates == ()
    assert config.permissions.approve == "maintain"


def test_shorthands() -> None:
    config = parse_config("shell: ci/*.sh\nfiles: [a.yaml]\nrule: {window: 30}\n")
    assert config.shell == ("ci/*.sh",)
    assert config.files[0].path == "a.yaml"
    assert config.rule.window == WindowSpec(kind="last", runs=30)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "rule:\n  allowance: -1\n",
            2,
            "rule.allowance: must be at least 0, not -1",
        ),
        ("rule:\n  window: last-5\n", 2, "rule.window: invalid window 'last-5'"),
        ("rule:\n  window: 7000\n", 2, "rule.window: invalid window '7000': at most 1,000 runs"),
        (
            "rule:\n  window: {kind: last, runs: 1001}\n",
            2,
            "rule.window.runs: must be at most 1000, not 1001",
        ),
        (
            "regimes:\n  min_regime_runs: 7000\n",
            2,
            "regimes.min_regime_runs: must be at most 100, not 7000",
        ),
        ("rules: {}\n", 1, "rules: unknown setting"),
        (
            "files:\n  - path: a.yaml\n    gates:\n      - {key: a, metric: m, op: =>}\n",
            4,
            "files.0.gates.0.op: expected one of '>=', '>', '<=', '<' or '==', not '=>'",
        ),
        (
            "files:\n  - path: a.yaml\n    gates:\n      - {key: a, metric: m}\n",
            4,
            "files.0.gates.0.op: a limit gate needs an op",
        ),
        ("sources:\n  a: {kind: file}\n", 1, "source 'a': a file source needs 'path'"),
        ("sources:\n  a: {kind: mlflow}\n", 1, "an mlflow source needs 'experiment'"),
        (
            "sources:\n  a: {kind: file, path: r.jsonl, name_regex: '(['}\n",
            1,
            "source 'a': name_regex: unterminated character set",
        ),
        (
            "rule:\n  allowance: 5\n",
            2,
            "rule.allowance: must be at most 1, not 5",
        ),
        (
            "sources: {a: {project: p}}\ndefault_source: b\n",
            2,
            "default_source: source 'b' is not defined under 'sources' (defined: a)",
        ),
        (
            "files:\n  - path: x\n    gates:\n      - {key: a, metric: m, op: <, source: q}\n",
            4,
            "files.0.gates.0.source: source 'q' is not defined",
        ),
        (
            "files:\n  - path: x\n    gates:\n"
            "      - {key: a, metric: m, op: <}\n      - {key: a, metric: m, op: <}\n",
            3,
            "gate 'a' (m <) is declared twice",
        ),
        (
            "permissions: {rebaseline: everyone}\n",
            1,
            "permissions.rebaseline: expected one of 'read'",
        ),
        ("files: [{path: ''}]\n", 1, "files.0.path: must not be empty"),
        ("rule: [1, 2\n", 2, "not valid YAML"),
    ],
)
def test_errors_name_file_line_and_key(text: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    assert str(err.value).startswith(f"{CONFIG_PATH}:{line}: ")
    assert message in str(err.value)


def test_top_level_must_be_a_mapping_and_path_is_named() -> None:
    with pytest.raises(ConfigError, match=r"^custom\.yml: expected a mapping"):
        parse_config("- a\n- b\n", "custom.yml")


def test_every_problem_is_listed() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config("rule: {allowance: -1, significant_digits: 0}\nbogus: 1\n")
    text = str(err.value)
    assert "rule.allowance" in text and "rule.significant_digits" in text and "bogus" in text


def test_a_source_cannot_name_series_the_gates_decide_them() -> None:
    text = "sources:\n  w:\n    kind: wandb\n    project: p\n    series: [loss]\n"
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    assert "sources.w.series: unknown setting" in str(err.value)


@pytest.mark.parametrize("workflow", ["5150", "'5150'", "nightly.yml"])
def test_an_actions_source_names_its_workflow_by_file_or_numeric_id(workflow: str) -> None:
    text = f"sources:\n  n:\n    kind: actions\n    workflow: {workflow}\n    artifact: res\n"
    spec = parse_config(text).sources["n"]
    assert spec.workflow == workflow.strip("'")
    assert spec.describe() == f"actions:{workflow.strip(chr(39))}:res"


@pytest.mark.parametrize("workflow", ["true", "1.5", "[a]"])
def test_an_actions_workflow_is_text_or_a_whole_number(workflow: str) -> None:
    text = f"sources:\n  n:\n    kind: actions\n    workflow: {workflow}\n    artifact: res\n"
    with pytest.raises(ConfigError, match=r"sources\.n\.workflow"):
        parse_config(text)
