from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.core.commands import (
    HELP_TEXT,
    MAX_COMMANDS,
    Command,
    CommandProblem,
    parse_allowance,
    parse_command_line,
    parse_comment,
)
from bot.core.models import WindowSpec


def only(body: str) -> Command:
    parsed = parse_comment(body)
    assert not parsed.problems, parsed.problems
    assert len(parsed.commands) == 1
    return parsed.commands[0]


def test_plain_rebaseline_means_all_gates() -> None:
    cmd = only("/rebaseline")
    assert cmd == Command(kind="rebaseline", line=1)


def test_named_gates_and_options() -> None:
    cmd = only(
        "Thanks!\n\n/rebaseline EVAL_ACC_MIN_VALUE AVG_NUM_TOKENS_MAX_VALUE "
        "--window since:2026-07-01 --allowance 10% --dry-run\n"
    )
    assert cmd.line == 3
    assert cmd.gates == ("EVAL_ACC_MIN_VALUE", "AVG_NUM_TOKENS_MAX_VALUE")
    assert cmd.window == WindowSpec(kind="since", since=date(2026, 7, 1))
    assert cmd.allowance == pytest.approx(0.10)
    assert cmd.dry_run


@pytest.mark.parametrize("window", ["--window regime", "--window=regime"])
def test_option_with_equals_or_space(window: str) -> None:
    assert only(f"/rebaseline {window}").window == WindowSpec(kind="regime")


@pytest.mark.parametrize(
    ("text", "value"), [("5%", 0.05), ("0.05", 0.05), ("12.5%", 0.125), ("0", 0.0)]
)
def test_allowance_forms(text: str, value: float) -> None:
    assert parse_allowance(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["-5%", "five", "150%", "5%%", "1e-2"])
def test_allowance_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_allowance(text)


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("/rebaseline --force", "unknown option `--force`"),
        ("/rebaseline --window", "`--window` needs a value"),
        ("/rebaseline --window last-week", "invalid window"),
        ("/rebaseline --window 5000", "invalid window '5000': at most 1,000 runs"),
        ("/rebaseline --allowance lots", "invalid allowance"),
        ("/rebaseline $(rm -rf /)", "is not a gate name"),
        ("/threshold-bot frobnicate", "unknown command"),
    ],
)
def test_problems_get_a_helpful_message(line: str, fragment: str) -> None:
    parsed = parse_comment(line)
    assert not parsed.commands
    assert len(parsed.problems) == 1
    assert fragment in parsed.problems[0].message
    assert "/threshold-bot help" in parsed.problems[0].message


def test_help_and_retry() -> None:
    assert only("/threshold-bot help").kind == "help"
    assert only("/threshold-bot").kind == "help"
    assert only("/threshold-bot retry").kind == "retry"


@pytest.mark.parametrize(
    "body",
    [
        "```\n/rebaseline\n```",
        "~~~~ text\n/rebaseline\n~~~~",
        "> /rebaseline",
        "On Tue, alice wrote:\n> thanks\n> /rebaseline --dry-run",
        "text\n\n    /rebaseline",
        "<!--\n/rebaseline\n-->",
        "please run `/rebaseline` later",
        "I ran /rebaseline yesterday",
        "/rebaselined",
        "/rebaseline-all",
        "\uff0frebaseline",  # fullwidth solidus
        "/r\u0435baseline",  # Cyrillic ie
        "/rebaseline\u200b",  # zero-width space glued to the command
    ],
)
def test_not_a_command(body: str) -> None:
    assert parse_comment(body) == parse_comment("")


def test_fence_closes_only_with_same_marker() -> None:
    body = "```\n~~~\n/rebaseline\n```\n/rebaseline X"
    cmd = only(body)
    assert cmd.gates == ("X",) and cmd.line == 5


def test_command_after_a_quote_counts() -> None:
    assert only("> earlier text\n\n/rebaseline A").gates == ("A",)


def test_very_long_comment_is_bounded() -> None:
    body = ("/rebaseline A\n" * 10_000) + "x" * 200_000
    parsed = parse_comment(body)
    assert len(parsed.commands) == MAX_COMMANDS


def test_parse_command_line_rejects_non_commands() -> None:
    assert isinstance(parse_command_line("hello"), CommandProblem)


@given(st.text(max_size=400))
def test_parser_never_raises(body: str) -> None:
    parsed = parse_comment(body)
    for cmd in parsed.commands:
        assert cmd.kind in ("rebaseline", "help", "retry")


def test_tolerance_option() -> None:
    cmd = only("/rebaseline GSM8K_ACC_REF --tolerance --dry-run")
    assert cmd.tolerance and cmd.dry_run and cmd.gates == ("GSM8K_ACC_REF",)
    assert not only("/rebaseline").tolerance
    assert "`/rebaseline --tolerance`" in HELP_TEXT
    [problem] = parse_comment("/rebaseline --tolerance=12%").problems
    assert "unknown option `--tolerance=12%`" in problem.message
    assert "`--tolerance`" in problem.message  # the options the message lists
