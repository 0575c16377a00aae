"""Every action the repository runs or shows is pinned by commit SHA (issue 27, item 7).

A tag or a branch can be moved to other code by whoever controls the action's repository; a
40-hex commit SHA cannot.  So every ``uses:`` in action.yml, in any workflow under .github/,
under deploy/, and in the YAML examples of README.md and docs/*.md names a full commit SHA
followed by the version it is, as a comment (``# v6.2.0``), which is what Dependabot and
readers go by.  Local actions (``./path``) are the repository's own files and need no ref.

One documented exception: the examples' ``threshold-bot/threshold-bot@main   # pin a commit
SHA``.  The docs live in this repository, so they cannot name a commit of it that contains
them; the comment tells the reader to pin the commit they vetted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
USES = re.compile(r"(?<![\w-])uses:\s*[\"']?(?P<ref>[^\s\"'#,}]+)[\"']?(?P<rest>.*)$")
PINNED = re.compile(r"[\w.-]+/[\w.-]+(?:/[^@\s]+)?@[0-9a-f]{40}")
VERSION_COMMENT = re.compile(r"\s+#\s*v\d+(?:\.\d+)*\b")
OWN_EXAMPLE = ("threshold-bot/threshold-bot@main", "# pin a commit SHA")


def unpinned(text: str) -> list[str]:
    """The ``uses:`` lines of ``text`` that do not pin a commit SHA with its version."""
    found = []
    for line in text.splitlines():
        match = USES.search(line)
        if match is None:
            continue
        ref, rest = match["ref"], match["rest"]
        if ref.startswith("./"):
            continue  # a local action: the repository's own files
        if (ref, rest.strip()) == OWN_EXAMPLE:
            continue
        if PINNED.fullmatch(ref) and VERSION_COMMENT.match(rest):
            continue
        found.append(line.strip())
    return found


def _uses_values(node: Any) -> Iterator[str]:
    """Every value of a ``uses`` key anywhere in a parsed YAML document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "uses":
                yield str(value)
            yield from _uses_values(value)
    elif isinstance(node, list):
        for item in node:
            yield from _uses_values(item)


def _yaml_texts() -> Iterator[tuple[str, str]]:
    """(where, YAML text): the action, workflows, deploy/ and the docs' YAML examples."""
    files = [ROOT / "action.yml"]
    for folder in (".github", "deploy"):
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in (".yml", ".yaml"))
    for path in files:
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    markdown = MarkdownIt("commonmark")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for token in markdown.parse(path.read_text(encoding="utf-8")):
            if token.type == "fence" and token.info.split()[:1] in (["yaml"], ["yml"]):
                line = token.map[0] + 1 if token.map else 0
                yield f"{path.relative_to(ROOT)}:{line}", token.content


@pytest.mark.parametrize(
    ("line", "pinned"),
    [
        ("      - uses: actions/setup-python@v5", False),
        ("      - uses: actions/checkout@v5.0.0   # v5.0.0", False),
        ("      uses: actions/cache@main", False),
        ("      uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae", False),  # no version
        ("      uses: actions/cache@27d5ce7 # v5.0.5", False),  # a short SHA
        ("      uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae # latest", False),
        ("  - {uses: actions/checkout@v4, with: {fetch-depth: 0}}", False),
        ('      uses: "actions/checkout@v4"', False),
        ("      - uses: threshold-bot/threshold-bot@main", False),  # the exception needs its note
        ("      - uses: threshold-bot/threshold-bot@v1   # pin a commit SHA", False),
        ("      - uses: other/action@main   # pin a commit SHA", False),
        ("      uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae # v5.0.5", True),
        ("      uses: actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae  #v5", True),
        ("      uses: github/codeql-action/init@" + "a" * 40 + " # v3.28.0", True),
        ("      uses: ./.github/actions/local", True),
        ("      - uses: threshold-bot/threshold-bot@main   # pin a commit SHA", True),
        ("        run: echo 'no action here'", True),
    ],
)
def test_a_uses_line_is_pinned_only_by_a_commit_sha_and_its_version(
    line: str, pinned: bool
) -> None:
    assert unpinned(f"steps:\n{line}\n") == ([] if pinned else [line.strip()])


@pytest.mark.parametrize(("where", "text"), [pytest.param(w, t, id=w) for w, t in _yaml_texts()])
def test_every_action_the_repository_shows_is_pinned(where: str, text: str) -> None:
    assert unpinned(text) == [], f"{where}: pin these by commit SHA with a '# vX.Y.Z' comment"
    # every `uses` YAML sees is on a line the check read (none written in a form it misses)
    checked = {m["ref"] for line in text.splitlines() if (m := USES.search(line))}
    assert set(_uses_values(yaml.safe_load(text))) <= checked


def test_the_check_reads_the_actions_and_the_docs_examples() -> None:
    texts = dict(_yaml_texts())
    uses = [v for text in texts.values() for v in _uses_values(yaml.safe_load(text))]
    assert {"actions/setup-python", "actions/cache", "actions/checkout"} <= {
        v.split("@")[0] for v in uses
    }
    assert sum(v == OWN_EXAMPLE[0] for v in uses) >= 3  # README.md's and docs/cli.md's examples
