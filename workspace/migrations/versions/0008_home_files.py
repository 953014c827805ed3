"""Home file-count limits: how many files an execution's home may hold (the culler warns, the next start enforces).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("home_files", sa.BigInteger, nullable=True))


def downgrade():
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("home_files")
