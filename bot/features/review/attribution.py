"""Attribute regime changes to the pull requests merged between them (via GitHub).

For each ``Change`` with a commit on both sides, the commits in
``before_commit...after_commit`` are listed and each is mapped to the merged PRs that
brought it (``GET /repos/{o}/{r}/commits/{sha}/pulls``).  When the two commits are equal
or adjacent (one commit, or one PR's commits and merge commit, apart), the boundary may
sit one run off the change that caused it: the range is widened by one run each way
(``earlier_commit...later_commit``).

The PRs are listed most likely first: by how many of these they do — touch a threshold
file of the review, touch a file a threshold file names (``python train.py``, read at
``ref``), name a metric that moved at the change in their diff — then those merged between
the two runs themselves, then the newest.  Only the ``max_ranked`` newest PRs of a change
have their files read (one request each, their first ``RANKED_FILES`` files), so the extra
requests are bounded.  Failures never sink the review: the change keeps no PRs (or
unranked ones) and the review gets a warning.

A run's commit is outside data (anyone who can log a run writes it): only hex SHAs
(``bot.core.api_paths.is_sha``) are used; any other value counts as no commit, and the
review says so once.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Iterable, Mapping, Sequence

from bot.adapters.github.api import ChangedFile, GitHubAPI, PullInfo
from bot.adapters.github.errors import GitHubError, GitHubNotFound
from bot.core.api_paths import is_sha
from bot.core.models import Change, PullRef, Review

MAX_COMMITS = 100  # per change; a wider range is summarised by its first commits
MAX_RANKED = 10  # PRs per change whose files are read to rank them
RANKED_FILES = 100  # files read per ranked PR: one request
NOT_SHAS = "some runs name a commit that is not a hex SHA: their PRs are not looked up"


def attribute(
    gh: GitHubAPI,
    repo: str,
    review: Review,
    *,
    ref: str | None = None,
    max_commits: int = MAX_COMMITS,
    max_ranked: int = MAX_RANKED,
) -> Review:
    """Fill ``Change.pulls`` (most likely first) and ``Review.pulls`` with the PRs merged at
    each change; ``ref``: where the threshold files are read to find the files they name."""
    reads = _Reads(gh, repo, {g.file for g in review.gates}, ref)
    pulls = dict(review.pulls)
    changes: list[Change] = []
    commits = [
        c
        for ch in review.changes
        for c in (ch.before_commit, ch.after_commit, ch.earlier_commit, ch.later_commit)
    ]
    if any(c and not is_sha(c) for c in commits):
        reads.warnings.append(NOT_SHAS)
    for change in review.changes:
        span, verb = _span(change)
        try:
            merged, between = _merged_at(reads, change, max_commits)
        except GitHubNotFound:
            reads.warnings.append(f"{span} {verb} not in {repo}")
            changes.append(change)
            continue
        except GitHubError as exc:
            reads.warnings.append(f"could not list the PRs of {span}: {exc}")
            changes.append(change)
            continue
        for pr in merged:
            pulls[pr.number] = PullRef(number=pr.number, title=pr.title, url=pr.url)
        ranked = _ranked(reads, merged, between, set(change.metrics), max_ranked)
        changes.append(change.model_copy(update={"pulls": ranked}))
    return review.model_copy(
        update={
            "changes": tuple(changes),
            "pulls": pulls,
            "warnings": review.warnings + tuple(reads.warnings),
        }
    )


class _Reads:
    """What attribution reads from GitHub, each thing once per review."""

    def __init__(self, gh: GitHubAPI, repo: str, thresholds: set[str], ref: str | None) -> None:
        self.gh, self.repo, self.thresholds, self.ref = gh, repo, thresholds, ref
        self.warnings: list[str] = []
        self._pulls: dict[str, list[PullInfo]] = {}
        self._files: dict[int, list[ChangedFile]] = {}
        self._words: dict[str, set[str]] | None = None

    def commits(self, base: str, head: str, limit: int) -> list[str]:
        """The first ``limit`` commits of ``base...head`` (a warning when there are more)."""
        shas = self.gh.compare_commits(self.repo, base, head, limit=limit + 1)
        if len(shas) > limit:
            self.warnings.append(
                f"{base[:7]}...{head[:7]} has more than {limit} commits; "
                f"only the PRs of the first {limit} are listed"
            )
        return shas[:limit]

    def merged(self, shas: Iterable[str]) -> list[PullInfo]:
        """The merged PRs that brought ``shas``, in the order of their first commit."""
        found: dict[int, PullInfo] = {}
        for sha in shas:
            if sha not in self._pulls:
                self._pulls[sha] = self.gh.pulls_for_commit(self.repo, sha)
            for pr in self._pulls[sha]:
                if pr.merged:
                    found.setdefault(pr.number, pr)
        return list(found.values())

    def files(self, number: int) -> list[ChangedFile]:
        """The first ``RANKED_FILES`` files of PR ``number`` (none, with a warning, on failure)."""
        if number not in self._files:
            try:
                self._files[number] = self.gh.pull_files(self.repo, number, limit=RANKED_FILES)
            except GitHubError as exc:
                self.warnings.append(f"could not read the files of #{number} to rank it: {exc}")
                self._files[number] = []
        return self._files[number]

    def words(self) -> dict[str, set[str]]:
        """The path-like words of each threshold file at ``ref`` (none without ``ref``),
        read once."""
        if self._words is None:
            self._words = {}
            for path in sorted(self.thresholds) if self.ref else ():
                try:
                    text = self.gh.file_text(self.repo, path, self.ref or "")
                except GitHubError as exc:
                    self.warnings.append(f"could not read {path} to rank the PRs: {exc}")
                    continue
                if text is not None:
                    self._words[path] = _path_words(text)
        return self._words


def _merged_at(reads: _Reads, change: Change, max_commits: int) -> tuple[list[PullInfo], set[int]]:
    """The merged PRs of the change's range, oldest first, and the numbers of those merged
    between its two runs themselves (the range before it is widened)."""
    before, after = _sha(change.before_commit), _sha(change.after_commit)
    if not before or not after:
        return [], set()
    shas = [] if before == after else reads.commits(before, after, max_commits)
    between = {pr.number for pr in reads.merged(shas)}
    if _adjacent(reads, shas, between):  # the boundary may be one run off
        wider = (_sha(change.earlier_commit) or before, _sha(change.later_commit) or after)
        if wider != (before, after) and wider[0] != wider[1]:
            shas = reads.commits(*wider, max_commits)
    return reads.merged(shas), between


def _span(change: Change) -> tuple[str, str]:
    """The commits a change's attribution reads, as a warning names them, and the verb they
    take: the range between its two runs, the wider one when both ran the same commit, or
    that one commit."""
    before, after = _sha(change.before_commit), _sha(change.after_commit)
    if before and before == after:
        before = _sha(change.earlier_commit) or before
        after = _sha(change.later_commit) or after
    if before and before == after:
        return f"commit {before[:7]}", "is"
    return f"commits {(before or '?')[:7]}...{(after or '?')[:7]}", "are"


def _sha(commit: str | None) -> str | None:
    """A run's commit if it is a hex SHA, else None (never a path or a branch name)."""
    return commit if is_sha(commit) else None


