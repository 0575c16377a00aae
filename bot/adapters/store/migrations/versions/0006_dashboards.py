"""Dashboards: the table of ``bot.adapters.store.dashboards`` (one threshold dashboard issue
per repository, the body the App last wrote to it, and its lease)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``dashboards``."""
    op.create_table(
        "dashboards",
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column(
            "installation_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
        ),
        sa.Column("issue", sa.Integer(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("notes", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("repo"),
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_table("dashboards")
