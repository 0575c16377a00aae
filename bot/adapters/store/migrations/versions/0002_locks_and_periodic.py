"""Locks and periodic runs: the tables of ``bot.adapters.store.locks`` and
``bot.adapters.store.periodic`` (lock rows for stores without a lock service; which period
each periodic job last ran for)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``locks`` and ``periodic_runs``."""
    op.create_table(
        "locks",
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("until", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "periodic_runs",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("period_start", sa.DateTime(), nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table("periodic_runs")
    op.drop_table("locks")
