"""Review one pull request: the imperative shell around the pure analysis.

PR files → candidate threshold files → their text at the merge base and the head →
gates → gate changes → history per source → ``build_review`` per source → merge →
attribute regime changes to PRs → render → one marked comment + one check run.

Decisions:
- What a gate reads is decided by the *base*: the repository config is read there, and a
  gate reads the history source the base decides (``bot.core.thresholds.pinning``).  A
  source the PR names instead is shown, makes the check ``action_required`` and is read
  only once a maintainer's approval covers it.  The operator's allow-lists
  (``bot.core.access``) apply on top: a refused source is never requested.  An invalid
  config falls back to the defaults and says so in the review.  A PR that also changes the
  config, or a history file a changed gate reads, is reviewed against the base's and
  marked as changing it (``action_required``, approvable): it takes effect once merged.
- Every file is read with a size bound (``MAX_THRESHOLD_FILE_BYTES`` for threshold files
  and the config, ``MAX_FILE_BYTES`` for history files); one over it is named in the review.
  A threshold file's related files (the helpers and constants modules a Python file imports,
  the tests importing a constants module: ``bot.features.related_files``) are read at the
  same ref, within the same size bound and the job's deadline; one that cannot be read is
  skipped and counted in the review's notes.
- A changed gate that could not be checked against a single run (no run has its metric,
  its history could not be read or may not be read) is ``action_required``, approvable.
- Drafts are reviewed like any PR: early numbers are when feedback helps most,
  and the single comment is edited in place.  Closed PRs are skipped.
- A threshold file the PR leaves unparseable makes the check ``action_required``
  and names the file and line: the PR's own change broke it, a human must look.
  A file unparseable at the base only is treated as new (every gate added).
- A PR without threshold files gets nothing: no comment, no check run.  A Python test file
  that the config does not name is read for its name only: it counts as a threshold file
  when the PR changes, adds or removes one of its gates (not when it merely has asserts).
- A changed file the config names (``files:``, ``shell:``, ``python:``; a script or data
  file read for what it is) in which no gate is bound but literals reach a comparison gets a
  ``neutral`` review listing those hints with the config lines that would bind them: "no
  gates found" is never the whole answer for it.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass, field, replace
from typing import Literal

from bot.adapters.github.api import (
    ChangedFile,
    CheckAction,
    CheckRunRef,
    CommentRef,
    GitHubAPI,
    PullInfo,
)
from bot.adapters.github.errors import GitHubFileTooLarge, GitHubPermanentError
from bot.adapters.history.actions_source import ActionsAPI, ActionsSource
from bot.adapters.history.files import FileSource
from bot.adapters.settings import DEFAULT_THRESHOLD_FILE_BYTES
from bot.core import deadline
from bot.core.analysis.review import build_review, merge_reviews, unavailable_review
from bot.core.config import CONFIG_PATH, RepoConfig
from bot.core.history.series import with_series
from bot.core.history.sources import (
    HistoryError,
    HistorySource,
    HistoryUnavailable,
    Rebindable,
    SourceRefused,
)
from bot.core.history.workflow_runs import bound_to
from bot.core.models import (
    Conclusion,
    GateChange,
    History,
    Review,
    SourceSpec,
    ThresholdFile,
    UnboundVariable,
)
from bot.core.render.review import MARKER, render_check, render_comment
from bot.core.thresholds.diff import diff_gates, removed_gates
from bot.core.thresholds.discover import find_gates, is_candidate, is_named
from bot.core.thresholds.errors import ThresholdFileError
from bot.core.thresholds.pinning import (
    SourceProposal,
    changed_file,
    mark_proposals,
    pin_sources,
)
from bot.features.related_files import GitHubReads, github_related, with_notes
from bot.features.repo_config import config_at
from bot.features.repo_files import repo_file_reader
from bot.features.review.approval import (
    ApprovalLike,
    ApprovalLookup,
    apply_approval,
    gate_key,
    gate_values,
)
from bot.features.review.attribution import attribute
from bot.features.review.report import ReportSink

APPROVE = CheckAction(
    label="Approve thresholds",
    identifier="approve",
    description="Accept the thresholds as proposed",
)
RETRY_HINT = "comment /threshold-bot retry or re-run the check to try again"
# what a parser may still raise on hostile input past its own limits (never a crash)
PARSE_FAILURES = (RecursionError, ValueError, UnicodeError, OverflowError)


@dataclass(frozen=True)
class PullThresholds:
    """The threshold files of a PR, read and parsed (input to the analysis)."""

    pull: PullInfo
    config: RepoConfig
    base_sha: str  # the merge base the gates are diffed against
    files: tuple[ThresholdFile, ...] = ()  # at the head
    changes: tuple[GateChange, ...] = ()
    errors: tuple[str, ...] = ()  # "path:line: reason" of files the head leaves unparseable
    warnings: tuple[str, ...] = ()
    proposals: tuple[SourceProposal, ...] = ()  # sources the PR names, not read unapproved
    touched: frozenset[str] = frozenset()  # every path the PR changes (previous paths too)


@dataclass(frozen=True)
class ReviewOutcome:
    """What ``review_pull`` did."""

    status: Literal["reviewed", "skipped"]
    pull: PullInfo
    reason: str = ""
    review: Review | None = None
    comment: CommentRef | None = None
    check_run: CheckRunRef | None = None
    sources: tuple[SourceSpec, ...] = field(default=())  # the remote sources read
    unavailable: bool = False  # a history could not be read (an outage): re-check on recovery


# --------------------------------------------------------------------------- reading


def read_thresholds(
    gh: GitHubAPI,
    repo: str,
    pull: PullInfo,
    *,
    approved: Container[str] = frozenset(),
    max_bytes: int = DEFAULT_THRESHOLD_FILE_BYTES,
) -> PullThresholds:
    """Find the PR's threshold files and diff their gates between merge base and head.

    ``files`` are the head's gates with the sources the head names (what an approval
    covers); ``changes`` read the sources the base decides, except those whose
    ``gate_key`` is in ``approved``.  Every file is read with at most ``max_bytes``.
    """
    config, warnings = config_at(gh, repo, pull.base_sha, max_bytes=max_bytes)
    base_sha = gh.merge_base(repo, pull.base_sha, pull.head_sha)
    files: list[ThresholdFile] = []
    changes: list[GateChange] = []
    proposals: list[SourceProposal] = []
    errors: list[str] = []
    notes = list(warnings)
    touched: set[str] = set()
    reads = GitHubReads(gh, repo, max_bytes)  # related files: each tree and file read once
    for changed in gh.pull_files(repo, pull.number):
        touched.update(p for p in (changed.path, changed.previous_path) if p)
        if changed.status == "removed" or not is_candidate(changed.path, config):
            continue
        deadline.check(f"reading {changed.path}")
        try:
            head_text = gh.file_text(repo, changed.path, pull.head_sha, max_bytes=max_bytes)
        except GitHubPermanentError as exc:  # too large, forbidden: say so, don't fail silently
            errors.append(f"{changed.path}: cannot be read: {_reason(exc, max_bytes)}")
            continue
        if head_text is None:
            continue
        named = is_named(changed.path, config)
        related = github_related(
            reads, pull.head_sha, changed.path, head_text, check=deadline.check
        )
        try:
            head = with_notes(
                find_gates(changed.path, head_text, config, related=related.files), related
            )
        except ThresholdFileError as exc:
            if named:  # a test file read for its name only is no threshold file of the PR's
                errors.append(_located(exc))
            continue
        except PARSE_FAILURES as exc:  # a parser limit missed: still said in the PR
            errors.append(f"{changed.path}: could not be read ({type(exc).__name__})")
            continue
        if head is None or not (head.gates or head.unbound):
            continue
        base = _base_file(gh, reads, changed, base_sha, config, notes, max_bytes)
        diff = diff_gates(base, head)
        if not named and not any(c.changed for c in diff) and not removed_gates(base, head):
            continue
        files.append(head)
        pinned, moved = pin_sources(diff, base, config, approved, gate_key)
        changes.extend(pinned)
        proposals.extend(moved)
        notes += [f"{changed.path}: {note}" for note in head.notes]
        notes += [
            f"{changed.path}: the PR removes gate {g.name} ({g.metric} {g.op} {g.literal})"
            for g in removed_gates(base, head)
        ]
    return PullThresholds(
        pull=pull,
        config=config,
        base_sha=base_sha,
        files=tuple(files),
        changes=tuple(changes),
        errors=tuple(errors),
        warnings=tuple(notes),
        proposals=tuple(proposals),
        touched=frozenset(touched),
    )


def _base_file(
    gh: GitHubAPI,
    reads: GitHubReads,
    changed: ChangedFile,
    base_sha: str,
    config: RepoConfig,
    notes: list[str],
    max_bytes: int,
) -> ThresholdFile | None:
    path = changed.previous_path or changed.path
    try:
        text = (
            None
            if changed.status == "added"
            else gh.file_text(reads.repo, path, base_sha, max_bytes=max_bytes)
        )
    except GitHubPermanentError as exc:
        reason = _reason(exc, max_bytes)
        notes.append(f"{path}: cannot be read at the base ({reason}); its gates are treated as new")
        return None
    if text is None:
        return None
    related = github_related(reads, base_sha, path, text, check=deadline.check)
    try:
        return find_gates(path, text, config, related=related.files)
    except ThresholdFileError as exc:
        notes.append(f"{_located(exc)} (at the base; its gates are treated as new)")
        return None
    except PARSE_FAILURES as exc:
        notes.append(f"{path}: could not be read at the base ({type(exc).__name__})")
        return None


def _reason(exc: GitHubPermanentError, max_bytes: int) -> str:
    """Why a file could not be read; a file over ``max_bytes`` names its setting."""
    if isinstance(exc, GitHubFileTooLarge) and exc.limit == max_bytes:
        return f"{exc} (MAX_THRESHOLD_FILE_BYTES)"
    return str(exc)


def _located(exc: ThresholdFileError) -> str:
    return str(exc)  # "path:line: reason"


# --------------------------------------------------------------------------- history


def repo_history(gh: GitHubAPI, repo: str, ref: str) -> FileSource:
    """A ``FileSource`` reading history files from the repository at ``ref``
    (``bot.features.repo_files``)."""
    return FileSource(repo_file_reader(gh, repo, ref))


RemoteHistory = Callable[[SourceSpec], HistorySource]


class HistoryRouter:
    """Reads ``file`` sources from the repository, every other kind from ``remote``.

    An ``actions`` source is read with the installation's client ``actions`` from the
    repository reviewed (``repo``; a source naming another repository is refused: the
    installation may see repositories whose metrics must not reach this one's reviews),
    through the run cache that ``remote`` hands out (``Rebindable``; any other source
    ``remote`` hands out reads it by itself), its ``repo`` set before the cache key is
    made; artifacts are downloaded up to the cache's ``max_artifact_bytes`` (the server's
    ``MAX_ARTIFACT_BYTES``).
    """

    def __init__(
        self,
        repo_files: HistorySource,
        remote: RemoteHistory | None,
        *,
        repo: str | None = None,
        actions: ActionsAPI | None = None,
    ) -> None:
        self._repo_files = repo_files
        self._remote = remote
        self._repo = repo
        self._actions = actions

    def fetch(self, spec: SourceSpec) -> History:
        """The runs of ``spec``; ``HistoryUnavailable`` when no remote source is configured."""
        if spec.kind == "file":
            return self._repo_files.fetch(spec)
        if spec.kind == "actions":
            return self._fetch_actions(spec)
        if self._remote is None:
            raise HistoryUnavailable(f"{spec.describe()}: this server has no {spec.kind} access")
        return self._remote(spec).fetch(spec)

    def _fetch_actions(self, spec: SourceSpec) -> History:
        repo = self._repo or ""
        bound = bound_to(spec, repo)
        if bound is None:
            raise SourceRefused(
                f"not read: the App reads the workflow artifacts of {repo or 'the repository'} "
                f"only, not of {spec.repo}"
            )
        spec = bound
        if self._remote is None or not repo:
            raise HistoryUnavailable(f"{spec.describe()}: this server has no run cache")
        source = self._remote(spec)
        if not isinstance(source, Rebindable):  # a source that reads artifacts by itself
            return source.fetch(spec)
        if self._actions is None:
            raise HistoryUnavailable(f"{spec.describe()}: no GitHub client reads its artifacts")
        upstream = ActionsSource(self._actions, source.max_artifact_bytes)
        return source.over(upstream).fetch(spec)


# --------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class Analysis:
    """The review of a PR's gates, and what reading their histories did."""

    review: Review
    sources: tuple[SourceSpec, ...]  # the sources requested (not those refused or unnamed)
    unavailable: bool  # a history could not be read right now (retrying may mend it)