def _adjacent(reads: _Reads, shas: Sequence[str], between: Collection[int]) -> bool:
    """Whether a range is one step of history: no commit, one, or the commits of a single
    merged PR (its commits and its merge commit)."""
    return len(shas) <= 1 or (len(between) == 1 and all(reads.merged([sha]) for sha in shas))


def _ranked(
    reads: _Reads,
    merged: Sequence[PullInfo],
    between: Collection[int],
    metrics: Collection[str],
    max_ranked: int,
) -> tuple[int, ...]:
    """PR numbers, most likely first (see the module docstring)."""
    newest = [pr.number for pr in reversed(merged)]
    ranked = newest[:max_ranked] if len(newest) > 1 else []  # one PR needs no ranking
    clues = {n: _clues(reads.files(n), reads.thresholds, reads.words(), metrics) for n in ranked}
    return tuple(sorted(newest, key=lambda n: (-clues.get(n, 0), n not in between)))


def _clues(
    files: Sequence[ChangedFile],
    thresholds: Collection[str],
    words: Mapping[str, set[str]],
    metrics: Collection[str],
) -> int:
    """How many of the three clues a PR's ``files`` give: a threshold file, a file a
    threshold file names, a moved metric's name in a patch."""
    paths = {p for f in files for p in (f.path, f.previous_path) if p}
    touches_gate = bool(paths & set(thresholds))
    touches_named = any(_named(p, words) for p in paths - set(thresholds))
    names_metric = any(m in (f.patch or "") for f in files for m in metrics)
    return touches_gate + touches_named + names_metric


def _named(path: str, words: Mapping[str, set[str]]) -> bool:
    """Whether a threshold file names ``path``, as a repository path or relative to the
    threshold file's folder."""
    for threshold, named in words.items():
        folder = posixpath.dirname(threshold)
        relative = path[len(folder) + 1 :] if folder and path.startswith(folder + "/") else path
        if path in named or relative in named:
            return True
    return False


def _path_words(text: str) -> set[str]:
    """The path-like words of ``text`` (``./`` and trailing dots dropped): one pass, so a
    large threshold file costs no more per PR file."""
    return {w.removeprefix("./").rstrip(".") for w in re.findall(r"[\w./-]+", text)}
