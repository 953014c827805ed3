"""How long an output's send to the store of record took (the replication histogram of the metrics).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("replica_seconds", sa.Float, nullable=True))


def downgrade():
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("replica_seconds")