def analyse(found: PullThresholds, history: HistorySource) -> Analysis:
    """Review every gate against its source's history; one ``Review`` for the whole PR.

    A gate whose source the PR proposes (``found.proposals``) requires action whatever its
    verdict against the base's source.
    """
    groups: dict[str, tuple[SourceSpec | None, list[GateChange]]] = {}
    for change in found.changes:
        spec = change.head.source
        key = spec.key() if spec is not None else ""
        groups.setdefault(key, (spec, []))[1].append(change)
    hints: tuple[UnboundVariable, ...] = tuple(u for tf in found.files for u in tf.unbound)
    rule, regimes = found.config.rule, found.config.regimes
    reviews: list[Review] = []
    sources: list[SourceSpec] = []
    unavailable = False
    for spec, changes in groups.values():
        shared = hints if not reviews else ()
        deadline.check(f"reading the history of {spec.describe() if spec else 'a gate'}")
        if spec is None:
            error = "no history source: name a W&B project in the file or set one in " + CONFIG_PATH
            reviews.append(unavailable_review(changes, error, rule=rule, hints=shared))
            continue
        # curve and aggregation gates compare per-step series: ask for them (and the
        # re-check's syncs too, so that an actions run's series are kept at its first read)
        spec = with_series(spec, (c.head for c in changes))
        try:
            runs = history.fetch(spec)
        except SourceRefused as exc:
            error = f"{spec.describe()}: {exc}"
            reviews.append(unavailable_review(changes, error, rule=rule, hints=shared))
            continue
        except HistoryError as exc:
            sources.append(spec)
            outage = isinstance(exc, HistoryUnavailable)
            unavailable = unavailable or outage
            hint = f" — {RETRY_HINT}" if outage else ""  # retrying mends only an outage
            error = f"{spec.describe()}: {exc}{hint}"
            reviews.append(unavailable_review(changes, error, rule=rule, hints=shared))
            continue
        sources.append(spec)
        reviews.append(
            build_review(changes, runs, rule=rule, regime_settings=regimes, hints=shared)
        )
    # no gate: nothing was checked; literals that look like thresholds make that worth a look
    empty: Conclusion = "neutral" if hints else "success"
    review = merge_reviews(reviews) if reviews else Review(conclusion=empty, hints=hints)
    review = mark_proposals(review, found.proposals)
    changed = _changed_reads(found)
    update: dict[str, object] = {
        "warnings": found.errors + changed + found.warnings + review.warnings
    }
    if found.errors or changed:
        update["conclusion"] = "action_required"
    review = review.model_copy(update=update)
    return Analysis(review=review, sources=tuple(sources), unavailable=unavailable)


