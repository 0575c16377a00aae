"""Other files of the repository a file's gates depend on: what the shell should read.

Pure: the shell (``bot.features.related_files``) reads the files, bounded, and hands their
texts to ``find_gates`` as ``related``.

* ``wanted_paths``: forward references, per language: the repository modules a Python file
  imports (``python.imports``); the scripts a shell script runs (``shell.calls``).
* ``mentions``: the reverse: whether another file's text refers to a file by its module name
  (``thresholds`` for ``tests/thresholds.py``: ``from tests import thresholds``,
  ``tests.thresholds``) or its file name (``loss.txt``), as a whole word.

Bounds: each reads one text once (linear); the shell bounds the texts' sizes and counts.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from bot.core.thresholds.python.imports import imported_paths
from bot.core.thresholds.python.reader import PYTHON_SUFFIXES
from bot.core.thresholds.shell.calls import called_scripts
from bot.core.thresholds.shell.script import is_shell_script

READERS = frozenset({".py", ".sh", ".bash"})  # files that may read another one


def wanted_paths(path: str, text: str) -> tuple[str, ...]:
    """The repository paths ``text`` (the file at ``path``) refers to, nearest first; a
    path may not exist (the shell skips it)."""
    if PurePosixPath(path).suffix.lower() in PYTHON_SUFFIXES:
        return imported_paths(path, text)
    if is_shell_script(path, text):
        return called_scripts(path, text)
    return ()


def mentions(path: str, other_text: str) -> bool:
    """Whether ``other_text`` names the file at ``path``: its file name, or for a Python
    module its module name, as a whole word."""
    name = PurePosixPath(path).name
    if not name:
        return False
    found = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-]|\.\w)", other_text)
    stem = PurePosixPath(path).stem
    if found or PurePosixPath(path).suffix.lower() not in PYTHON_SUFFIXES:
        return found is not None
    module = stem if stem != "__init__" else PurePosixPath(path).parent.name
    if not module.isidentifier():
        return False
    return re.search(rf"(?<![\w-]){re.escape(module)}(?![\w-])", other_text) is not None
