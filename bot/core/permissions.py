"""Repository permission levels, ranked, as GitHub reports them.

``GET /repos/{o}/{r}/collaborators/{u}/permission`` answers ``permission``
(``admin``/``write``/``read``/``none``, where maintain folds into write and
triage into read) and ``role_name`` (the finer ``admin``/``maintain``/``write``/
``triage``/``read``, or a custom role).  The finer one is used when known.
"""

from __future__ import annotations

RANK: dict[str, int] = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}


def effective_level(permission: str | None, role_name: str | None = None) -> str:
    """A user's level: ``role_name`` when it is a built-in role, else ``permission``."""
    if role_name and role_name.lower() in RANK:
        return role_name.lower()
    level = (permission or "none").lower()
    return level if level in RANK else "none"


def allows(level: str, required: str) -> bool:
    """Whether ``level`` is at least ``required`` (unknown levels allow nothing)."""
    return RANK.get(level, 0) >= RANK.get(required, len(RANK)) and level in RANK
