"""``threshold-bot review``: the review of a threshold file, read from disk, printed.

An imperative shell around the pure analysis: read the config, the threshold file(s) and
the run history (a file, or W&B), build the review, print it as the PR comment
(``--format markdown``), JSON (docs/json-review.md), a terminal table or a self-contained HTML
report with interactive charts (``--format html``, to ``--output``).  See docs/cli.md.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer
from pydantic import ValidationError

from bot.adapters.github import DEFAULT_API_URL
from bot.adapters.history.files import read_history
from bot.cli.errors import UsageProblem, fail
from bot.cli.histories import LocalHistories, at_most_one, own_sources
from bot.cli.options import (
    AllowanceOption,
    ConfigOption,
    HistoryOption,
    WandbOption,
    WindowOption,
)
from bot.cli.output import write_output, write_table
from bot.core.analysis.review import build_review, unavailable_review
from bot.core.config import CONFIG_PATH, ConfigError, RepoConfig, parse_config, plain_message
from bot.core.history.series import with_series
from bot.core.history.sources import HistoryError
from bot.core.models import GateChange, History, Review, RuleSettings, ThresholdFile
from bot.core.render.review import rebaseline_options, render_comment, render_json
from bot.core.thresholds.diff import diff_gates
from bot.core.thresholds.discover import find_gates
from bot.core.thresholds.errors import ThresholdFileError
from bot.features.action import FoundGates, review_gates
from bot.features.related_files import disk_related, with_notes


class OutputFormat(StrEnum):
    """What ``review`` prints."""

    markdown = "markdown"
    json = "json"
    table = "table"
    html = "html"


class FailOn(StrEnum):
    """The least severe conclusion that ``--fail-on`` turns into exit status 1:
    ``neutral`` fails on ``neutral`` and on ``action_required``."""

    action_required = "action_required"
    neutral = "neutral"


SEVERITY = {"success": 0, "neutral": 1, "action_required": 2}


# --------------------------------------------------------------------------- the shell


def read_text(path: Path, what: str, *, raw: bool = False) -> str:
    """A text file given on the command line (``raw``: line endings kept as written);
    ``UsageProblem`` naming ``what`` when it cannot be read."""
    try:
        with path.open(encoding="utf-8", newline="" if raw else None) as handle:
            return handle.read()
    except FileNotFoundError:
        raise UsageProblem(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise UsageProblem(f"{what} {path}: is a directory") from None
    except UnicodeDecodeError:
        raise UsageProblem(f"{what} {path}: not UTF-8 text") from None
    except OSError as exc:
        raise UsageProblem(f"{what} {path}: cannot be read ({exc.strerror})") from None


def read_config(path: Path | None) -> RepoConfig:
    """The repository config at ``path`` (defaults without one)."""
    if path is None:
        return RepoConfig()
    try:
        return parse_config(read_text(path, "config"), str(path))
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from None


def rule_settings(config: RepoConfig, window: str | None, allowance: str | None) -> RuleSettings:
    """The config's rule with the command-line overrides applied and validated
    (``--allowance``: for every gate)."""
    overrides: dict[str, object] = {}
    if window is not None:
        overrides["window"] = window
    if allowance is not None:
        overrides["allowance"] = allowance
    try:
        # what the config wrote, with the command line's: validated together (the cap)
        rule = RuleSettings.model_validate(config.rule.model_dump(exclude_unset=True) | overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "rule"
        message, given = plain_message(err), overrides.get(where)
        if isinstance(given, str) and given not in message:  # say what was given
            where += f" {given[:40]!r}"
        raise UsageProblem(f"--{where}: {message}") from None
    # the command line's allowance is every gate's, also those an override gives another
    return rule if allowance is None else rule.with_allowance(rule.allowance)


def _threshold_file(path: Path, label: str, config: RepoConfig) -> ThresholdFile | None:
    """The gates of the file at ``path`` as ``label`` (its path from the current directory),
    read with its related files from the repository on disk (docs/cli.md)."""
    text = read_text(path, "threshold file")
    related = disk_related(label, text)
    try:
        return with_notes(find_gates(label, text, config, related=related.files), related)
    except ThresholdFileError as exc:
        raise UsageProblem(str(exc)) from None


def read_gate_changes(
    file: Path, base: Path | None, config: RepoConfig, label: str | None = None
) -> tuple[list[GateChange], ThresholdFile]:
    """The gates of ``file`` against ``base`` (none: an audit, every gate unchanged), and
    ``file`` as read (its hints and source notes). A file with hints and no gate gives no
    change (its review: zero gates, the hints, ``neutral``); ``UsageProblem`` "no threshold
    gates found" only when nothing at all was seen."""
    name = label or file.as_posix()
    head = _threshold_file(file, name, config)
    if head is None or not (head.gates or head.unbound):
        raise UsageProblem(f"{name}: no threshold gates found")
    if base is None:
        return diff_gates(head, head), head
    return diff_gates(_threshold_file(base, name, config), head), head


