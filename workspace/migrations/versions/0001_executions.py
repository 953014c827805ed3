"""Workspaces, executions, snapshots and transitions.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "workspaces",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("owner", sa.String(255), nullable=False, index=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.UniqueConstraint("owner", "name"),
    )
    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(64), nullable=False, unique=True),
        sa.Column("backend", sa.String(32), nullable=False),
        sa.Column("bytes", sa.BigInteger),
        sa.Column("files", sa.Integer),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.Column("deleted", sa.DateTime),
    )
    op.create_table(
        "executions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("workspace_id", sa.Integer, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("executions.id")),
        sa.Column("restored_from_id", sa.Integer, sa.ForeignKey("executions.id")),
        sa.Column("state", sa.String(32), nullable=False, index=True),
        sa.Column("stop_reason", sa.String(32)),
        sa.Column("stop_detail", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("image", sa.String(512)),
        sa.Column("container_id", sa.String(128)),
        sa.Column("node", sa.String(255)),
        sa.Column("live_key", sa.String(64), nullable=False, unique=True),
        sa.Column("snapshot_key", sa.String(64), nullable=False, unique=True),
        sa.Column("snapshot_id", sa.Integer, sa.ForeignKey("snapshots.id")),
        sa.Column("restore_bytes", sa.BigInteger),
        sa.Column("restore_files", sa.Integer),
        sa.Column("restore_seconds", sa.Float),
        sa.Column("save_bytes", sa.BigInteger),
        sa.Column("save_files", sa.Integer),
        sa.Column("save_seconds", sa.Float),
        sa.Column("save_progress", sa.JSON),
        sa.Column("lease_owner", sa.String(128)),
        sa.Column("lease_until", sa.DateTime),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.Column("started", sa.DateTime),
        sa.Column("stopped", sa.DateTime),
        sa.UniqueConstraint("workspace_id", "number"),
    )
    op.create_table(
        "transitions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("execution_id", sa.Integer, sa.ForeignKey("executions.id"), nullable=False, index=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("message", sa.Text),
    )


def downgrade():
    for table in ("transitions", "executions", "snapshots", "workspaces"):
        op.drop_table(table)
