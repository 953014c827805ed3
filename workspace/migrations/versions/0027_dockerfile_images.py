"""Images built from a user's Dockerfile (#32): the Dockerfile as sent, and what its build keeps besides
the script (the ENV and LABEL values for the image, the context's archive until the build has run).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("user_images") as batch:
        batch.add_column(sa.Column("dockerfile", sa.Text(), nullable=True))
        batch.add_column(sa.Column("config", sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table("user_images") as batch:
        batch.drop_column("config")
        batch.drop_column("dockerfile")
