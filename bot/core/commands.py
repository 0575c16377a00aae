"""Slash commands in PR comments: ``/rebaseline …``, ``/threshold-bot help|retry``.

Parsing is pure.  A command counts only when it starts a line of ordinary
Markdown text: lines inside fenced or indented code blocks, block quotes
(quoted replies) and HTML comments are ignored, and only the ASCII spelling
is recognised, so look-alike characters never trigger anything.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from bot.core.models import Frozen, WindowSpec, parse_allowance

MAX_BODY_CHARS = 65_536  # GitHub's limit on a comment body
MAX_COMMANDS = 5
MAX_GATES = 50

CommandKind = Literal["rebaseline", "help", "retry"]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_COMMAND = re.compile(r"^ {0,3}/(rebaseline|threshold-bot)(?=\s|$)(.*)$")
_GATE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/\[\]]*$")

HELP_TEXT = """\
**threshold-bot commands** (write one at the start of a line in a PR comment):

| command | what it does |
|---|---|
| `/rebaseline` | recompute every gate the rule would change and commit the new values |
| `/rebaseline NAME …` | only the named gates |
| `/rebaseline --window W` | window W: `20` (last N runs, N ≤ 1,000), `regime`, `since:YYYY-MM-DD` |
| `/rebaseline --allowance 5%` | another allowance (also `0.05`), up to `rule.max_allowance` |
| `/rebaseline --tolerance` | also widen a reference gate's tolerance the recent runs do not fit |
| `/rebaseline --dry-run` | show what would change, commit nothing |
| `/threshold-bot retry` | review the PR again (e.g. after a history outage) |
| `/threshold-bot help` | this help |

`/rebaseline` needs write permission on the repository (or what the repository config asks for).
"""


class Command(Frozen):
    """One recognised command."""

    kind: CommandKind
    line: int  # 1-based line in the comment
    gates: tuple[str, ...] = ()
    window: WindowSpec | None = None
    allowance: float | None = None
    dry_run: bool = False
    tolerance: bool = False  # also rewrite reference gates' tolerances (``--tolerance``)


class CommandProblem(Frozen):
    """A command that was recognised but could not be understood; answered with help."""

    line: int
    text: str
    message: str


class ParsedComment(Frozen):
    """Everything found in one comment."""

    commands: tuple[Command, ...] = ()
    problems: tuple[CommandProblem, ...] = Field(default_factory=tuple)


def command_lines(body: str) -> list[tuple[int, str]]:
    """Lines of ordinary text that start with a slash command, with their 1-based numbers."""
    found: list[tuple[int, str]] = []
    fence: str | None = None
    in_html_comment = False
    for number, raw in enumerate(body[:MAX_BODY_CHARS].splitlines(), start=1):
        line = raw.rstrip("\r")
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            continue
        if in_html_comment:
            in_html_comment = "-->" not in line
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)
            continue
        if line.lstrip().startswith("<!--"):
            in_html_comment = "-->" not in line
            continue
        # _COMMAND wants "/" after at most 3 spaces: never in a block quote or indented code
        if _COMMAND.match(line):
            found.append((number, line.strip()))
    return found


def parse_comment(body: str) -> ParsedComment:
    """Parse every command in a comment body (at most ``MAX_COMMANDS``)."""
    commands: list[Command] = []
    problems: list[CommandProblem] = []
    for number, text in command_lines(body)[:MAX_COMMANDS]:
        result = parse_command_line(text, number)
        if isinstance(result, Command):
            commands.append(result)
        else:
            problems.append(result)
    return ParsedComment(commands=tuple(commands), problems=tuple(problems))


def parse_command_line(text: str, line: int = 1) -> Command | CommandProblem:
    """Parse one command line such as ``/rebaseline EVAL_MIN --window regime``."""
    match = _COMMAND.match(text)
    if not match:
        return CommandProblem(line=line, text=text, message="not a threshold-bot command")
    name, rest = match.group(1), match.group(2).split()
    if name == "threshold-bot":
        return _parse_bot_command(rest, text, line)
    return _parse_rebaseline(rest, text, line)


def _parse_bot_command(args: list[str], text: str, line: int) -> Command | CommandProblem:
    sub = args[0].lower() if args else "help"
    if sub in ("help", "retry") and len(args) <= 1:
        return Command(kind=sub, line=line)  # type: ignore[arg-type]
    return CommandProblem(
        line=line,
        text=text,
        message=f"unknown command `{' '.join(args)}`: try `/threshold-bot help`",
    )


def _parse_rebaseline(args: list[str], text: str, line: int) -> Command | CommandProblem:
    gates: list[str] = []
    window: WindowSpec | None = None
    allowance: float | None = None
    dry_run = tolerance = False
    tokens = iter(args)
    for token in tokens:
        option, _, inline = token.partition("=")
        if option in ("--window", "--allowance"):
            value = inline or next(tokens, "")
            if not value:
                return _problem(line, text, f"`{option}` needs a value")
            try:
                if option == "--window":
                    window = WindowSpec.parse(value)
                else:
                    allowance = parse_allowance(value)
            except ValueError as exc:
                return _problem(line, text, str(exc))
        elif token in ("--dry-run", "--dryrun"):
            dry_run = True
        elif token == "--tolerance":
            tolerance = True
        elif token.startswith("-"):
            return _problem(line, text, f"unknown option `{token}`")
        elif _GATE_NAME.match(token) and len(gates) < MAX_GATES:
            if token not in gates:
                gates.append(token)
        else:
            return _problem(line, text, f"`{token[:60]}` is not a gate name")
    return Command(
        kind="rebaseline",
        line=line,
        gates=tuple(gates),
        window=window,
        allowance=allowance,
        dry_run=dry_run,
        tolerance=tolerance,
    )


def _problem(line: int, text: str, message: str) -> CommandProblem:
    return CommandProblem(
        line=line,
        text=text[:200],
        message=f"{message}. Options: `--window 20|regime|since:YYYY-MM-DD`, "
        "`--allowance 5%`, `--tolerance`, `--dry-run`; see `/threshold-bot help`",
    )
