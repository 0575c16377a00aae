"""``threshold-bot action``: the entry point of the GitHub Action (action.yml, docs/cli.md).

Run by the composite action in the workflow's job, it reads what the runner provides:
``GITHUB_EVENT_PATH`` (the event payload), ``GITHUB_REPOSITORY``, ``GITHUB_API_URL``,
``GITHUB_SERVER_URL``, ``GITHUB_TOKEN``, ``GITHUB_STEP_SUMMARY``, ``GITHUB_WORKSPACE``, and
the action's inputs as ``INPUT_FILES``, ``INPUT_HISTORY``, ``INPUT_WANDB``, ``INPUT_CONFIG``,
``INPUT_FAIL_ON``, ``INPUT_WINDOW``, ``INPUT_COMMENT``, ``INPUT_COMMENT_AUTHOR`` (each also
an option).  Histories are read through ``bot.cli.histories`` (W&B credentials from
``WANDB_API_KEY``, ``WANDB_BASE_URL``, ``WANDB_ENTITY``; a missing one is an error).

On a ``pull_request`` event: the threshold files matching ``--files`` in the workspace (the
PR's checkout) are diffed against their versions at the PR's base SHA, read through the
API (a file the PR adds has none: every gate is new); the review goes to the job summary
and, with ``--comment true``, into the one marked PR comment, edited in place on each run.
Everything else the review reads from the repository is read at the base SHA through the
API too, never from the PR's checkout (the App's rule, docs/security.md): the config and
every history file (those the config names, and the ``history`` input).  A config or a
history file the PR changes in its checkout is named in the review, which then requires
action (``bot.features.action``).
Any other event (push, schedule): an audit of the files, to the summary only.
Exit status: 1 when the conclusion reaches ``--fail-on``; 2 on an error, said in one line
in the log, as an ``::error::`` annotation and in the summary.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import typer

from bot.adapters.github import DEFAULT_API_URL
from bot.adapters.github.api import GitHubAPI
from bot.adapters.github.errors import GitHubError
from bot.adapters.github.workflow import workflow_client
from bot.cli.action_base import (
    THRESHOLD_BYTES,
    PullRef,
    base_config,
    changed_files,
    changed_histories,
)
from bot.cli.errors import PROG, UsageProblem, fail
from bot.cli.histories import LocalHistories, inside
from bot.cli.review import rule_settings, web_url
from bot.core.api_paths import is_full_name, repo_path_problem
from bot.core.config import CONFIG_PATH, ConfigError, RepoConfig, parse_config
from bot.core.formatting import plural
from bot.core.history.sources import HistoryError
from bot.core.models import SourceSpec
from bot.core.render.review import MARKER, rebaseline_options, render_comment
from bot.features.action import (
    FileVersions,
    fails,
    find_changes,
    history_files,
    review_gates,
)
from bot.features.related_files import GitHubReads, Related, disk_related, github_related
from bot.features.repo_files import repo_file_reader

FAIL_ON = ("action_required", "neutral", "none")
MAX_FILES = 200  # threshold files in one run: a glob matching the whole tree is a mistake


# --------------------------------------------------------------------------- the runner


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def _pull(event_path: str) -> PullRef | None:
    """The PR of the event payload at ``event_path``; None for an event without one."""
    if not event_path:
        return None
    try:
        payload: Any = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageProblem(f"GITHUB_EVENT_PATH: cannot be read ({exc.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UsageProblem("GITHUB_EVENT_PATH: the event payload is not JSON") from None
    pull = payload.get("pull_request") if isinstance(payload, dict) else None
    if not isinstance(pull, dict):
        return None
    number = pull.get("number")
    base = pull.get("base")
    sha = base.get("sha") if isinstance(base, dict) else None
    if not isinstance(number, int) or not isinstance(sha, str):
        raise UsageProblem("GITHUB_EVENT_PATH: the pull_request has no number or base SHA")
    return PullRef(number=number, base_sha=sha)


def _expand_files(workspace: Path, patterns: str) -> list[str]:
    """The repository paths of the files matching the globs ``patterns`` (separated by spaces
    or newlines), sorted; a pattern matching nothing is an error (a typo, a moved file)."""
    found: set[str] = set()
    globs = patterns.split()
    if not globs:
        raise UsageProblem("files: give the threshold files (globs, e.g. ci/*.sh)")
    for pattern in globs:
        inside(workspace, pattern, "files:")
        matched = {
            p.relative_to(workspace).as_posix()
            for p in workspace.glob(pattern)
            if p.is_file() and p.resolve().is_relative_to(workspace)
        }
        matched = {p for p in matched if not p.startswith(".git/")}
        if not matched:
            raise UsageProblem(f"files: no file in the repository matches {pattern}")
        found |= matched
    if len(found) > MAX_FILES:
        raise UsageProblem(f"files: {plural(len(found), 'file')} match; at most {MAX_FILES}")
    return sorted(found)


def _config(workspace: Path, path: str | None) -> RepoConfig:
    """The repository config at ``path`` in the workspace (defaults without one)."""
    if not path:
        return RepoConfig()
    text = _read(inside(workspace, path, "config"), f"config {path}", THRESHOLD_BYTES)
    try:
        return parse_config(text, path)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from None


def _read(path: Path, what: str, limit: int) -> str:
    """The text of ``path``; ``UsageProblem`` when missing, unreadable or over ``limit`` bytes."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise UsageProblem(f"{what}: {size} bytes, over the limit of {limit}")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageProblem(f"{what}: no such file") from None
    except UnicodeDecodeError:
        raise UsageProblem(f"{what}: not UTF-8 text") from None
    except OSError as exc:
        raise UsageProblem(f"{what}: cannot be read ({exc.strerror})") from None


