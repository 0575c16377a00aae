"""What the review shows, as a new user met it (issue 26, part), through the CLI on the demo
example and through the renderers on reviews built by the real analysis:

- a command shown for copying pastes as one command: the terminal table (80 columns and
  narrower, a path wider than a line), the Markdown comment and the drift issue, each read
  back as a shell reads a paste (shlex, and a real ``sh``);
- the printed ``threshold-bot rebaseline`` names exactly the gates the review flagged, and
  run through the CLI it rewrites exactly those; its words name the gates a run without names
  would also rewrite, and they are the ones it does;
- an audit (no ``--base``) proposes nothing on any surface, and its headline names each gate
  unambiguously;
- a regime change whose runs on either side have one commit is "no code change", never a
  range or a compare link.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from contextlib import chdir
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner, Result

from bot.cli.main import app
from bot.cli.review import review_files
from bot.core.analysis.drift import drift_report
from bot.core.analysis.review import build_review
from bot.core.config import DriftSettings, RepoConfig
from bot.core.models import GateChange, Run
from bot.core.render.drift import item_body
from bot.core.render.html_report import html_report
from bot.core.render.review import render_check, render_comment
from bot.core.render.terminal import review_table
from bot.core.thresholds.discover import find_gates
from demo.data import ExamplePaths, write_example
from tests.builders import history_of, limit_gate

pytestmark = pytest.mark.servers

RUNNER = CliRunner()
FLAGS = ("too_tight", "looser_than_rule", "unchanged_failing")  # verdicts that need action
# a directory wider than a terminal line, with a space and parentheses to quote
LONG_DIR = "nightly thresholds (gsm8k)/" + "-".join(["a-directory-name-wider-than-a-line"] * 3)
URL = "https://github.com/rl-team/trainer"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> ExamplePaths:
    return write_example(tmp_path_factory.mktemp("example"))


@pytest.fixture
def copy(example: ExamplePaths, tmp_path: Path) -> Path:
    """A copy of the example to write into, with the head file also under ``LONG_DIR``."""
    root = tmp_path / "example"
    shutil.copytree(example.root, root)
    long = root / LONG_DIR / example.head.name
    long.parent.mkdir(parents=True)
    shutil.copy(example.head, long)
    return root


def cli(root: Path, *args: str | Path, columns: int = 80) -> Result:
    """The CLI run in ``root`` as a user would (relative paths), ``COLUMNS`` wide."""
    with chdir(root):
        return RUNNER.invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)})


def review_args(paths: ExamplePaths, file: str, *, audit: bool) -> list[str]:
    base = [] if audit else ["--base", paths.base.relative_to(paths.root).as_posix()]
    return ["review", "--history", "history.jsonl", "--file", file, *base]


def head(paths: ExamplePaths) -> str:
    return paths.head.relative_to(paths.root).as_posix()


def flagged(data: dict[str, Any]) -> list[str]:
    """The gates of a JSON review that need action and whose rule value differs."""
    return [
        g["name"]
        for g in data["gates"]
        if g["verdict"] in FLAGS and g["recomputed"] not in (None, g["proposed"])
    ]


def pasted(text: str) -> list[str]:
    """``text`` pasted into a POSIX shell, as shlex reads it: a backslash ending a line
    continues it (the shell drops both), then the words."""
    return shlex.split(text.replace("\\\n", ""))


def sh_words(text: str) -> list[str]:
    """The words a real ``sh`` makes of ``text`` pasted after ``set --``."""
    script = f"set -- {text}\nprintf '%s\\0' \"$@\""
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    return out.stdout.split("\0")[:-1]


def fenced_commands(markdown: str) -> list[str]:
    """The lines of the Markdown's ``sh`` blocks, as a copy button copies them."""
    blocks = re.findall(r"^( *)```sh\n(.*?)\n\1```$", markdown, re.DOTALL | re.MULTILINE)
    return [line[len(indent) :] for indent, body in blocks for line in body.splitlines()]


def shown_command(table: str) -> str:
    """The command the terminal table shows: from its first line to the first line not
    continued with a backslash."""
    lines = table.splitlines()
    first = next(i for i, line in enumerate(lines) if line.lstrip().startswith("threshold-bot"))
    last = next(i for i in range(first, len(lines)) if not lines[i].endswith("\\"))
    return "\n".join(lines[first : last + 1])


# --------------------------------------------------------------------------- 1: commands paste


