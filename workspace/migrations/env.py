"""Alembic environment: runs migrations on the connection given by workspace.db.upgrade()."""

from alembic import context

import workspace.courses  # noqa: F401  (the models register on Base.metadata)
import workspace.datasets  # noqa: F401
import workspace.deployments.records  # noqa: F401
import workspace.executions  # noqa: F401
import workspace.images.user  # noqa: F401
import workspace.labelling.projects  # noqa: F401
import workspace.limits.quotas  # noqa: F401
import workspace.prewarm.assignment  # noqa: F401
import workspace.ssh_identities  # noqa: F401
import workspace.ssh_keys  # noqa: F401
import workspace.webhooks  # noqa: F401
from workspace.db import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
