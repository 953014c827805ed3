"""Secrets sealed at rest (#28): owners' and workspaces' SSH private keys, webhook secrets, report keys.

The rows written before are sealed here with the key the database was opened with (workspace/vault.py);
the two columns of 64 characters become text, as a sealed value is longer.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

from workspace import vault

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

# (table, primary key, secret column)
SECRETS = (
    ("workspace_host_keys", "workspace_id", "private_key"),
    ("owner_key_pairs", "id", "private_key"),
    ("webhooks", "owner", "secret"),
    ("executions", "id", "report_key"),
)


def upgrade():
    with op.batch_alter_table("webhooks") as batch:
        batch.alter_column("secret", type_=sa.Text(), existing_type=sa.String(64), existing_nullable=False)
    with op.batch_alter_table("executions") as batch:
        batch.alter_column("report_key", type_=sa.Text(), existing_type=sa.String(64), existing_nullable=True)
    _rewrite(lambda v, value: value if vault.is_sealed(value) else v.seal(value))


def downgrade():
    _rewrite(lambda v, value: v.open(value) if vault.is_sealed(value) else value)
    with op.batch_alter_table("executions") as batch:
        batch.alter_column("report_key", type_=sa.String(64), existing_type=sa.Text(), existing_nullable=True)
    with op.batch_alter_table("webhooks") as batch:
        batch.alter_column("secret", type_=sa.String(64), existing_type=sa.Text(), existing_nullable=False)


def _rewrite(change):
    conn = op.get_bind()
    for table, key, column in SECRETS:
        rows = conn.execute(sa.text(f"SELECT {key}, {column} FROM {table} WHERE {column} IS NOT NULL")).all()
        if not rows:
            continue
        v = vault.of(conn.dialect)  # raises with a sentence when the database was opened without the key
        for row_key, value in rows:
            conn.execute(
                sa.text(f"UPDATE {table} SET {column} = :value WHERE {key} = :key"),
                {"value": change(v, value), "key": row_key},
            )
