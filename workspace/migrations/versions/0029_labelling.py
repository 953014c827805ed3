"""A course's labelling projects (#36): one Label Studio per project, its dataset version, its reviewers.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "labelling_projects",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", sa.String(12), nullable=False, unique=True),
        sa.Column("course", sa.String(255), nullable=False, index=True),
        sa.Column("title", sa.String(50), nullable=False),
        sa.Column("creator", sa.String(255), nullable=False),
        sa.Column("dataset", sa.String(512), nullable=False),
        sa.Column("dataset_version_id", sa.Integer(), sa.ForeignKey("dataset_versions.id"), nullable=False, index=True),
        sa.Column("dataset_key", sa.String(64), nullable=False),
        sa.Column("config", sa.Text(), nullable=False),
        sa.Column("reviewers", sa.JSON(), nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("deleted", sa.DateTime(), nullable=True),
    )


def downgrade():
    op.drop_table("labelling_projects")
