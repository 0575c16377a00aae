"""``rule.model``, ``rule.overrides`` and ``rule.backtest`` in the repository config
(docs/configuration.md#rule): the shorthand and the mapping, which override a gate gets,
the caps, the error messages with their lines, the schema, and check-config's listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.config import ConfigError, parse_config
from bot.core.limit_model import LimitModel, parse_model, parse_models
from bot.core.models import RuleSettings

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "schema" / "threshold-bot.schema.json").read_text())


def rule_of(text: str) -> RuleSettings:
    return parse_config(text).rule


@pytest.mark.parametrize(
    ("shorthand", "mapping"),
    [
        ("minmax", {"name": "minmax"}),
        ("percentile p=2.5", {"name": "percentile", "p": 2.5}),
        ("zscore k=4 sigma=std", {"name": "zscore", "k": 4, "sigma": "std"}),
        ("prediction confidence=95%", {"name": "prediction", "confidence": 0.95}),
        ("iqr k=2", {"name": "iqr", "k": 2}),
        ("absolute min_limit=0.5", {"name": "absolute", "min_limit": 0.5}),
        ("zscore max_limit=0.9", {"name": "zscore", "max_limit": 0.9}),
    ],
)
def test_a_model_is_the_same_as_shorthand_or_mapping(
    shorthand: str, mapping: dict[str, object]
) -> None:
    from_text = rule_of(f"rule:\n  model: {shorthand}\n").model
    from_mapping = rule_of(yaml.safe_dump({"rule": {"model": mapping}})).model
    assert from_text == from_mapping == LimitModel.model_validate(mapping)
    assert parse_model(from_text.describe()) == from_text  # the words read back


def test_the_default_model_is_minmax_and_the_method_names_its_allowance() -> None:
    rule = rule_of("rule:\n  allowance: 2%\n")
    assert rule.model == LimitModel(name="minmax")
    assert rule.describe_model() == "minmax, 2% allowance"
    assert (
        rule_of("rule:\n  model: percentile\n").describe_model() == "percentile p=5, 5% allowance"
    )
    assert rule_of("rule:\n  model: zscore\n").describe_model() == "zscore k=3"
    assert rule_of("rule:\n  model: iqr\n").describe_model() == "iqr k=1.5"
    prediction = rule_of("rule:\n  model: prediction confidence=0.9\n")
    assert prediction.describe_model() == "prediction confidence=90%"


OVERRIDES = """\
rule:
  allowance: 5%
  model: zscore
  overrides:
    - {file: "ci/latency/*.yaml", model: "percentile p=10", allowance: 2%}
    - {gate: "eval/*/acc", model: iqr}
    - {gate: "*_max", allowance: 10%}
    - {file: "ci/**", gate: "loss*", model: "absolute max_limit=0.5"}
