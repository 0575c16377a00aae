"""Attribute regime changes to the pull requests merged between them (via GitHub).

For each ``Change`` with a commit on both sides, the commits in
``before_commit...after_commit`` are listed and each is mapped to the merged PRs
that brought it (``GET /repos/{o}/{r}/commits/{sha}/pulls``).  Failures never sink
the review: the change keeps no PRs and the review gets a warning.
"""

from __future__ import annotations

from bot.adapters.github.api import GitHubAPI, PullInfo
from bot.adapters.github.errors import GitHubError, GitHubNotFound
from bot.core.models import Change, PullRef, Review

MAX_COMMITS = 100  # per change; a wider range is summarised by its first commits


def attribute(
    gh: GitHubAPI, repo: str, review: Review, *, max_commits: int = MAX_COMMITS
) -> Review:
    """Fill ``Change.pulls`` and ``Review.pulls`` with the PRs merged at each change."""
    pulls = dict(review.pulls)
    by_commit: dict[str, list[PullInfo]] = {}
    warnings: list[str] = []
    changes: list[Change] = []
    for change in review.changes:
        before, after = change.before_commit, change.after_commit
        if not before or not after or before == after:
            changes.append(change)
            continue
        try:
            shas = gh.compare_commits(repo, before, after, limit=max_commits + 1)
            if len(shas) > max_commits:
                warnings.append(
                    f"{before[:7]}...{after[:7]} has more than {max_commits} commits; "
                    f"only the PRs of the first {max_commits} are listed"
                )
            numbers: set[int] = set()
            for sha in shas[:max_commits]:
                if sha not in by_commit:
                    by_commit[sha] = gh.pulls_for_commit(repo, sha)
                for pr in by_commit[sha]:
                    if pr.merged:
                        numbers.add(pr.number)
                        pulls[pr.number] = PullRef(number=pr.number, title=pr.title, url=pr.url)
        except GitHubNotFound:
            warnings.append(f"commits {before[:7]}...{after[:7]} are not in {repo}")
            changes.append(change)
            continue
        except GitHubError as exc:
            warnings.append(f"could not list the PRs of {before[:7]}...{after[:7]}: {exc}")
            changes.append(change)
            continue
        changes.append(change.model_copy(update={"pulls": tuple(sorted(numbers))}))
    return review.model_copy(
        update={
            "changes": tuple(changes),
            "pulls": pulls,
            "warnings": review.warnings + tuple(warnings),
        }
    )
