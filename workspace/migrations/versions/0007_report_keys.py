"""Report keys: the culler authenticates to a workspace with the execution's own secret, not a hub token.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("report_key", sa.String(64), nullable=True))


def downgrade():
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("report_key")
