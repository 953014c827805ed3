"""Users' SSH public keys (workspace/ssh_keys.py, #16).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "ssh_keys",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("comment", sa.String(100), nullable=False),
        sa.Column("added", sa.DateTime, nullable=False),
        sa.Column("last_used", sa.DateTime, nullable=True),
        sa.UniqueConstraint("owner", "fingerprint"),
    )
    op.create_index("ix_ssh_keys_owner", "ssh_keys", ["owner"])
    op.create_index("ix_ssh_keys_fingerprint", "ssh_keys", ["fingerprint"])


def downgrade():
    op.drop_table("ssh_keys")
