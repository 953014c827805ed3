"""Datasets, their versions and shares; the datasets bound to an execution.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("owner", sa.String(255), nullable=False, index=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("visibility", sa.String(16), nullable=False),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.UniqueConstraint("owner", "name"),
    )
    op.create_table(
        "dataset_versions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("dataset_id", sa.Integer, sa.ForeignKey("datasets.id"), nullable=False, index=True),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("key", sa.String(64), nullable=False, unique=True),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("files", sa.Integer, nullable=False),
        sa.Column("creator", sa.String(255), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("origin_detail", sa.Text),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.Column("deleted", sa.DateTime),
        sa.UniqueConstraint("dataset_id", "number"),
    )
    op.create_table(
        "dataset_shares",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("dataset_id", sa.Integer, sa.ForeignKey("datasets.id"), nullable=False, index=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.UniqueConstraint("dataset_id", "kind", "principal"),
    )
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("datasets", sa.JSON))


def downgrade():
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("datasets")
    for table in ("dataset_shares", "dataset_versions", "datasets"):
        op.drop_table(table)
