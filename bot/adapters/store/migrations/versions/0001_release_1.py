"""Release 1: the schema exactly as its ``Base.metadata.create_all`` made it.

A store created by release 1 (no ``alembic_version`` table) is stamped with this revision
by ``bot.adapters.store.schema.upgrade`` after checking its tables, then upgraded.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create release 1's tables and indexes."""
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(100), nullable=False),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("outcome", sa.String(40), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("delivery_id", sa.String(100), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=True),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("approver", sa.String(100), nullable=False),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("gate_values", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=True),
        sa.Column("installation_id", sa.Integer(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("outcome", sa.String(200), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("claimed_by", sa.String(200), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "installations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("account", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("repositories", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "tracked_pulls",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=True),
        sa.Column("installation_id", sa.Integer(), nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("conclusion", sa.String(32), nullable=False),
        sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repo", "number"),
    )
    op.create_table(
        "drift_items",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=True),
        sa.Column("installation_id", sa.Integer(), nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("file", sa.String(1024), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("issue", sa.Integer(), nullable=True),
        sa.Column("pull", sa.Integer(), nullable=True),
        sa.Column("branch", sa.String(300), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("shown", sa.String(64), nullable=False),
        sa.Column("dismissed", sa.String(64), nullable=False),
        sa.Column("opened_at", sa.DateTime(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("closed_at", sa.DateTime(), nullable=True),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repo", "file"),
    )
    op.create_table(
        "cached_runs",
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("name", sa.String(500), nullable=True),
        sa.Column("commit", sa.String(64), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("non_numeric", sa.Integer(), nullable=False),
        sa.Column("non_finite", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("source", "run_id"),
    )
    op.create_table(
        "cached_series",
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(255), nullable=False),
        sa.Column("metric", sa.String(500), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("non_numeric", sa.Integer(), nullable=False),
        sa.Column("non_finite", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("source", "run_id", "metric"),
    )
    op.create_table(
        "cached_sources",
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("description", sa.String(500), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("synced_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("source"),
    )
    op.create_table(
        "heartbeat",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "reports",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("nonce", sa.String(64), nullable=False),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("html", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repo", "number"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_index("ix_audit_log_repo", "audit_log", ["repo"])
    op.create_index("ix_audit_log_at", "audit_log", ["at"])
    op.create_index("ix_approvals_repo", "approvals", ["repo"])
    op.create_index("ix_approvals_pr_number", "approvals", ["pr_number"])
    op.create_index("ix_deliveries_status", "deliveries", ["status"])
    op.create_index("ix_tracked_pulls_repo", "tracked_pulls", ["repo"])
    op.create_index("ix_drift_items_repo", "drift_items", ["repo"])
    op.create_index("ix_cached_runs_source_created", "cached_runs", ["source", "created_at"])
    op.create_index("ix_reports_expires_at", "reports", ["expires_at"])


def downgrade() -> None:
    """Drop every table of release 1 (its indexes go with them)."""
    for table in (
        "reports",
        "heartbeat",
        "cached_sources",
        "cached_series",
        "cached_runs",
        "drift_items",
        "tracked_pulls",
        "installations",
        "deliveries",
        "approvals",
        "audit_log",
    ):
        op.drop_table(table)
