"""Where a course's pre-warm brought each student's home (#30): the node their next start is placed on.

One row per workspace (owner, name): the course, the node and the snapshot brought there. Admission
prefers the nodes holding a start's snapshot; of those the spawner names this node first, while the
snapshot is still the one the start restores (workspace/prewarm/assignment.py).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "prewarmed_homes",
        sa.Column("owner", sa.String(255), primary_key=True),
        sa.Column("workspace", sa.String(255), primary_key=True),
        sa.Column("course", sa.String(255), nullable=False),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("snapshot", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
    )


def downgrade():
    op.drop_table("prewarmed_homes")
