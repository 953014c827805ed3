"""When an execution was admitted and when it was ready (#30): a node brings up only so many at once.

`admitted`: it left the queue (its start-up began); `ready`: its server answered (a task: its container ran).
An execution admitted and not yet ready holds one of its node's start-up slots (workspace/limits/queue.py);
the time between the two is what the queue's estimate of a start-up is made of. Executions that ran
before this revision count as ready since they started.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("admitted", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("ready", sa.DateTime(), nullable=True))
        # the queue's estimate reads the newest ready start-ups at every look of every waiting start
        batch.create_index("ix_executions_ready", ["ready"])
    op.execute("UPDATE executions SET ready = started WHERE started IS NOT NULL")


def downgrade():
    with op.batch_alter_table("executions") as batch:
        batch.drop_index("ix_executions_ready")
        batch.drop_column("ready")
        batch.drop_column("admitted")
