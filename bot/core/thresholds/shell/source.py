"""The W&B project (and entity) a shell script names: its gates' history source.

``--project_name x``, ``--project-name=x``, ``project_name=x``, ``trainer.project_name=x``,
``WANDB_PROJECT=x``, ``--wandb-project x``; entity from ``--entity`` / ``WANDB_ENTITY`` /
``wandb.entity=``.  Values are read as the shell passes them on (quotes, escapes, ``$'...'``,
adjacent parts), then one more pair of quotes is removed, as Hydra does for
``trainer.project_name=\\"x\\"``; ``$VAR`` values resolve through a single assignment in the
file.  Two different projects named in one file are ambiguous: none is used, and a note
says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from bot.core.models import SourceSpec
from bot.core.thresholds.shell.scan import Scan

_VARIABLE = re.compile(r"\$(?:(?P<a>[A-Za-z_]\w*)|\{(?P<b>[A-Za-z_]\w*)\})")
_SETTING_KEY = re.compile(r"-{0,2}[\w.\-]+")
_PROJECT_KEYS = ("project_name", "wandb_project", "wandb.project")
_ENTITY_KEYS = ("entity", "wandb_entity", "wandb.entity")


@dataclass(frozen=True, slots=True)
class _Mention:
    key: str  # normalised: ``--Project-Name`` -> ``project_name``
    value: str
    line: int


def dequote(value: str) -> str:
    """``"x"`` / ``'x'`` -> ``x``: the quoting a program (Hydra, argparse in a shell) removes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _settings(found: Scan) -> Iterator[_Mention]:
    """Every ``key=value``, ``--key=value`` and ``--key value``, keys normalised."""
    for a in found.assignments:
        yield _Mention(a.name.lower(), dequote(a.value), a.line)
    for command in found.commands:
        words = [w.unquoted() for w in command]
        for i, word in enumerate(words):
            key, eq, value = word.partition("=")
            if not (eq or key.startswith("--")) or not _SETTING_KEY.fullmatch(key):
                continue
            normal = key.lstrip("-").replace("-", "_").lower()
            line = found.line(command[i].start)
            if eq:
                yield _Mention(normal, dequote(value), line)
            elif key.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("-"):
                yield _Mention(normal, dequote(words[i + 1]), line)


def _resolve(value: str, strings: dict[str, str | None]) -> str | None:
    """Replace ``$VAR`` / ``${VAR}`` from single string assignments; None if any is unknown."""
    unknown = False

    def sub(match: re.Match[str]) -> str:
        nonlocal unknown
        resolved = strings.get(match["a"] or match["b"])
        unknown = unknown or resolved is None or "$" in resolved
        return resolved or ""

    result = _VARIABLE.sub(sub, value).strip()
    return None if unknown or "$" in result or not result else result


def _named(
    mentions: Iterable[_Mention], keys: tuple[str, ...], strings: dict[str, str | None]
) -> dict[str, int]:
    """The distinct values named under ``keys``, each with the line of its first mention."""
    found: dict[str, int] = {}
    for m in mentions:
        if m.key in keys or m.key.endswith(tuple("." + k for k in keys)):
            resolved = _resolve(m.value, strings)
            if resolved is not None:
                found[resolved] = min(found.get(resolved, m.line), m.line)
    return found


def _ambiguous(what: str, found: dict[str, int]) -> str:
    named = ", ".join(f"{value} on line {line}" for value, line in sorted(found.items()))
    return f"the script names {len(found)} different W&B {what} ({named}): none of them is used"


def named_source(found: Scan) -> tuple[SourceSpec | None, int, tuple[str, ...]]:
    """The W&B project (and entity) the script names, the line naming it, and notes."""
    strings: dict[str, str | None] = {}
    for a in found.assignments:
        strings[a.name] = dequote(a.value) if a.name not in strings else None
    mentions = list(_settings(found))
    projects = _named(mentions, _PROJECT_KEYS, strings)
    entities = _named(mentions, _ENTITY_KEYS, strings)
    notes = tuple(
        _ambiguous(w, f) for w, f in (("projects", projects), ("entities", entities)) if len(f) > 1
    )
    if len(projects) != 1:
        return None, 0, notes
    ((project, line),) = projects.items()
    entity = next(iter(entities)) if len(entities) == 1 else None
    return SourceSpec(kind="wandb", project=project, entity=entity), line, notes
