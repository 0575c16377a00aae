from datetime import UTC, date, datetime

import pytest
from pydantic import ValidationError

from bot.core.config import ConfigError, parse_config
from bot.core.models import MAX_WINDOW, RuleSettings, Run, WindowSpec, passes


def test_naive_timestamp_is_utc() -> None:
    run = Run(id="a", created_at=datetime(2026, 7, 1, 8, 0), summary={"m": 1.0})
    assert run.created_at.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20", WindowSpec(kind="last", runs=20)),
        ("regime", WindowSpec(kind="regime")),
        ("since:2026-07-01", WindowSpec(kind="since", since=date(2026, 7, 1))),
    ],
)
def test_window_parse(text: str, expected: WindowSpec) -> None:
    assert WindowSpec.parse(text) == expected
    assert str(WindowSpec.parse(text)) == text


@pytest.mark.parametrize("text", ["0", "-3", "last", "since:2026-13-01", "since:", "1001"])
def test_window_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        WindowSpec.parse(text)


def test_a_window_holds_at_most_the_maximum_of_runs() -> None:
    assert MAX_WINDOW == 1000
    assert WindowSpec.parse(str(MAX_WINDOW)) == WindowSpec(kind="last", runs=MAX_WINDOW)
    with pytest.raises(ValueError) as over:
        WindowSpec.parse("7000")
    assert str(over.value) == "invalid window '7000': at most 1,000 runs"
    with pytest.raises(ValueError, match=r"at most 1,000 runs$"):
        WindowSpec.parse("9" * 5000)  # past int()'s digit limit: the same words
    for runs in (0, MAX_WINDOW + 1):  # the mapping form is held to the same bounds
        with pytest.raises(ValidationError):
            WindowSpec(kind="last", runs=runs)
    with pytest.raises(ValidationError):
        RuleSettings.model_validate({"window": MAX_WINDOW + 1})


def test_passes_each_operator() -> None:
    assert passes(0.5, ">=", 0.5) and not passes(0.5, ">", 0.5)
    assert passes(0.5, "<=", 0.5) and not passes(0.5, "<", 0.5)


def test_config_window_from_string_and_unknown_source() -> None:
    cfg = parse_config("rule:\n  window: since:2026-07-01\n")
    assert cfg.rule.window.kind == "since"
    assert RuleSettings().window.runs == 20
    with pytest.raises(ConfigError, match="not defined"):
        parse_config("default_source: nowhere\n")
    with pytest.raises(ConfigError, match=r"rule\.allowance"):
        parse_config("rule: {allowance: -1}\n")
