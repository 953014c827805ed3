"""Alembic environment: runs migrations on the connection given by workspace.db.upgrade()."""

from alembic import context

from workspace.db import Base
import workspace.executions  # noqa: F401  (registers the models on Base.metadata)

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