def _changed_reads(found: PullThresholds) -> tuple[str, ...]:
    """What the review says of each file it reads at the base that the PR changes: the
    repository config, and each history file a changed gate reads (each requires action)."""
    said = (
        [changed_file(CONFIG_PATH, "the repository config")] if CONFIG_PATH in found.touched else []
    )
    readers: dict[str, list[str]] = {}
    for change in found.changes:
        spec = change.head.source
        if spec is not None and spec.kind == "file" and spec.path in found.touched:
            readers.setdefault(spec.path, []).append(change.head.name)
    for path, gates in readers.items():
        said.append(changed_file(path, f"the run history of {', '.join(dict.fromkeys(gates))}"))
    return tuple(said)


def _drift_window(found: PullThresholds) -> PullThresholds:
    """``found`` judged over the base config's ``drift.window``, saying so."""
    config = found.config
    window = config.drift.window
    rule = config.rule.model_copy(update={"window": window})
    note = f"opened by the drift watch: its values are judged over `drift.window` ({window})"
    return replace(
        found,
        config=config.model_copy(update={"rule": rule}),
        warnings=(*found.warnings, note),
    )


def _hinted(found: PullThresholds) -> bool:
    """Whether a file the config names (:func:`is_named`) has literals that reach a comparison
    and that no gate binds: the PR gets a ``neutral`` review listing them, never silence. A
    test file read only because of its name stays quiet unless the PR changes one of its
    gates."""
    return any(tf.unbound for tf in found.files if is_named(tf.path, found.config))