@pytest.mark.parametrize("columns", [80, 50])
@pytest.mark.parametrize("where", ["head", "long"])
def test_the_table_command_pastes_as_the_command_meant(
    example: ExamplePaths, copy: Path, columns: int, where: str
) -> None:
    file = head(example) if where == "head" else f"{LONG_DIR}/{example.head.name}"
    args = review_args(example, file, audit=False)
    data = json.loads(cli(copy, *args, "--format", "json").stdout)
    names = flagged(data)
    assert len(names) == 2  # the example: one gate too tight, one looser than the rule
    shown = cli(copy, *args, "--format", "table", columns=columns)
    assert shown.exit_code == 0, shown.output
    assert max(len(line) for line in shown.stdout.splitlines()) <= columns
    command = shown_command(shown.stdout)
    meant = ["threshold-bot", "rebaseline", "--file", file, "--history", "history.jsonl", *names]
    assert pasted(command) == meant
    assert sh_words(command) == meant
    assert len(command.splitlines()) > 1  # at this width it needs continuation lines
    assert all(line.endswith(" \\") or line.endswith("\\") for line in command.splitlines()[:-1])


def test_the_markdown_and_the_drift_issue_show_one_command_per_line(
    example: ExamplePaths, copy: Path
) -> None:
    args = review_args(example, head(example), audit=False)
    data = json.loads(cli(copy, *args, "--format", "json").stdout)
    comment = cli(copy, *args, "--format", "markdown").stdout
    [command] = fenced_commands(comment)
    meant = ["threshold-bot", "rebaseline", "--file", head(example), "--history", "history.jsonl"]
    assert pasted(command) == sh_words(command) == [*meant, *flagged(data)]
    assert "threshold-bot rebaseline" not in comment.replace(command, "")  # shown once, whole
    # the drift issue of the base file (its gates keep failing since the last change)
    base = example.base.relative_to(example.root).as_posix()
    drift = ["drift", "--history", "history.jsonl", "--file", base]
    report = json.loads(cli(copy, *drift, "--format", "json").stdout)
    drifting = [
        g["name"]
        for g in report["files"][0]["gates"]
        if g["status"] == "drifting" and g["new_value"] != g["value"]
    ]
    assert drifting
    body = cli(copy, *drift).stdout
    [command] = fenced_commands(body)
    window = ["--window", report["files"][0]["settings"]["window"]]
    meant = ["threshold-bot", "rebaseline", "--file", base, "--history", "history.jsonl"]
    assert pasted(command) == sh_words(command) == [*meant, *window, *drifting]


# ------------------------------------------------------- 4: the command rewrites what it says


def _literals(path: Path) -> dict[str, str]:
    tf = find_gates(path.name, path.read_text(encoding="utf-8"), RepoConfig())
    assert tf is not None
    return {g.name: g.literal for g in tf.gates}


def _code_names(words: str) -> list[str]:
    return [name.replace("\\", "") for name in re.findall(r"<code>(.*?)</code>", words)]


@pytest.mark.parametrize("audit", [False, True], ids=["pr", "audit"])
def test_the_printed_command_rewrites_exactly_the_flagged_gates(
    example: ExamplePaths, copy: Path, audit: bool
) -> None:
    args = review_args(example, head(example), audit=audit)
    data = json.loads(cli(copy, *args, "--format", "json").stdout)
    names = flagged(data)
    assert names
    comment = cli(copy, *args, "--format", "markdown").stdout
    [command] = fenced_commands(comment)
    argv = pasted(command)
    assert argv[-len(names) :] == names  # the gates, always named
    # the words say which gates it rewrites, and which a run without names would add
    [words] = [line for line in comment.splitlines() if "in place, and no other gate's" in line]
    these, _, others = words.partition("without gate names it would also rewrite")
    assert _code_names(these.partition(" in place")[0]) == names
    file = copy / head(example)
    before = _literals(file)
    unnamed = cli(copy, *argv[1 : -len(names)], "--dry-run")
    assert unnamed.exit_code == 0, unnamed.output
    rewritten = {line.split(":")[0] for line in unnamed.stderr.splitlines() if " → " in line}
    assert rewritten == {*names, *_code_names(others)} and set(_code_names(others)) - set(names)
    assert _literals(file) == before  # a dry run writes nothing
    # run as printed: exactly the flagged gates change, to the rule's values
    ran = cli(copy, *argv[1:])
    assert ran.exit_code == 0, ran.output
    after = _literals(file)
    assert {n for n in before if after[n] != before[n]} == set(names)
    for g in data["gates"]:
        if g["name"] in names:
            assert float(after[g["name"]]) == g["recomputed"]


