"""Images users define (#18): the definition, its build's state and the engine's image of the last success.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "user_images",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("base", sa.String(255), nullable=False),
        sa.Column("base_ref", sa.String(255), nullable=False),
        sa.Column("apt", sa.JSON(), nullable=False),
        sa.Column("pip", sa.Text(), nullable=False),
        sa.Column("script", sa.Text(), nullable=False),
        sa.Column("visibility", sa.String(300), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("progress", sa.String(300), nullable=True),
        sa.Column("build", sa.Integer(), nullable=False),
        sa.Column("ref", sa.String(255), nullable=True),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("versions", sa.JSON(), nullable=False),
        sa.Column("log_total", sa.BigInteger(), nullable=True),
        sa.Column("log_kept", sa.BigInteger(), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("started", sa.DateTime(), nullable=True),
        sa.Column("finished", sa.DateTime(), nullable=True),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("owner", "name"),
    )
    op.create_index("ix_user_images_owner", "user_images", ["owner"])


def downgrade():
    op.drop_table("user_images")
