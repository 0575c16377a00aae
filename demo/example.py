"""``python -m demo.example``: review a realistic threshold PR with the CLI's code, offline.

(``make demo`` runs the whole App instead: ``demo.app``.)

Writes the example of ``demo.data`` (a year of nightly runs, the threshold script
before and after the PR, the merged PRs) to a temporary directory, reviews it exactly as
``threshold-bot review`` does, attributes each regime change to the PRs merged there, and
prints the PR comment.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bot.adapters.github.client import PullInfo
from bot.cli.main import review_files
from bot.core.models import Review
from bot.core.render.review import render_comment
from bot.features.review.attribution import attribute
from demo.data import PROJECT, DemoRepo, ExamplePaths, write_example

DEMO_REPO = "example-org/rl-trainer"


class ExampleHistory:
    """The example repository's main branch, answering what attribution asks GitHub."""

    def __init__(self, repo: DemoRepo) -> None:
        self._order = [repo.initial_commit] + [p.merge_commit for p in repo.pulls]
        self._pulls = {
            p.merge_commit: PullInfo(
                number=p.number,
                title=p.title,
                url="",
                state="closed",
                draft=False,
                merged=True,
                author=p.author,
                base_ref="main",
                base_sha="",
                head_ref=f"pr-{p.number}",
                head_sha=p.merge_commit,
                head_repo=DEMO_REPO,
            )
            for p in repo.pulls
        }

    def compare_commits(self, repo: str, base: str, head: str, limit: int = 250) -> list[str]:
        """Commits in ``base...head`` on main, oldest first."""
        start, end = self._order.index(base), self._order.index(head)
        return self._order[start + 1 : end + 1][:limit]

    def pulls_for_commit(self, repo: str, sha: str) -> list[PullInfo]:
        """The PR squash-merged as ``sha``."""
        return [self._pulls[sha]] if sha in self._pulls else []


def demo_review(paths: ExamplePaths) -> Review:
    """The review of the example PR, with regime changes attributed to their PRs."""
    review = review_files(paths.history, paths.head, paths.base, label=paths.script_path)
    review = attribute(ExampleHistory(paths.repo), DEMO_REPO, review)
    return review.model_copy(
        update={"source": f"{paths.history.name} (standing in for wandb:{PROJECT})"}
    )


def main() -> None:
    """Generate the example in a temporary directory and print the PR comment."""
    with tempfile.TemporaryDirectory(prefix="threshold-bot-demo-") as tmp:
        paths = write_example(Path(tmp))
        review = demo_review(paths)
        runs = review.history.total
        print(
            f"threshold-bot demo: {runs} nightly runs of {PROJECT}; PR "
            f"#{paths.repo.threshold_pull} changes {paths.script_path}. The comment it gets:\n",
            file=sys.stderr,
        )
        sys.stdout.write(render_comment(review))


if __name__ == "__main__":
    main()