def test_rebaseline_help_says_what_a_run_without_names_rewrites(example: ExamplePaths) -> None:
    shown = cli(example.root, "rebaseline", "--help", columns=200)
    assert "Without names: every gate whose value the rule would change, passing ones too" in (
        " ".join(shown.stdout.split())
    )


# --------------------------------------------------------------------------- 2: an audit


class _Visible(HTMLParser):
    """The text a page shows: outside ``<script>`` and ``<style>``."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._hidden += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._hidden -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def test_an_audit_proposes_nothing_on_any_surface(
    example: ExamplePaths, copy: Path, tmp_path: Path
) -> None:
    base = example.base.relative_to(example.root).as_posix()
    args = ["review", "--history", "history.jsonl", "--file", base]
    data = json.loads(cli(copy, *args, "--format", "json").stdout)
    assert data["audit"] is True and all(g["old"] == g["proposed"] for g in data["gates"])
    pr = json.loads(
        cli(copy, *review_args(example, head(example), audit=False), "--format", "json").stdout
    )
    assert pr["audit"] is False
    names = [g["name"] for g in data["gates"] if g["verdict"] in FLAGS]
    assert len(names) >= 2  # the base's gates that fail since the last regime change
    comment = cli(copy, *args, "--format", "markdown").stdout
    table = cli(copy, *args, "--format", "table").stdout
    out = tmp_path / "audit.html"
    assert cli(copy, *args, "--format", "html", "--output", out).exit_code == 0
    page = " ".join(_Visible(out.read_text(encoding="utf-8")).parts)
    with chdir(copy):
        check = render_check(review_files(Path("history.jsonl"), Path(base)))
    for shown in (comment, table, page, check.title, check.summary, check.text):
        assert "propos" not in shown.lower()
    # the headline names each gate with its words, gates apart by semicolons
    listed = re.search(r"need attention \((.*)\)\.$", comment.splitlines()[1])
    assert listed is not None
    items = [re.fullmatch(r"<code>(.+)</code> (.+)", item) for item in listed[1].split("; ")]
    assert [(m[1].replace("\\", ""), m[2]) for m in items if m] == [(n, "failing") for n in names]
    assert f"need attention ({'; '.join(f'{n} failing' for n in names)})." in " ".join(
        table.split()
    )
    # the table speaks of the current value and how it fares
    assert (
        "| Value | Rule says | Window min – max | Fails (recent runs) | Fails (window) |" in comment
    )
    assert "Or keep the current values" in comment


# --------------------------------------------------------------------------- 3: one commit


SHA = "9e8adf5" + "0" * 33
T0 = datetime(2026, 5, 1, tzinfo=UTC)


def test_a_regime_change_within_one_commit_is_no_code_change() -> None:
    """``acc`` steps down at run 30 while runs 26–33 all built commit ``SHA``."""
    rng = np.random.default_rng(26)
    runs = [
        Run(
            id=f"r{i}",
            created_at=T0 + timedelta(days=i),
            commit=SHA if 26 <= i < 34 else f"{i:040x}",
            summary={"acc": (0.80 if i < 30 else 0.70) + float(rng.normal(0, 0.003))},
        )
        for i in range(50)
    ]
    gate = limit_gate("acc", ">=", "0.75", name="ACC_MIN")
    review = build_review([GateChange(head=gate, base=gate)], history_of(runs))
    [change] = review.changes
    assert change.before_commit == change.after_commit == SHA  # the data: one commit
    console = Console(width=100, record=True, color_system=None)
    console.print(review_table(review))
    report = drift_report(gate.file, review, DriftSettings())
    assert [d.gate.name for d in report.drifting] == ["ACC_MIN"]
    shown = {
        "comment": render_comment(review, repo_url=URL),
        "cli comment": render_comment(review),
        "check run": render_check(review, repo_url=URL).text,
        "table": console.export_text(),
        "drift issue": item_body(report, mode="issue", repo_url=URL),
        "drift (CLI)": item_body(report, mode="issue", repo_url=None, cli_options="--history x"),
        "html": " ".join(_Visible(html_report(review, title="t", repo_url=URL)).parts),
    }
    for where, text in shown.items():
        flat = " ".join(text.split())
        assert "no code change between these runs" in flat, where
        assert "/compare/" not in text and "9e8adf5…9e8adf5" not in flat, where
        assert "9e8adf5..9e8adf5" not in flat and "between commits" not in flat, where
