"""The ``drift:`` settings of the repository config: every value valid and not, each invalid
one falling back to its default with a problem in plain words, never an invalid config."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from bot.cli.main import app
from bot.core.config import DriftSettings, RepoConfig, config_schema, parse_config
from bot.core.models import WindowSpec

SCHEMA = Path(__file__).resolve().parent.parent / "schema" / "threshold-bot.schema.json"


def drift(text: str) -> DriftSettings:
    return parse_config(text).drift


def test_defaults_without_a_drift_section_or_with_an_empty_one() -> None:
    for text in ("", "drift:\n", "drift: {}\n", "rule: {window: 20}\n"):
        settings = drift(text)
        assert settings == DriftSettings()
        assert settings.mode == "issue" and settings.min_failures == 3
        assert settings.window == WindowSpec(kind="regime")
        assert (settings.labels, settings.assignees, settings.files) == ((), (), ())
        assert settings.problems == ()
    assert RepoConfig().drift == DriftSettings()


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("mode: pull_request", "mode", "pull_request"),
        ("mode: 'off'", "mode", "off"),
        ("mode: off", "mode", "off"),  # YAML 1.1 reads a bare off as false
        ("mode: issue", "mode", "issue"),
        ("min_failures: 1", "min_failures", 1),
        ("min_failures: 7", "min_failures", 7),
        ("window: 20", "window", WindowSpec(kind="last", runs=20)),
        ("window: '15'", "window", WindowSpec(kind="last", runs=15)),
        ("window: regime", "window", WindowSpec(kind="regime")),
        (
            "window: 'since:2026-03-01'",
            "window",
            WindowSpec(kind="since", since=date(2026, 3, 1)),
        ),
        ("labels: [ci, nightly]", "labels", ("ci", "nightly")),
        ("labels: ci", "labels", ("ci",)),
        ("labels: ['" + "x" * 50 + "']", "labels", ("x" * 50,)),
        ("assignees: [octocat, '@mona-lisa']", "assignees", ("octocat", "mona-lisa")),
        ("assignees: octocat", "assignees", ("octocat",)),
        ("files: ['ci/**/*.sh', ./a//b.yaml]", "files", ("ci/**/*.sh", "a/b.yaml")),
        ("files: 'ci/*.sh'", "files", ("ci/*.sh",)),
    ],
)
def test_valid_values(text: str, field: str, value: Any) -> None:
    settings = drift(f"drift: {{{text}}}\n")
    assert getattr(settings, field) == value
    assert settings.problems == ()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "mode: sometimes",
            "drift.mode: expected one of 'issue', 'pull_request' or 'off', not 'sometimes'"
            " — using issue",
        ),
        ("mode: on", "drift.mode: expected one of 'issue', 'pull_request' or 'off', not true"),
        ("min_failures: 0", "drift.min_failures: must be at least 1, not 0 — using 3"),
        ("min_failures: -2", "drift.min_failures: must be at least 1, not -2 — using 3"),
        ("min_failures: three", "drift.min_failures: expected a whole number, not 'three'"),
        ("min_failures: true", "drift.min_failures: expected a whole number, not true"),
        ("min_failures: 2.5", "drift.min_failures: expected a whole number, not 2.5"),
        (
            "window: weekly",
            "drift.window: invalid window 'weekly': expected a run count, 'regime' or"
            " 'since:YYYY-MM-DD' — using regime",
        ),
        ("window: 0", "drift.window: invalid window '0': must hold at least 1 run — using regime"),
        ("window: 1001", "drift.window: invalid window '1001': at most 1,000 runs — using regime"),
        (
            "window: 'since:2026-13-01'",
            "drift.window: invalid window 'since:2026-13-01': month must be in",
        ),
        ("labels: [ci, '']", "drift.labels.1: '' is not a label — using no labels"),
        ("labels: ['" + "x" * 51 + "']", "drift.labels.0: too long (at most 50) — using no"),
        ("labels: {a: 1}", "drift.labels: expected a list, not a mapping — using no labels"),
        ("assignees: ['bad login!']", "drift.assignees.0: 'bad login!' is not a GitHub login"),
        ("assignees: ['-dash']", "drift.assignees.0: '-dash' is not a GitHub login"),
        ("assignees: ['" + "a" * 40 + "']", "is not a GitHub login — using no assignees"),
        (
            "files: [/etc/passwd]",
            "drift.files.0: '/etc/passwd': must be relative to the repository root, not"
            " absolute — using every threshold file",
        ),
        ("files: ['../x.sh']", "drift.files.0: '../x.sh': '..' is not allowed"),
        ("modee: issue", "drift.modee: unknown setting (did you mean `mode`?) — ignored"),
        ("labells: [ci]", "drift.labells: unknown setting (did you mean `labels`?) — ignored"),
        ("colour: red", "drift.colour: unknown setting — ignored"),
        ("problems: [a]", "drift.problems: unknown setting — ignored"),
    ],
)
def test_an_invalid_value_falls_back_and_says_so(text: str, problem: str) -> None:
    key = text.split(":")[0]
    beside = "labels: [keep]" if key == "mode" else "mode: pull_request"
    config = parse_config(f"rule: {{allowance: 10%}}\ndrift: {{{text}, {beside}}}\n")
    assert config.rule.allowance == 0.1  # the rest of the config stands
    settings = config.drift
    assert len(settings.problems) == 1
    assert settings.problems[0].startswith(problem) or settings.problems[0].endswith(problem)
    if key == "mode":  # the valid setting beside it stands
        assert settings.labels == ("keep",)
    else:
        assert settings.mode == "pull_request"
    if key in DriftSettings.model_fields and key != "problems":
        assert getattr(settings, key) == getattr(DriftSettings(), key)


@pytest.mark.parametrize(
    ("text", "given"),
    [("drift: 5", "5"), ("drift: [issue]", "a list"), ("drift: pull_request", "'pull_request'")],
)
def test_a_drift_value_that_is_not_a_mapping_uses_the_defaults(text: str, given: str) -> None:
    settings = drift(text)
    assert settings.model_dump(exclude={"problems"}) == DriftSettings().model_dump(
        exclude={"problems"}
    )
    assert settings.problems == (
        f"drift: expected a mapping of settings, not {given} — using the defaults",
    )


def test_every_problem_is_listed_in_order() -> None:
    settings = drift("drift: {mode: never, min_failures: 0, labels: ci, colour: red}\n")
    assert settings.labels == ("ci",)
    assert [p.split(":")[0] for p in settings.problems] == [
        "drift.mode",
        "drift.min_failures",
        "drift.colour",
    ]


def test_problems_are_not_a_setting_of_the_schema() -> None:
    schema = config_schema()
    drift_schema = schema["$defs"]["DriftSettings"]
    assert "problems" not in drift_schema["properties"]
    assert drift_schema["additionalProperties"] is False
    assert "problems" not in json.dumps(schema)
    assert json.loads(SCHEMA.read_text()) == json.loads(json.dumps(schema))


@pytest.mark.parametrize(
    "text",
    [
        "drift: {mode: pull_request, min_failures: 5, window: regime, labels: [ci],"
        " assignees: [octocat], files: ['ci/*.sh']}\n",
        "drift: {window: 20, labels: ci, assignees: octocat, files: ci/nightly.sh}\n",
        "drift: {window: 'since:2026-01-01'}\n",
        "drift: {mode: off}\n",
    ],
)
def test_valid_drift_configs_are_valid_under_the_schema(text: str) -> None:
    assert parse_config(text).drift.problems == ()
    data = yaml.safe_load(text)
    if isinstance(data["drift"].get("window"), date):
        data["drift"]["window"] = str(data["drift"]["window"])
    assert not list(Draft202012Validator(config_schema()).iter_errors(data))


@pytest.mark.parametrize(
    "text",
    ["drift: {mode: sometimes}\n", "drift: {min_failures: 0}\n", "drift: {colour: red}\n"],
)
def test_the_schema_flags_what_the_loader_falls_back_on(text: str) -> None:
    assert parse_config(text).drift.problems  # the loader: a problem, never an error
    assert list(Draft202012Validator(config_schema()).iter_errors(yaml.safe_load(text)))


def test_check_config_shows_drift_problems_as_warnings(tmp_path: Path) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "a.sh").write_text('#!/bin/bash\nA=1\ncheck "m >= $A"\n')
    config = tmp_path / "threshold-bot.yml"
    config.write_text("shell: [ci/*.sh]\ndrift: {mode: sometimes, colour: red}\n")
    result = CliRunner().invoke(app, ["check-config", str(config), "--repo-root", str(tmp_path)])
    assert result.exit_code == 0, result.output  # warnings, not problems
    lines = result.stdout.splitlines()
    start = lines.index("Drift settings that fell back (warnings):")
    problems = parse_config(config.read_text()).drift.problems
    assert len(problems) == 2 and lines[start + 1 : start + 3] == [f"  {p}" for p in problems]
    assert lines[-1] == "ok"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("", None),
        ("dashboard:\n", None),
        ("dashboard: on\n", True),  # YAML 1.1: a bool
        ("dashboard: off\n", False),
        ("dashboard: 'on'\n", True),  # quoted, or read by a YAML 1.2 parser
        ("dashboard: 'off'\n", False),
        ("dashboard: true\n", True),
    ],
)
def test_dashboard_on_or_off_or_unset(text: str, value: bool | None) -> None:
    config = parse_config(text)
    assert config.dashboard is value
    assert config.drift.problems == ()
    assert not list(Draft202012Validator(config_schema()).iter_errors(yaml.safe_load(text) or {}))


@pytest.mark.parametrize(
    ("text", "given"),
    [
        ("dashboard: sometimes\n", "'sometimes'"),
        ("dashboard: 1\n", "1"),
        ("dashboard: []\n", "a list"),
    ],
)
def test_another_dashboard_value_is_unset_with_a_drift_problem(text: str, given: str) -> None:
    config = parse_config(f"drift: {{mode: pull_request}}\n{text}")
    assert config.dashboard is None
    assert config.drift.mode == "pull_request"  # the rest of the config is read as written
    assert config.drift.problems == (
        f"dashboard: expected on or off, not {given} — using the App's setting",
    )
    assert list(Draft202012Validator(config_schema()).iter_errors(yaml.safe_load(text)))
