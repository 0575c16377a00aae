"""Files of the repository at a commit, read through GitHub as history files are read.

Light on purpose: the Action (``bot.cli.action``) reads its PR's base with it, and the Action's
install has none of the App's extras.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.adapters.github.api import GitHubAPI
from bot.adapters.github.errors import GitHubError, GitHubFileTooLarge
from bot.core.history.sources import BadHistory, HistoryUnavailable


def repo_file_reader(gh: GitHubAPI, repo: str, ref: str) -> Callable[[str], str]:
    """A reader of the history files of the repository at ``ref``: the text of a path, or
    ``FileNotFoundError``.

    Every failure to read one is a ``HistoryError``, so that the review says what happened:
    a file over the size limit is ``BadHistory``; any other GitHub failure (403, a 5xx after
    the client's retries…) ``HistoryUnavailable``.
    """

    def read_text(path: str) -> str:
        try:
            text = gh.file_text(repo, path, ref)
        except GitHubFileTooLarge as exc:
            raise BadHistory(str(exc)) from exc
        except GitHubError as exc:
            raise HistoryUnavailable(f"{path} could not be read from GitHub: {exc}") from exc
        if text is None:
            raise FileNotFoundError(path)
        return text

    return read_text
