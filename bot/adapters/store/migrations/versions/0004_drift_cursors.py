"""Drift cursors: where the drift watch resumes what a round's budget cut (the table of
``bot.adapters.store.cursors``)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``drift_cursors``."""
    op.create_table(
        "drift_cursors",
        sa.Column("key", sa.String(300), nullable=False),
        sa.Column("position", sa.String(1024), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_table("drift_cursors")
