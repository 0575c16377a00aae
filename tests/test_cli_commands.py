"""The program's commands load when they run: ``--version`` and ``--help`` import none of
them, and each command's one-line summary in the program's help is its docstring's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bot.cli.commands import COMMANDS, load_command

pytestmark = pytest.mark.servers

# what the program itself may import before a command is chosen
_PROBE = """
import json, sys
from bot.cli.main import app
sys.argv = ["threshold-bot", *sys.argv[1:]]
try:
    app()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
HEAVY = ("numpy", "pydantic", "jinja2", "yaml", "github", "rich", "sqlalchemy", "wandb")
HEAVY += ("tensorboardX", "google_crc32c")  # the actions extra: imported on first use


def _imported(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=60
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [("--version",), ("--help",)])
def test_the_program_alone_imports_no_command_and_no_heavy_library(args: tuple[str, ...]) -> None:
    modules = _imported(*args)
    commands = {entry.target.partition(":")[0] for entry in COMMANDS.values()}
    assert not commands & modules
    assert not {m for m in modules if m.partition(".")[0] in HEAVY}


def test_a_command_imports_its_module_when_it_runs() -> None:
    modules = _imported("check-config", "--help")
    assert "bot.cli.check_config" in modules and "bot.cli.serve" not in modules


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_summary_is_the_commands_own(name: str) -> None:
    command = load_command(name)
    assert COMMANDS[name].summary == command.get_short_help_str(limit=200)