def nothing_bound(head: ThresholdFile, what: str) -> str:
    """What ``backtest`` and ``rebaseline`` say of a file with hints and no gate: ``what``
    (nothing to do), then each hint with the config lines that would bind it, indented."""
    count = len(head.unbound)
    values = "value reaches" if count == 1 else "values reach"
    lines = [
        f"{head.path}: no gate bound, {what}; {count} {values} a comparison (bind"
        f" {'it' if count == 1 else 'them'} with the config lines below, in {CONFIG_PATH}):"
    ]
    for item in head.unbound:
        lines.append(f"  {item.file}:{item.line}: {item.name} = {item.literal}: {item.reason}")
        if item.config:
            lines += [f"    {line}" for line in item.config.splitlines()]
    return "\n".join(lines)


def review_files(
    history_path: Path | History,
    file: Path,
    base: Path | None = None,
    *,
    config: RepoConfig | None = None,
    rule: RuleSettings | None = None,
    skip_bad_lines: bool = False,
    label: str | None = None,
) -> Review:
    """Review the threshold ``file`` (as proposed; ``base`` before the change) against the
    history (a file path, or runs already read).  ``label`` is the file's repository path
    (default: ``file`` as given)."""
    config = config or RepoConfig()
    changes, head = read_gate_changes(file, base, config, label)
    if isinstance(history_path, History):
        history = history_path
    else:
        try:
            history = read_history(history_path, skip_bad_lines=skip_bad_lines)
        except HistoryError as exc:
            raise UsageProblem(str(exc)) from None
    return build_review(
        changes,
        history,
        rule=rule or config.rule,
        regime_settings=config.regimes,
        hints=head.unbound,
        warnings=_notes(head),
    )


def _notes(head: ThresholdFile) -> list[str]:
    """What could not be decided about the file's source, for the review's warnings."""
    return [f"{head.path}: {note}" for note in head.notes]


def review_history(
    history: Path | None,
    wandb: str | None,
    file: Path,
    base: Path | None,
    config: RepoConfig,
    rule: RuleSettings,
    skip_bad_lines: bool = False,
) -> Review:
    """The review of the command line.  Its runs: the file ``history``, the W&B project
    ``wandb``, or with neither the source each gate's file or the config names, read as the
    Action reads them (``file`` sources from the current directory, the checkout's root).
    A source that cannot be read now (an outage) leaves its gates without data: a neutral
    review; a missing credential or a source that does not exist is bad input. A file with
    hints and no gate reads no history: its review lists the hints, ``neutral``."""
    at_most_one(history, wandb)
    if history is not None:
        return review_files(
            history, file, base, config=config, rule=rule, skip_bad_lines=skip_bad_lines
        )
    changes, head = read_gate_changes(file, base, config)
    histories = LocalHistories(Path.cwd(), skip_bad_lines=skip_bad_lines)
    if wandb is None or not changes:  # no gate, only hints: no history to read
        own_sources([c.head for c in changes])
        found = FoundGates(files=(head,), changes=tuple(changes), notes=tuple(_notes(head)))
        return review_gates(found, histories, config=config, rule=rule)
    spec = histories.wandb_spec(wandb, config.source(None))
    try:
        runs = histories.fetch(with_series(spec, [c.head for c in changes]))
    except HistoryError as exc:
        review = unavailable_review(changes, str(exc), rule=rule, hints=head.unbound)
        return review.model_copy(update={"warnings": (*review.warnings, *_notes(head))})
    return build_review(
        changes,
        runs,
        rule=rule,
        regime_settings=config.regimes,
        hints=head.unbound,
        warnings=_notes(head),
    )


