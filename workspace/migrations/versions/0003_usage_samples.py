"""Usage samples of executions (one a minute, taken by the culler).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "usage_samples",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("execution_id", sa.Integer, sa.ForeignKey("executions.id"), nullable=False, index=True),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("cpu_percent", sa.Float, nullable=True),
        sa.Column("memory_bytes", sa.BigInteger, nullable=True),
        sa.Column("gpu_percent", sa.Float, nullable=True),
        sa.Column("gpu_memory_bytes", sa.BigInteger, nullable=True),
        sa.Column("browser", sa.Boolean, nullable=True),
    )


def downgrade():
    op.drop_table("usage_samples")
