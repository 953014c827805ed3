"""The language an execution was started in (#19): what the culler says to it, and its stop's evidence, are
said in it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("locale", sa.String(16), nullable=True))


def downgrade():
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("locale")
