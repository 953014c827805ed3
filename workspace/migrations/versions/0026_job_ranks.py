"""Jobs over several nodes (#31): ranks 1..N-1 of a job (rank 0 is its execution), each with where
admission placed it (node, GPUs), its container and how it ended.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "job_ranks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("execution_id", sa.Integer(), sa.ForeignKey("executions.id"), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(255), nullable=True),
        sa.Column("gpu_ids", sa.JSON(), nullable=True),
        sa.Column("container_id", sa.String(128), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("ended", sa.DateTime(), nullable=True),
        sa.UniqueConstraint("execution_id", "rank"),
    )
    op.create_index("ix_job_ranks_execution_id", "job_ranks", ["execution_id"])


def downgrade():
    op.drop_table("job_ranks")
