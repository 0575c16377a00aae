"""Leases on store rows: which worker may write a row now (drift items, dashboards).

A row with a lease has ``lease_owner`` and ``lease_until``.  A worker *takes* the lease
with one conditional ``UPDATE`` (``free_for`` in its ``WHERE``, ``taken_by`` as its values):
atomic on every engine, so of two workers racing exactly one gets the row.  The lease is free
for a worker when nobody holds it, when the worker holds it already, or when it expired (a
worker killed while holding it).  ``RELEASED`` gives it back.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, DateTime, or_
from sqlalchemy.orm import Mapped, mapped_column

from bot.adapters.store.portable import Clipped

RELEASED: dict[str, Any] = {"lease_owner": None, "lease_until": None}


class Leased:
    """The columns of a row that takes leases (a declarative mixin)."""

    lease_owner: Mapped[str | None] = mapped_column(Clipped(100), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


def free_for(row: type[Leased], owner: str, now: datetime) -> ColumnElement[bool]:
    """Rows whose lease ``owner`` may take at ``now``: none held, its own, or expired."""
    return or_(row.lease_owner.is_(None), row.lease_owner == owner, row.lease_until < now)


def taken_by(owner: str, seconds: float, now: datetime) -> dict[str, Any]:
    """The values that give ``owner`` the lease for ``seconds`` from ``now``."""
    return {"lease_owner": owner, "lease_until": now + timedelta(seconds=seconds)}
