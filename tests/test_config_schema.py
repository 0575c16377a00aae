"""The config's JSON Schema (schema/threshold-bot.schema.json): current with the model, and
agreeing with the loader on the documented configs and on typos."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.config import ConfigError, parse_config

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "schema" / "threshold-bot.schema.json"
DOCS = ("README.md", "docs/configuration.md", "docs/threshold-files.md")


class _EditorLoader(yaml.SafeLoader):
    """YAML as an editor's language server reads it: timestamps stay strings."""


_EditorLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def committed() -> dict[str, Any]:
    return dict(json.loads(SCHEMA.read_text()))


def test_the_committed_schema_is_current() -> None:
    result = CliRunner().invoke(app, ["check-config", "--schema"])
    assert result.exit_code == 0
    assert result.stdout == SCHEMA.read_text(), "stale schema: run `make schema` and commit it"


def test_the_schema_is_valid_and_named() -> None:
    schema = committed()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "threshold-bot repository config"
    assert schema["additionalProperties"] is False


def _documented_configs() -> list[str]:
    blocks = []
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        blocks += re.findall(r"```ya?ml\n(.*?)```", text, re.S)
    accepted = []
    for block in blocks:
        try:
            parse_config(block)
        except ConfigError:
            continue  # a threshold file, or a fragment
        accepted.append(block)
    return accepted


def test_every_documented_config_the_loader_accepts_is_valid_under_the_schema() -> None:
    configs = _documented_configs()
    assert len(configs) >= 5
    validator = Draft202012Validator(committed())
    for text in configs:
        data = yaml.load(text, Loader=_EditorLoader) or {}
        errors = [e.message for e in validator.iter_errors(data)]
        assert not errors, (text, errors)


@pytest.mark.parametrize(
    "text",
    [
        "shell: ci/*.sh\nfiles: [a.yaml]\nrule: {window: 30, allowance: 5%}\n",
        "rule: {window: regime, allowance: 0.1}\ntolerance: 0.08\n",
        "rule: {window: 'since:2026-01-01'}\npython: [tests/test_*.py]\n",
        "files:\n  - path: a.yaml\n    tolerance: {rel: 0.05, abs: 0.01}\n"
        "    gates: [{key: x, metric: m, kind: reference}]\n",
    ],
)
def test_shorthands_the_loader_accepts_are_valid(text: str) -> None:
    parse_config(text)
    data = yaml.load(text, Loader=_EditorLoader)
    assert not list(Draft202012Validator(committed()).iter_errors(data))


@pytest.mark.parametrize(
    "text",
    [
        "rule: {windw: 20}\n",
        "files: [{path: a.yaml, gates: [{key: a, metric: m, op: '=>'}]}]\n",
        "rule: {allowance: lots}\n",
        "permissions: {rebaseline: everyone}\n",
        "sources: {a: {kind: s3}}\n",
    ],
)
def test_typos_are_refused_by_both(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_config(text)
    data = yaml.load(text, Loader=_EditorLoader)
    assert list(Draft202012Validator(committed()).iter_errors(data))


VALID_WINDOWS: list[object] = [1, 1000, "1000", "0020", {"kind": "last", "runs": 1000}]
INVALID_WINDOWS: list[object] = [0, 1001, "0", "1001", "10000", {"kind": "last", "runs": 1001}]


@pytest.mark.parametrize("window", [*VALID_WINDOWS, *INVALID_WINDOWS, {"kind": "last", "runs": 0}])
def test_the_schema_bounds_a_window_as_the_loader_does(window: object) -> None:
    data = {"rule": {"window": window}}
    try:
        parse_config(json.dumps(data))
    except ConfigError:
        accepted = False
    else:
        accepted = True
    assert accepted == (window in VALID_WINDOWS)
    for config in (data, {"drift": {"window": window}}):  # the drift's window: the same bounds
        errors = list(Draft202012Validator(committed()).iter_errors(config))
        assert not errors if accepted else errors, config
