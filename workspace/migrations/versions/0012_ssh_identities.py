"""The SSH identities the platform makes: each workspace's host key, each owner's key pair (#16).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "workspace_host_keys",
        sa.Column("workspace_id", sa.Integer, sa.ForeignKey("workspaces.id"), primary_key=True),
        sa.Column("private_key", sa.Text, nullable=False),
        sa.Column("public_key", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("created", sa.DateTime, nullable=False),
    )
    op.create_table(
        "owner_key_pairs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("owner", sa.String(255), nullable=False, unique=True),
        sa.Column("private_key", sa.Text, nullable=False),
        sa.Column("public_key", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("created", sa.DateTime, nullable=False),
    )


def downgrade():
    op.drop_table("owner_key_pairs")
    op.drop_table("workspace_host_keys")
