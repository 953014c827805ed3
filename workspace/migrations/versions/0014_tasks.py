"""Tasks (#17): an execution's kind and command, its exit code, and how much of its log was written and kept.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("kind", sa.String(16), nullable=False, server_default="workspace"))
        batch.add_column(sa.Column("command", sa.Text(), nullable=True))
        batch.add_column(sa.Column("exit_code", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("log_bytes", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("log_kept", sa.BigInteger(), nullable=True))


def downgrade():
    with op.batch_alter_table("executions") as batch:
        for column in ("log_kept", "log_bytes", "exit_code", "command", "kind"):
            batch.drop_column(column)