# --------------------------------------------------------------------------- publishing


def publish(
    gh: GitHubAPI,
    repo: str,
    found: PullThresholds,
    review: Review,
    approval: ApprovalLike | None = None,
    reports: ReportSink | None = None,
) -> tuple[CommentRef, CheckRunRef]:
    """Post (or edit) the marked comment, then complete the check run on the head SHA.

    A maintainer's ``approval`` of exactly the head's gate values turns an
    ``action_required`` check into ``success``; the comment and the check then open with who
    approved which values (``bot.features.review.approval``).
    A gate that could not be verified (no data, a history unreadable or refused) or whose
    source the PR changes can be approved: the maintainer vouches for it.  A threshold file
    the head leaves unreadable cannot (its gates are unknown): no Approve button, and a
    stored approval does not apply.  With ``reports``, the PR's interactive report is
    stored first and linked from the comment (``bot.features.review.report``).
    """
    pull = found.pull
    repo_url = pull.url.rsplit("/pull/", 1)[0]
    approvable = not found.errors
    conclusion, approved = apply_approval(
        review.conclusion, gate_values(found.files), approval if approvable else None
    )
    report_url = None
    if reports is not None:
        report_url = reports.publish(
            repo, pull, found.config, review, repo_url=repo_url, approved=approved
        )
    body = render_comment(
        review,
        repo_url=repo_url,
        app_mode=True,
        approved=approved,
        charts=found.config.charts != "off",
        report_url=report_url,
    )
    comment = gh.upsert_comment(repo, pull.number, body, MARKER)
    output = render_check(review, repo_url=repo_url, approved=approved)
    title = output.title
    if found.errors:
        title = f"Cannot read {found.errors[0].split(': ', 1)[0]}"[:255]
    check = gh.upsert_check_run(
        repo,
        pull.head_sha,
        conclusion=conclusion,
        title=title,
        summary=output.summary,
        text=output.text,
        actions=(APPROVE,) if conclusion == "action_required" and approvable else (),
        external_id=str(pull.number),
        details_url=comment.url,
    )
    return comment, check


