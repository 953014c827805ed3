"""A user's webhook (#17): the URL called when one of their tasks ends, its signing secret, the last result.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "webhooks",
        sa.Column("owner", sa.String(255), primary_key=True),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.String(64), nullable=False),
        sa.Column("updated", sa.DateTime(), nullable=False),
        sa.Column("last_sent", sa.DateTime(), nullable=True),
        sa.Column("last_result", sa.Text(), nullable=True),
    )


def downgrade():
    op.drop_table("webhooks")
