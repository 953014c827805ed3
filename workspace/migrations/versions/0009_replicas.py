"""Where a saved output lives and whether it is replicated to the store of record.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("node", sa.String(255), nullable=True))
        batch.add_column(sa.Column("replicated_at", sa.DateTime, nullable=True))
        batch.add_column(sa.Column("replica_bytes", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("replica_error", sa.Text, nullable=True))
        # the outputs still waiting for the store of record are looked up at every metrics scrape
        batch.create_index("ix_snapshots_replicated_at", ["replicated_at"])


def downgrade():
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_index("ix_snapshots_replicated_at")
        for column in ("replica_error", "replica_bytes", "replicated_at", "node"):
            batch.drop_column(column)
