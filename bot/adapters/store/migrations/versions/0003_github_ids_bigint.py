"""GitHub ids are 64-bit: BIGINT on PostgreSQL (SQLite's INTEGER is 64-bit already).

The installation ids of ``deliveries``, ``drift_items`` and ``tracked_pulls``, and the
primary key of ``installations`` (with its sequence, if release 1 made it SERIAL).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels = None
depends_on = None

COLUMNS = (
    ("deliveries", "installation_id"),
    ("drift_items", "installation_id"),
    ("installations", "id"),
    ("tracked_pulls", "installation_id"),
)


def upgrade() -> None:
    """Widen the four columns on PostgreSQL; nothing to do on SQLite."""
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in COLUMNS:
        op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer())
    op.execute("ALTER SEQUENCE IF EXISTS installations_id_seq AS bigint")


def downgrade() -> None:
    """Narrow them back (fails on PostgreSQL if an id no longer fits in 32 bits)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER SEQUENCE IF EXISTS installations_id_seq AS integer")
    for table, column in COLUMNS:
        op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger())
