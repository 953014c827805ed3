"""Courses: a class provisioned from a roster, with the workspace each student gets and its starter.

- `courses`: the JupyterHub group's workspace template (workspace name, resource type, image, datasets)
  and the starter (an instructor's execution whose output each student's first start restores).
- workspaces: the course a workspace was provisioned for.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "courses",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("workspace", sa.String(255), nullable=False),
        sa.Column("resource_type", sa.String(64), nullable=True),
        sa.Column("image", sa.String(512), nullable=True),
        sa.Column("datasets", sa.JSON, nullable=True),
        sa.Column("starter_id", sa.Integer, sa.ForeignKey("executions.id"), nullable=True),
        sa.Column("updated_by", sa.String(255), nullable=True),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.Column("updated", sa.DateTime, nullable=False),
    )
    with op.batch_alter_table("workspaces") as batch:
        batch.add_column(sa.Column("course", sa.String(255), nullable=True))


def downgrade():
    with op.batch_alter_table("workspaces") as batch:
        batch.drop_column("course")
    op.drop_table("courses")
