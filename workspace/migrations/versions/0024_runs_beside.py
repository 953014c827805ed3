"""Runs beside a workspace (#31): an execution of the workspace started on a JupyterHub server of its
own (`run-<12 hex>`), so that it runs while the workspace is open and beside other runs.

`server` is that server's name (None: the workspace's own server, every execution before this revision);
`server_gone` when the hub's record of that server was removed after the run ended (the culler does it,
so that ended runs never fill a user's named-server limit).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("server", sa.String(64), nullable=True))
        batch.add_column(sa.Column("server_gone", sa.DateTime(), nullable=True))
        batch.create_index("ix_executions_server", ["server"])


def downgrade():
    with op.batch_alter_table("executions") as batch:
        batch.drop_index("ix_executions_server")
        batch.drop_column("server_gone")
        batch.drop_column("server")
