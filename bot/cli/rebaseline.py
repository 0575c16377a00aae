"""``threshold-bot rebaseline``: write the rule's values into a threshold file, in place.

The command line's ``/rebaseline``: the file is reviewed as ``review`` audits it (every
gate unchanged) against the runs (a history file, a W&B project, or the one source the file
or the config names, as ``backtest`` reads them), then planned exactly as the App plans
it (``bot.features.rebaseline.plan.plan_file``: references, ``--tolerance``, coupled
literals and golden curves included) and written back with the provenance comment.  The
gates named, or without names every gate whose value the rule would change, passing ones
too: the command a review prints always names the gates it flags.

Output: the unified diff on stdout with ``--dry-run`` (nothing is written); one line per
edit (``NAME: 0.56 → 0.50``) and the notes (gates without data, tolerances left) on
stderr; a file with hints and no gate has nothing to change (its hints on stderr, with the
config lines that bind them).  Exit status 0 when done or nothing to change, 1 when the
history cannot be read, 2 for bad input (see docs/cli.md).
"""

from __future__ import annotations

import difflib
import getpass
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from bot.cli.errors import UsageProblem, fail
from bot.cli.histories import read_runs
from bot.cli.options import (
    AllowanceOption,
    ConfigOption,
    HistoryOption,
    WandbOption,
    WindowOption,
)
from bot.cli.review import nothing_bound, read_config, read_text, rule_settings
from bot.core.analysis.curves import recompute_points
from bot.core.analysis.review import build_review
from bot.core.commands import Command
from bot.core.config import RepoConfig
from bot.core.history.sources import HistoryError
from bot.core.models import History, Review, ThresholdFile
from bot.core.render.review import cli_wording
from bot.core.thresholds.diff import diff_gates
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.errors import ThresholdFileError
from bot.features.rebaseline.literals import PointValues
from bot.features.rebaseline.plan import FilePlan, GateKey, gate_key, plan_file
from bot.features.related_files import disk_related, with_notes

VIA = "threshold-bot rebaseline"  # what the provenance comment says wrote the values


def _gates(path: Path, text: str, config: RepoConfig) -> ThresholdFile:
    related = disk_related(path.as_posix(), text)
    try:
        tf = with_notes(find_gates(path.as_posix(), text, config, related=related.files), related)
    except ThresholdFileError as exc:
        raise UsageProblem(str(exc)) from None
    if tf is None or not (tf.gates or tf.unbound):
        raise UsageProblem(f"{path.as_posix()}: no threshold gates found")
    return tf


def _points(tf: ThresholdFile, review: Review, history: History) -> dict[GateKey, PointValues]:
    """The rule's value at each step of the file's golden curves that have data."""
    reviews = {gate_key(g): g for g in review.gates}
    rule = review.rule
    points: dict[GateKey, PointValues] = {}
    for gate in tf.gates:
        judged = reviews.get(gate_key(gate))
        if not gate.points or gate.ignored or judged is None or judged.recomputed is None:
            continue
        start = judged.window.first if rule.window.kind == "regime" else None
        points[gate_key(gate)] = recompute_points(gate, history.finished, rule, regime_start=start)
    return points


def _user() -> str | None:
    """Who rebaselined, for the provenance comment: the OS user (``$USER``)."""
    try:
        return getpass.getuser() or None
    except (OSError, KeyError):
        return None


def _notes(plan: FilePlan) -> list[str]:
    notes = [
        f"{name}: no finished run in the window has its metric: left as is" for name in plan.no_data
    ]
    notes += [f"{name}: a placeholder, never rewritten" for name in plan.ignored]
    for note in plan.tolerances:
        why = {
            "not_asked": "--tolerance also widens it",
            "config": "the config sets it: change it there",
            "unwritable": "it is written in a form that cannot be rewritten: change it by hand",
        }[note.reason]
        notes.append(
            f"{note.gate}: tolerance too tight for the window (needs {note.needed}); {why}"
        )
    return notes


def _write(path: Path, text: str) -> None:
    try:
        with path.open("w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except OSError as exc:
        raise UsageProblem(f"{path}: cannot be written ({exc.strerror})") from None


def rebaseline_command(
    file: Annotated[Path, typer.Option(help="The threshold file to rewrite in place.")],
    names: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="NAME",
            help="Only these gates. Without names: every gate whose value the rule would"
            " change, passing ones too (the review prints the command with the gates it flags).",
        ),
    ] = None,
    history: HistoryOption = None,
    wandb: WandbOption = None,
    config: ConfigOption = None,
    window: WindowOption = None,
    allowance: AllowanceOption = None,
    tolerance: Annotated[
        bool,
        typer.Option("--tolerance", help="Also widen a reference's tolerance the runs do not fit."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the change as a unified diff; write nothing.")
    ] = False,
) -> None:
    """Write the rule's values into a threshold file, with a provenance comment."""
    try:
        repo_config = read_config(config)
        rule = rule_settings(repo_config, window, allowance)
        text = read_text(file, "threshold file", raw=True)
        tf = _gates(file, text, repo_config)
        if not tf.gates:
            print(nothing_bound(tf, "nothing to rewrite"), file=sys.stderr)
            return
        wanted = tuple(dict.fromkeys(names or ()))
        known = list(dict.fromkeys(g.name for g in tf.gates))
        unknown = [n for n in wanted if n not in known]
        if unknown:
            raise UsageProblem(
                f"{file.as_posix()} has no gate {', '.join(unknown)}; its gates: {', '.join(known)}"
            )
        changes = diff_gates(tf, tf)
        runs = read_runs(history, wandb, tf.gates, repo_config, tf.path)
        review = build_review(
            changes, runs, rule=rule, regime_settings=repo_config.regimes, hints=tf.unbound
        )
        command = Command(
            kind="rebaseline", line=1, gates=wanted, dry_run=dry_run, tolerance=tolerance
        )
        today = datetime.now(UTC).date()
        plan = plan_file(
            tf,
            text,
            review,
            command,
            today=today,
            by=_user(),
            points=_points(tf, review, runs),
            via=VIA,
        )
        _report(file, text, plan, dry_run)
    except UsageProblem as exc:
        fail(str(exc), details=exc.details)
    except HistoryError as exc:
        message = cli_wording(str(exc))
        fail(f"the run history could not be read: {message}; nothing was written", status=1)


def _report(file: Path, text: str, plan: FilePlan, dry_run: bool) -> None:
    """Print the edits and notes (stderr) and the diff (stdout, ``--dry-run``); write."""
    for edit in plan.edits:
        print(edit.summary, file=sys.stderr)
    for note in _notes(plan):
        print(note, file=sys.stderr)
    if not plan.edits:
        print("nothing to change", file=sys.stderr)
        return
    if dry_run:
        name = file.as_posix()
        diff = difflib.unified_diff(
            text.splitlines(keepends=True),
            plan.text.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
        end = "\n\\ No newline at end of file\n"
        sys.stdout.writelines(line if line.endswith("\n") else line + end for line in diff)
        sys.stdout.flush()
        return
    _write(file, plan.text)