def review_pull(
    gh: GitHubAPI,
    repo: str,
    number: int,
    *,
    remote_history: RemoteHistory | None = None,
    approvals: ApprovalLookup | None = None,
    max_bytes: int = DEFAULT_THRESHOLD_FILE_BYTES,
    drift_branch: str | None = None,
    reports: ReportSink | None = None,
) -> ReviewOutcome:
    """Review PR ``number`` of ``repo`` end to end and publish the result.

    ``remote_history`` is already limited to what this installation may read
    (``bot.core.access.guarded``); ``max_bytes`` bounds every threshold file read.
    ``drift_branch``: the branch of the drift watch's rebaseline PR numbered ``number`` (from
    the App's store): when this PR is that one, its values are judged over ``drift.window``
    of the base's config, the window they were computed over.  ``reports``: where the App
    keeps the interactive reports it serves (None: no report, no link).
    """
    pull = gh.pull(repo, number)
    if pull.state != "open":
        return ReviewOutcome(status="skipped", pull=pull, reason=f"the PR is {pull.state}")
    approval = approvals(repo, number) if approvals is not None else None
    approved = frozenset(approval.gate_values) if approval is not None else frozenset()
    found = read_thresholds(gh, repo, pull, approved=approved, max_bytes=max_bytes)
    if drift_branch is not None and pull.head_ref == drift_branch and pull.head_repo == repo:
        found = _drift_window(found)
    if not found.changes and not found.errors and not _hinted(found):
        return ReviewOutcome(status="skipped", pull=pull, reason="no threshold files")
    history = HistoryRouter(
        repo_history(gh, repo, pull.base_ref),
        remote_history,
        repo=repo,
        actions=gh if isinstance(gh, ActionsAPI) else None,
    )
    analysis = analyse(found, history)
    review = attribute(gh, repo, analysis.review, ref=pull.head_sha)
    deadline.check("publishing the review")
    comment, check = publish(gh, repo, found, review, approval, reports)
    return ReviewOutcome(
        status="reviewed",
        pull=pull,
        review=review,
        comment=comment,
        check_run=check,
        sources=analysis.sources,
        unavailable=analysis.unavailable,
    )
