"""Storage quotas, home size limits and accounting.

- `storage_usage`: each user's measured footprint (snapshots and dataset versions they own).
- executions: the CPU cores and home size limit they ran with (for accounting and the culler).
- usage_samples: the home's size at each sample.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "storage_usage",
        sa.Column("owner", sa.String(255), primary_key=True),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("files", sa.Integer, nullable=False),
        sa.Column("items", sa.JSON, nullable=True),
        sa.Column("measured_at", sa.DateTime, nullable=False),
    )
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("cpu", sa.Float, nullable=True))
        batch.add_column(sa.Column("home_limit", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("cleanup", sa.Boolean, nullable=True))
    with op.batch_alter_table("usage_samples") as batch:
        batch.add_column(sa.Column("home_bytes", sa.BigInteger, nullable=True))


def downgrade():
    with op.batch_alter_table("usage_samples") as batch:
        batch.drop_column("home_bytes")
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("cleanup")
        batch.drop_column("home_limit")
        batch.drop_column("cpu")
    op.drop_table("storage_usage")
