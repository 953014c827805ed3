"""Where an execution's sshd answers the SSH gateway (#16): host:port, recorded by the spawner.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("ssh_address", sa.String(255), nullable=True))


def downgrade():
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("ssh_address")
