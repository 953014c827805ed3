"""Who sends an output to the store of record, and until when (#30): one sender at a time, by a lease.

A save sends its own output at once; the service sends what is left (a failed send, one whose sender
died). The lease replaces a five-minute wait before the service's turn (workspace/replicas.py).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("replica_sender", sa.String(255), nullable=True))
        batch.add_column(sa.Column("replica_until", sa.DateTime(), nullable=True))


def downgrade():
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("replica_until")
        batch.drop_column("replica_sender")
