"""Sweeps (#31): one command run once per combination of parameters, each run beside the workspace.

`sweeps`: the sweep of a workspace (its number, command template, parameters, when it was cancelled);
`sweep_runs`: one combination each, the JupyterHub server its run was started on (its execution's
`server`), its parameters and command, and the hub's sentence where its start was refused.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("workspace_id", sa.Integer(), sa.ForeignKey("workspaces.id"), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("cancelled", sa.DateTime(), nullable=True),
        sa.UniqueConstraint("workspace_id", "number"),
    )
    op.create_index("ix_sweeps_workspace_id", "sweeps", ["workspace_id"])
    op.create_table(
        "sweep_runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("sweep_id", sa.Integer(), sa.ForeignKey("sweeps.id"), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("server", sa.String(64), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("refused", sa.Text(), nullable=True),
    )
    op.create_index("ix_sweep_runs_sweep_id", "sweep_runs", ["sweep_id"])
    op.create_index("ix_sweep_runs_server", "sweep_runs", ["server"])


def downgrade():
    op.drop_table("sweep_runs")
    op.drop_table("sweeps")
