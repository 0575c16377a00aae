"""Drift items keep the file's last rebaseline: the PR the watch opened and saw merged, and
when (the threshold dashboard shows it)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``drift_items.rebaselined`` and ``rebaselined_at``."""
    with op.batch_alter_table("drift_items") as batch:
        batch.add_column(sa.Column("rebaselined", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("rebaselined_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("drift_items") as batch:
        batch.drop_column("rebaselined_at")
        batch.drop_column("rebaselined")