def _attribute(review: Review, repo: str, token: str | None, api_url: str) -> Review:
    """Link regime changes to the PRs of ``repo`` (``--repo``), reading GitHub with ``token``."""
    if not token:
        raise UsageProblem("--repo needs a GitHub token: set GITHUB_TOKEN or --github-token")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise UsageProblem(f"--repo {repo!r}: expected OWNER/NAME")
    from bot.adapters.github.app import token_client  # PyGithub: only with --repo
    from bot.features.review.attribution import attribute

    return attribute(token_client(token, base_url=api_url), repo, review)


def web_url(api_url: str, repo: str) -> str:
    """The web address of ``repo`` for an API base URL (github.com or Enterprise Server)."""
    parts = urlsplit(api_url)
    if parts.hostname == "api.github.com":
        return f"https://github.com/{repo}"
    root = parts.path.rstrip("/").removesuffix("/api/v3")
    return f"{parts.scheme}://{parts.netloc}{root}/{repo}"


# --------------------------------------------------------------------------- commands


def review_command(
    file: Annotated[Path, typer.Option(help="The threshold file as the PR proposes it.")],
    history: HistoryOption = None,
    wandb: WandbOption = None,
    base: Annotated[
        Path | None, typer.Option(help="The same file before the PR (omit: audit the file).")
    ] = None,
    config: ConfigOption = None,
    window: WindowOption = None,
    allowance: AllowanceOption = None,
    output_format: Annotated[
        OutputFormat | None,
        typer.Option(
            "--format",
            help="table (for reading), markdown (the PR comment), json, or html (a"
            " self-contained report with interactive charts; needs --output)."
            " Default: table on a terminal, else markdown.",
        ),
    ] = None,
    output: Annotated[Path | None, typer.Option(help="Write the review to this file.")] = None,
    fail_on: Annotated[
        FailOn | None,
        typer.Option(help="Exit 1 when the review's conclusion is this or worse."),
    ] = None,
    skip_bad_lines: Annotated[
        bool, typer.Option(help="Skip (and count) malformed history lines.")
    ] = False,
    repo: Annotated[
        str | None,
        typer.Option(help="OWNER/NAME: link regime changes to the PRs merged there (GitHub)."),
    ] = None,
    github_token: Annotated[
        str | None,
        typer.Option(envvar="GITHUB_TOKEN", help="Token for --repo.", show_default=False),
    ] = None,
    github_api_url: Annotated[
        str, typer.Option(envvar="GITHUB_API_URL", help="GitHub REST base URL (Enterprise).")
    ] = DEFAULT_API_URL,
) -> None:
    """Review a threshold file against a run history."""
    try:
        if output_format is OutputFormat.html and output is None:
            raise UsageProblem("--format html writes a whole page: give --output FILE.html")
        repo_config = read_config(config)
        rule = rule_settings(repo_config, window, allowance)
        result = review_history(history, wandb, file, base, repo_config, rule, skip_bad_lines)
        repo_url = None
        if repo is not None:
            result = _attribute(result, repo, github_token, github_api_url)
            repo_url = web_url(github_api_url, repo)
        fmt = output_format or (
            OutputFormat.table if output is None and sys.stdout.isatty() else OutputFormat.markdown
        )
        options = rebaseline_options(history, wandb, config, window, allowance)
        if fmt is OutputFormat.table:
            from bot.core.render.terminal import review_table  # Rich: only for the table

            write_table(review_table(result, cli_options=options), output)
        elif fmt is OutputFormat.html:
            from bot.core.render.html_report import html_report  # only for the report

            title = f"threshold-bot review of {file.as_posix()}"
            report = html_report(result, title=title, repo_url=repo_url, cli_options=options)
            write_output(report, output)
        else:
            text = (
                render_json(result)
                if fmt is OutputFormat.json
                else render_comment(
                    result,
                    repo_url=repo_url,
                    app_mode=False,
                    cli_options=options,
                    charts=repo_config.charts == "mermaid",
                )
            )
            write_output(text, output)
    except UsageProblem as exc:
        fail(str(exc), details=exc.details)
    if fail_on is not None and SEVERITY[result.conclusion] >= SEVERITY[fail_on.value]:
        raise typer.Exit(1)