"""


@pytest.mark.parametrize(
    ("name", "metric", "file", "described"),
    [
        # the first entry matching wins: a latency file's acc gate is the file's
        ("p95", "latency/p95", "ci/latency/serve.yaml", "percentile p=10, 2% allowance"),
        ("acc_min", "eval/small/acc", "ci/latency/serve.yaml", "percentile p=10, 2% allowance"),
        ("acc_min", "eval/small/acc", "ci/models/a.yaml", "iqr k=1.5"),  # by metric
        ("acc_max", "eval/x", "ci/a.yaml", "zscore k=3"),  # allowance only, the model kept
        ("loss_cap", "train/loss", "ci/deep/run.yaml", "absolute max_limit=0.5"),  # by name
        ("loss_cap", "train/loss", "tests/run.yaml", "zscore k=3"),  # file glob unmatched
        ("other", "x/y", "ci/latency.yaml", "zscore k=3"),  # not under ci/latency/
    ],
)
def test_a_gate_gets_the_first_override_matching_its_file_name_or_metric(
    name: str, metric: str, file: str, described: str
) -> None:
    rule = rule_of(OVERRIDES)
    gate_rule = rule.for_gate(name, metric, file)
    assert gate_rule.describe_model() == described
    assert gate_rule.window == rule.window
    if gate_rule is not rule:  # an override applied: the gate's rule has none left
        assert gate_rule.overrides == ()


def test_an_overrides_allowance_applies_to_a_model_that_uses_one() -> None:
    rule = rule_of(OVERRIDES)
    gate_rule = rule.for_gate("acc_max", "eval/x", "ci/a.yaml")
    assert gate_rule.allowance == 0.10
    assert gate_rule.model == rule.model
    assert rule.for_gate("acc_max", "eval/x", "ci/a.yaml").harm == 0.10  # harm follows it
    assert rule.for_gate("other", "x/y", "a.yaml") is rule


def test_backtest_settings_and_harm() -> None:
    rule = rule_of("rule:\n  allowance: 3%\n  backtest: {detect_within: 5, min_runs: 10}\n")
    assert (rule.backtest.detect_within, rule.backtest.min_runs) == (5, 10)
    assert rule.backtest.harm is None
    assert rule.harm == 0.03  # the allowance, when harm is not set
    assert rule_of("rule:\n  backtest: {harm: 10%}\n").harm == 0.10
    assert rule_of("rule:\n  backtest: {harm: 0.1}\n").harm == 0.10
    defaults = rule_of("").backtest
    assert (defaults.detect_within, defaults.harm, defaults.min_runs) == (3, None, 5)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "rule:\n  allowance: 5%\n  model: foo\n",
            ".github/threshold-bot.yml:3: rule.model: unknown model 'foo': one of minmax,"
            " percentile, zscore, prediction, iqr, absolute",
        ),
        (
            "rule:\n  model: percentile p=60\n",
            ".github/threshold-bot.yml:2: rule.model.p: must be less than 50, not 60",
        ),
        (
            "rule:\n  model: zscore p=5\n",
            ".github/threshold-bot.yml:2: rule.model: zscore takes k, sigma (besides"
            " min_limit/max_limit), not p",
        ),
        (
            "rule:\n  model:\n    name: zscore\n    p: 5\n",
            ".github/threshold-bot.yml:2: rule.model: zscore takes k, sigma (besides"
            " min_limit/max_limit), not p",
        ),
        (
            "rule:\n  model: prediction confidence=abc\n",
            ".github/threshold-bot.yml:2: rule.model: confidence=abc: not a number",
        ),
        (
            "rule:\n  model: percentile p\n",
            ".github/threshold-bot.yml:2: rule.model: 'p': write parameters as key=value (p=5)",
        ),
        (
            "rule:\n  model: absolute\n",
            ".github/threshold-bot.yml:2: rule.model: absolute needs min_limit, max_limit or both",
        ),
        (
            "rule:\n  model: minmax min_limit=2 max_limit=1\n",
            ".github/threshold-bot.yml:2: rule.model: min_limit 2 is above max_limit",
        ),
        (
            "rule:\n  model: 5\n",
            ".github/threshold-bot.yml:2: rule.model: expected a model (zscore k=3) or a"
            " mapping of its settings",
        ),
        (
            "rule:\n  model:\n    name: zscore\n    k: -1\n",
            ".github/threshold-bot.yml:4: rule.model.k: must be at least 0, not -1",
        ),
        (
            "rule:\n  model:\n    name: zscore\n    sigma: var\n",
            ".github/threshold-bot.yml:4: rule.model.sigma: expected one of 'mad' or 'std',"
            " not 'var'",
        ),
        (
            "rule:\n  model:\n    name: zscore\n    kk: 3\n",
            ".github/threshold-bot.yml:4: rule.model.kk: unknown setting (did you mean `k`?)",
        ),
        (
            "rule:\n  overrides:\n    - gate: x\n      model: bar\n",
            ".github/threshold-bot.yml:4: rule.overrides.0.model: unknown model 'bar': one of"
            " minmax, percentile, zscore, prediction, iqr, absolute",
        ),
        (
            "rule:\n  overrides:\n    - gate: x\n",
            ".github/threshold-bot.yml:3: rule.overrides.0: an override sets 'model',"
            " 'allowance' or both",
        ),
        (
            "rule:\n  overrides:\n    - model: iqr\n",
            ".github/threshold-bot.yml:3: rule.overrides.0: an override needs 'file', 'gate'"
            " or both",
        ),
        (
            "rule:\n  max_allowance: 0.1\n  overrides:\n    - gate: x\n      model: iqr\n"
            "    - gate: y\n      allowance: 20%\n",
            ".github/threshold-bot.yml:7: rule.overrides.1.allowance: 20% is over"
            " max_allowance (10%)",
        ),
        (
            "rule:\n  backtest:\n    harm: 0\n",
            ".github/threshold-bot.yml:3: rule.backtest.harm: must be more than 0, not 0",
        ),
        (
            "rule:\n  backtest:\n    detect_within: 0\n",
            ".github/threshold-bot.yml:3: rule.backtest.detect_within: must be at least 1, not 0",
        ),
    ],
)
def test_a_bad_model_override_or_backtest_reads_plainly_with_its_line(
    config: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config)
    assert str(caught.value) == message


def test_parse_models_reads_a_comma_separated_list() -> None:
    models = parse_models("minmax, percentile p=1,zscore k=4 sigma=std,")
    assert [m.describe() for m in models] == ["minmax", "percentile p=1", "zscore k=4 sigma=std"]
    for text, problem in [
        ("", "no model named"),
        ("minmax,zscore,zscore k=3", "zscore k=3 named twice"),
        (
            "minmax,foo",
            "unknown model 'foo': one of minmax, percentile, zscore, prediction, iqr, absolute",
        ),
        ("iqr k=200", "k: must be at most 100, not 200"),
        ("zscore sigma=var", "sigma: expected one of 'mad' or 'std', not 'var'"),
        ("iqr sigma=mad", "iqr takes k (besides min_limit/max_limit), not sigma"),
    ]:
        with pytest.raises(ValueError) as caught:
            parse_models(text)
        assert str(caught.value) == problem


@pytest.mark.parametrize(
    ("model", "valid"),
    [
        ("zscore k=3 sigma=std", True),
        ("prediction confidence=99%", True),
        ({"name": "iqr", "k": 2}, True),
        ("bayes", False),
        ({"name": "zscore", "q": 1}, False),
        (5, False),
    ],
)
def test_the_schema_takes_a_models_shorthand_or_mapping(model: object, valid: bool) -> None:
    validator = Draft202012Validator(SCHEMA)
    config = {
        "rule": {
            "model": model,
            "overrides": [{"gate": "x", "model": model, "allowance": "2%"}],
            "backtest": {"harm": "5%"},
        }
    }
    errors = list(validator.iter_errors(config))
    assert (not errors) == valid, [e.message for e in errors]
    assert not list(validator.iter_errors({"rule": {"backtest": {"harm": 0.05}}}))


def test_check_config_names_each_limit_gates_model(tmp_path: Path) -> None:
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "threshold-bot.yml").write_text(
        "files:\n  - path: ci/*.yaml\n    gates:\n"
        '      - {key: acc_min, metric: eval/acc, op: ">="}\n'
        '      - {key: latency_max, metric: serve/latency, op: "<="}\n'
        "rule:\n  model: zscore\n  overrides:\n    - {gate: latency*, model: iqr k=2}\n"
    )
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "gates.yaml").write_text("acc_min: 0.61\nlatency_max: 120\n")
    result = CliRunner().invoke(app, ["check-config", "--repo-root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "ci/gates.yaml:" in line]
    assert len(lines) == 2
    assert lines[0].endswith(", limit by zscore k=3")
    assert lines[1].endswith(", limit by iqr k=2")


def test_check_config_leaves_the_model_out_when_the_config_names_none(tmp_path: Path) -> None:
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "threshold-bot.yml").write_text(
        "files:\n  - path: ci/*.yaml\n    gates:\n"
        '      - {key: acc_min, metric: eval/acc, op: ">="}\n'
    )
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "gates.yaml").write_text("acc_min: 0.61\n")
    result = CliRunner().invoke(app, ["check-config", "--repo-root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "limit by" not in result.output
    assert "ci/gates.yaml:1: acc_min: eval/acc >= 0.61 (limit)" in result.output
