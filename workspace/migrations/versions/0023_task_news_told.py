"""Whether a task's end was told (#17, #30): in the record, so a culler that restarts tells what ended
while it was away, and nothing twice.

Before, the culler told what ended after its first look; a task that ended while it started again (a
hub's restart, an upgrade; or a loaded machine's slow start) was never told. The ends recorded before
this revision count as told.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("news_told", sa.DateTime(), nullable=True))
    op.execute("UPDATE executions SET news_told = stopped WHERE kind = 'task' AND stopped IS NOT NULL")


def downgrade():
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("news_told")
