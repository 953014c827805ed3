"""Deployments (#33): a saved output served behind /serve/OWNER/NAME/, its versions, replicas, API keys and
traffic.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "deployments",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", sa.String(12), nullable=False, unique=True),
        sa.Column("owner", sa.String(255), nullable=False, index=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("access", sa.String(16), nullable=False),
        sa.Column("course", sa.String(255), nullable=True),
        sa.Column("replicas", sa.Integer(), nullable=False),
        sa.Column("resource_type", sa.String(64), nullable=True),
        sa.Column("running", sa.Boolean(), nullable=False),
        sa.Column("serving", sa.Integer(), nullable=True),
        sa.Column("rolling", sa.Integer(), nullable=True),
        sa.Column("rolling_since", sa.DateTime(), nullable=True),
        sa.Column("idle_seconds", sa.Integer(), nullable=True),
        sa.Column("asleep", sa.Boolean(), nullable=False),
        sa.Column("woken", sa.DateTime(), nullable=True),
        sa.Column("last_request", sa.DateTime(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("restarts", sa.Integer(), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("failures", sa.BigInteger(), nullable=False),
        sa.Column("latency_buckets", sa.JSON(), nullable=True),
        sa.Column("latency_sum", sa.Float(), nullable=False),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("deleted", sa.DateTime(), nullable=True),
        sa.UniqueConstraint("owner", "name"),
    )
    op.create_table(
        "deployment_versions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("deployment_id", sa.Integer(), sa.ForeignKey("deployments.id"), nullable=False, index=True),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(512), nullable=False),
        sa.Column("source_kind", sa.String(16), nullable=False),
        sa.Column("source_key", sa.String(64), nullable=False),
        sa.Column("execution_id", sa.Integer(), sa.ForeignKey("executions.id"), nullable=True, index=True),
        sa.Column("dataset_version_id", sa.Integer(), sa.ForeignKey("dataset_versions.id"), nullable=True),
        sa.Column("image", sa.String(512), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("ready_path", sa.String(512), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("failure", sa.Text(), nullable=True),
        sa.Column("failed_starts", sa.Integer(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("deployment_id", "number"),
    )
    op.create_table(
        "deployment_replicas",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("deployment_id", sa.Integer(), sa.ForeignKey("deployments.id"), nullable=False, index=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("server", sa.String(64), nullable=False, unique=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("address", sa.String(255), nullable=True),
        sa.Column("node", sa.String(255), nullable=True),
        sa.Column("restarts", sa.Integer(), nullable=False),
        sa.Column("failed_checks", sa.Integer(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("ready_at", sa.DateTime(), nullable=True),
        sa.Column("ended", sa.DateTime(), nullable=True),
        sa.Column("not_before", sa.DateTime(), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
    )
    op.create_table(
        "deployment_keys",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("deployment_id", sa.Integer(), sa.ForeignKey("deployments.id"), nullable=False, index=True),
        sa.Column("label", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("revoked", sa.DateTime(), nullable=True),
        sa.Column("last_used", sa.DateTime(), nullable=True),
    )
    op.create_table(
        "deployment_traffic",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("deployment_id", sa.Integer(), sa.ForeignKey("deployments.id"), nullable=False, index=True),
        sa.Column("minute", sa.DateTime(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("latency_buckets", sa.JSON(), nullable=False),
        sa.Column("latency_sum", sa.Float(), nullable=False),
        sa.UniqueConstraint("deployment_id", "minute"),
    )


def downgrade():
    op.drop_table("deployment_traffic")
    op.drop_table("deployment_keys")
    op.drop_table("deployment_replicas")
    op.drop_table("deployment_versions")
    op.drop_table("deployments")
