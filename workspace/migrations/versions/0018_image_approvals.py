"""Approvals of users' images (#28): one build of an image approved for everyone or one course, by whom, when.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "image_approvals",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("image_id", sa.Integer(), sa.ForeignKey("user_images.id", ondelete="CASCADE"), nullable=False),
        sa.Column("audience", sa.String(300), nullable=False),
        sa.Column("ref", sa.String(255), nullable=False),
        sa.Column("build", sa.Integer(), nullable=False),
        sa.Column("approver", sa.String(255), nullable=False),
        sa.Column("approved", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("image_id", "audience"),
    )
    op.create_index("ix_image_approvals_image_id", "image_approvals", ["image_id"])


def downgrade():
    op.drop_table("image_approvals")