def _override(
    histories: LocalHistories,
    workspace: Path,
    history: str | None,
    wandb: str | None,
    base: Callable[[str], str] | None = None,
) -> SourceSpec | None:
    """The history every gate reads (``history`` or ``wandb``), checked; None: their own.
    ``base``: the reader of the PR's base, where the history file must be (a PR's review)."""
    if history and wandb:
        raise UsageProblem("give one of history and wandb, not both")
    if history and base is not None:
        problem = repo_path_problem(history)
        if problem is not None:
            raise UsageProblem(f"history {history!r}: {problem}; give a path in the repository")
        try:
            base(history)
        except FileNotFoundError:
            raise UsageProblem(f"history {history}: no such file at the PR's base") from None
        except HistoryError:
            pass  # it exists but cannot be read now: the review says why
        return SourceSpec(kind="file", path=history)
    if history:
        if not inside(workspace, history, "history").is_file():
            raise UsageProblem(f"history {history}: no such file in the repository")
        return SourceSpec(kind="file", path=history)
    if wandb:
        spec = histories.wandb_spec(wandb, None)
        histories.require(spec)  # needed by the input, before anything is read
        return spec
    return None


def _flag(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off", ""):
        return False
    raise UsageProblem(f"{name}: expected true or false, got {value!r}")


def _append_summary(text: str) -> bool:
    """Append ``text`` to the job summary (``GITHUB_STEP_SUMMARY``); False without one."""
    path = _env("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    try:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise UsageProblem(f"GITHUB_STEP_SUMMARY: cannot be written ({exc.strerror})") from None
    return True


def _append_output(name: str, value: str) -> None:
    """Set the step output ``name`` (``GITHUB_OUTPUT``; nothing without one)."""
    path = _env("GITHUB_OUTPUT")
    if path:
        try:
            with open(path, "a", encoding="utf-8") as outputs:
                outputs.write(f"{name}={value}\n")
        except OSError as exc:
            raise UsageProblem(f"GITHUB_OUTPUT: cannot be written ({exc.strerror})") from None


def workflow_command(command: str, message: str) -> str:
    """``::command::message``: a workflow command the runner turns into an annotation, its
    data escaped as the runner unescapes it (``%``, CR and LF), so no text of ``message``
    can end the command or start another."""
    data = message
    for char, code in (("%", "%25"), ("\r", "%0D"), ("\n", "%0A")):
        data = data.replace(char, code)
    return f"::{command}::{data}"


def _quoted(text: str) -> str:
    """``text`` as a Markdown code block: outside text (file names, messages) stays text."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", text)), default=0))
    return f"\n{fence}text\n{text}\n{fence}\n"


# --------------------------------------------------------------------------- the command


def _run(
    files: str,
    history: str | None,
    wandb: str | None,
    config: str | None,
    fail_on: str,
    window: str | None,
    comment: str,
    comment_author: str | None,
) -> bool:
    """Review, report, comment; whether the job fails (``fail_on``)."""
    if fail_on not in FAIL_ON:
        raise UsageProblem(f"fail-on: expected one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    post = _flag(comment, "comment")
    workspace = Path(_env("GITHUB_WORKSPACE") or os.getcwd()).resolve()
    repo = _env("GITHUB_REPOSITORY")
    if not is_full_name(repo):
        raise UsageProblem("GITHUB_REPOSITORY: expected OWNER/NAME (run in a GitHub workflow)")
    pull = _pull(_env("GITHUB_EVENT_PATH"))
    api_url = _env("GITHUB_API_URL") or DEFAULT_API_URL
    server = _env("GITHUB_SERVER_URL")
    repo_url = f"{server.rstrip('/')}/{repo}" if server else web_url(api_url, repo)
    gh = None if pull is None else _client(api_url, comment_author)
    changed: list[str] = []
    warnings: tuple[str, ...] = ()
    base: Callable[[str], str] | None = None
    if gh is None or pull is None:  # an audit: the checkout is what is audited
        if config is None and (workspace / CONFIG_PATH).is_file():
            config = CONFIG_PATH
        repo_config = _config(workspace, config)
    else:  # a PR: the config at its base; the PR's change of it is shown
        config, repo_config, warnings, moved = base_config(gh, repo, pull, workspace, config)
        changed += moved
        base = functools.cache(repo_file_reader(gh, repo, pull.base_sha))
    rule = rule_settings(repo_config, window, None)
    paths = _expand_files(workspace, files)
    heads = {p: _read(workspace / p, p, THRESHOLD_BYTES) for p in paths}
    # a .env file in the workspace is the PR's; a source that does not exist: in the review
    histories = LocalHistories(workspace, env_file=False, strict=False, files=base)
    override = _override(histories, workspace, history, wandb, base)
    if gh is None or pull is None:
        versions = [FileVersions(p, heads[p], audit=True) for p in paths]
    else:
        versions = changed_files(gh, repo, pull, heads)
        if not versions and not changed:
            _unchanged(gh if post else None, repo, pull, len(paths))
            return False
    reads = GitHubReads(gh, repo, THRESHOLD_BYTES) if gh is not None else None
    versions = [_with_related(v, workspace, reads, pull) for v in versions]
    found = find_changes(versions, repo_config, pin=override is None)
    if base is not None:
        changed += changed_histories(workspace, base, history_files(found, override))
    review = review_gates(
        found,
        histories,
        config=repo_config,
        rule=rule,
        override=override,
        changed=changed,
        warnings=warnings,
    )
    # the rebaseline command it prints repeats this run's history and rule options
    options = rebaseline_options(
        PurePosixPath(history) if history else None,
        wandb,
        PurePosixPath(config) if config else None,
        window,
        None,
    )
    text = render_comment(
        review,
        repo_url=repo_url,
        app_mode=False,
        cli_options=options,
        charts=repo_config.charts == "mermaid",
    )
    if not _append_summary(text):
        sys.stdout.write(text)
    _append_output("conclusion", review.conclusion)
    what = "audit" if pull is None else f"PR #{pull.number}"
    gates = plural(len(review.gates), "gate")
    if review.hints and not review.gates:  # what the neutral conclusion is about
        gates += f", {plural(len(review.hints), 'hint')}"
    print(f"{PROG}: {what}: {review.conclusion}: {gates} in {plural(len(versions), 'file')}")
    if gh is not None and pull is not None and post:
        _comment(gh, repo, pull.number, text)
    return fails(review.conclusion, fail_on)


def _with_related(
    version: FileVersions, workspace: Path, reads: GitHubReads | None, pull: PullRef | None
) -> FileVersions:
    """``version`` with its related files: the workspace's for the head, the base's through
    GitHub at the ref its base text was read at (``bot.features.related_files``)."""
    head = disk_related(version.path, version.head, workspace)
    base = Related()
    if reads is not None and pull is not None and version.base is not None:
        base = github_related(reads, pull.base_sha, version.path, version.base)
    notes = head.notes()
    return replace(version, related=head.files, base_related=base.files, related_notes=notes)


def _client(api_url: str, author: str | None) -> GitHubAPI:
    token = _env("GITHUB_TOKEN")
    if not token:
        raise UsageProblem("github-token: empty (the default is the workflow's token)")
    try:
        return workflow_client(token, base_url=api_url, author=author)
    except GitHubError as exc:
        raise UsageProblem(f"GitHub refused the token: {exc}") from None


def _unchanged(gh: GitHubAPI | None, repo: str, pull: PullRef, matched: int) -> None:
    """Nothing to review: say so; a comment left by an earlier run says so too."""
    files = plural(matched, "file")
    note = f"{PROG}: PR #{pull.number} changes no threshold file ({files} matched)"
    _append_summary(note)
    _append_output("conclusion", "success")
    print(note)
    if gh is not None:
        try:
            found = gh.find_comment(repo, pull.number, MARKER)
        except GitHubError:
            found = None
        if found is not None:
            _comment(gh, repo, pull.number, f"{MARKER}\n{note}.\n")


def _comment(gh: GitHubAPI, repo: str, number: int, text: str) -> None:
    """Post or edit the one marked comment; a refusal (a fork's read-only token) is a warning:
    the summary still holds the review."""
    try:
        posted = gh.upsert_comment(repo, number, text, MARKER)
        print(f"{PROG}: comment {posted.url}")
    except GitHubError as exc:
        note = " ".join(f"could not post the PR comment: {exc}".split())
        print(workflow_command("warning", note))
        _append_summary(_quoted(f"{PROG}: {note}"))


def action_command(
    files: Annotated[
        str, typer.Option(envvar="INPUT_FILES", help="Threshold files: globs, space-separated.")
    ] = "",
    history: Annotated[
        str | None,
        typer.Option(envvar="INPUT_HISTORY", help="A history file in the repository."),
    ] = None,
    wandb: Annotated[
        str | None,
        typer.Option(envvar="INPUT_WANDB", help="Read the history from W&B: ENTITY/PROJECT."),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option(envvar="INPUT_CONFIG", help=f"Repository config (default {CONFIG_PATH})."),
    ] = None,
    fail_on: Annotated[
        str,
        typer.Option(envvar="INPUT_FAIL_ON", help="action_required, neutral or none."),
    ] = "action_required",
    window: Annotated[
        str | None,
        typer.Option(envvar="INPUT_WINDOW", help="Runs the rule looks at: N, 'regime', since:D."),
    ] = None,
    comment: Annotated[
        str, typer.Option(envvar="INPUT_COMMENT", help="true: post/update the PR comment.")
    ] = "true",
    comment_author: Annotated[
        str | None,
        typer.Option(
            envvar="INPUT_COMMENT_AUTHOR",
            help="Login writing the comment (default: the token's user).",
        ),
    ] = None,
) -> None:
    """Review a PR in a GitHub Actions job (what action.yml runs)."""
    try:
        failed = _run(files, history, wandb, config, fail_on, window, comment, comment_author)
    except UsageProblem as exc:
        message = " ".join(str(exc).split())
        with contextlib.suppress(UsageProblem):  # the log line below still says it
            _append_summary(_quoted(f"{PROG}: error: {message}"))
        print(workflow_command("error", f"{PROG}: {message}"), flush=True)
        fail(message, details=exc.details)
    if failed:
        raise typer.Exit(1)
