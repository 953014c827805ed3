"""Executions record their resource type, the GPU device IDs they hold, and their maximum run time.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("resource_type", sa.String(64), nullable=True))
        batch.add_column(sa.Column("gpu_ids", sa.JSON, nullable=True))
        batch.add_column(sa.Column("max_runtime", sa.Float, nullable=True))
        batch.create_index("ix_executions_resource_type", ["resource_type"])


def downgrade():
    with op.batch_alter_table("executions") as batch:
        batch.drop_index("ix_executions_resource_type")
        batch.drop_column("max_runtime")
        batch.drop_column("gpu_ids")
        batch.drop_column("resource_type")
