"""Redeliveries: the tables of ``bot.adapters.store.redeliveries`` (the deliveries GitHub was
asked to send again, and how far the App's deliveries have been looked at)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``redeliveries`` and ``scan_marks``."""
    op.create_table(
        "redeliveries",
        sa.Column("guid", sa.String(64), nullable=False),
        sa.Column("times", sa.Integer(), nullable=False),
        sa.Column(
            "hook_delivery_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
        ),
        sa.Column("asked_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("guid"),
    )
    op.create_index("ix_redeliveries_asked_at", "redeliveries", ["asked_at"])
    op.create_table(
        "scan_marks",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("scanned_to", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table("scan_marks")
    op.drop_index("ix_redeliveries_asked_at", table_name="redeliveries")
    op.drop_table("redeliveries")
