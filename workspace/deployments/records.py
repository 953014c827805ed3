"""The records of deployments (#33): a deployment, its versions, its replicas and its API keys.

A **deployment** is an owner's named service (`/serve/OWNER/NAME/`): who may reach it, how many replicas
it wants, whether it should run, and which of its versions serves (`serving`) or is being rolled out
(`rolling`). A **version** is what runs: the saved output (or dataset version) mounted read-only at
/openbayes/output, the image, the command, the port the command listens on and the readiness path;
versions are numbered 1, 2, … and never change, so "back to version 2" is a new rollout of it.

A **replica** is one JupyterHub named server (`serve-<12 hex>`) running a version; its executions are
those of the deployment's hidden workspace (`deploy-<key>`, Execution.server = the replica's server).
The controller (controller.py) writes the replicas' states; the spawner writes where a replica's app
answers (`address`, never the container's own word); the router (workspace/router/) reads which
replicas are `ready`.

An **API key** is stored as its SHA-256 only, shown once, revocable.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets

from sqlalchemy import JSON, BigInteger, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint, select
from sqlalchemy.orm import Mapped, Session, mapped_column, relationship

from workspace import i18n
from workspace.db import Base, iso, utcnow
from workspace.executions import DEPLOY_WORKSPACE  # noqa: F401  (the deployment's hidden workspace)

# a replica's JupyterHub server (not a name a user may give: executions.RESERVED_NAME)
SERVE_SERVER = re.compile(r"^serve-[0-9a-f]{12}$")
ACCESS = ("private", "course", "public")

# replica states: waiting (recorded; its server is asked for once `not_before` has passed: the backoff of a
# replica that died soon after its start), starting (its server was asked for; not yet answering its
# readiness path), ready (answers: the router sends it requests), unready (was ready and stopped answering:
# no requests until it answers again), draining (out of the router's table; its server is stopped once
# `not_before` has passed, so that the requests it answers finish), stopping (its server was asked to stop)
LIVE = ("waiting", "starting", "ready", "unready")
ENDING = ("draining", "stopping")


def new_key() -> str:
    return secrets.token_hex(6)


def workspace_name(key: str) -> str:
    """The hidden workspace whose executions a deployment's replicas are."""
    return f"deploy-{key}"


class Deployment(Base):
    __tablename__ = "deployments"
    __table_args__ = (UniqueConstraint("owner", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(12), unique=True, default=new_key)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(63))
    access: Mapped[str] = mapped_column(String(16), default="private")
    course: Mapped[str | None] = mapped_column(String(255), nullable=True)  # its group, for access "course"
    replicas: Mapped[int] = mapped_column(Integer, default=1)  # wanted
    resource_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    running: Mapped[bool] = mapped_column(default=True)  # wanted: the owner's start/stop
    serving: Mapped[int | None] = mapped_column(Integer, nullable=True)  # the version that serves
    rolling: Mapped[int | None] = mapped_column(Integer, nullable=True)  # the version being rolled out
    rolling_since: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    # scale to zero: replicas stop after this many seconds without a request (None: never); `asleep` while
    # they are stopped for it, `woken` when a request asked for them again
    idle_seconds: Mapped[int | None] = mapped_column(Integer, nullable=True)
    asleep: Mapped[bool] = mapped_column(default=False)
    woken: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    last_request: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    # the controller's last word on it for its owner (a rollout that failed, a start the hub refused), kept
    # to be said in the reader's language (i18n.kept)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    restarts: Mapped[int] = mapped_column(Integer, default=0)  # replicas restarted after they died, in all
    # traffic, summed by the router (Prometheus histograms are cumulative): requests, failures (5xx or no
    # answer), the latency buckets' counts (router.BUCKETS) and the seconds in all
    requests: Mapped[int] = mapped_column(BigInteger, default=0)
    failures: Mapped[int] = mapped_column(BigInteger, default=0)
    latency_buckets: Mapped[list | None] = mapped_column(JSON, nullable=True)
    latency_sum: Mapped[float] = mapped_column(Float, default=0.0)
    # the controller that works on it now (one at a time: a lease, as replicas.py's sender)
    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_until: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    # asked to be deleted: the controller stops its replicas, then removes its records
    deleted: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)

    versions: Mapped[list[DeploymentVersion]] = relationship(
        back_populates="deployment", order_by="DeploymentVersion.number", cascade="all, delete-orphan"
    )
    replica_records: Mapped[list[Replica]] = relationship(
        back_populates="deployment", order_by="Replica.id", cascade="all, delete-orphan"
    )
    keys: Mapped[list[DeploymentKey]] = relationship(
        back_populates="deployment", order_by="DeploymentKey.id", cascade="all, delete-orphan"
    )

    @property
    def workspace(self) -> str:
        return workspace_name(self.key)

    def version(self, number: int | None) -> DeploymentVersion | None:
        return next((v for v in self.versions if v.number == number), None)

    def replicas_of(self, number: int | None) -> list[Replica]:
        return [r for r in self.replica_records if r.version == number]

    @property
    def ready_replicas(self) -> list[Replica]:
        """The serving version's replicas that answer: those the router sends requests to."""
        return [r for r in self.replicas_of(self.serving) if r.state == "ready" and r.address is not None]

    @property
    def status(self) -> str:
        """One word for its state: serving, updating, starting, unavailable (serves, but no replica is
        ready), asleep, stopped, failed (nothing serves: its versions failed), deleting."""
        if self.deleted is not None:
            return "deleting"
        if not self.running:
            return "stopped"
        if self.asleep:
            return "asleep"
        if self.rolling is not None:
            return "updating" if self.serving is not None else "starting"
        if self.serving is None:
            return "failed"
        return "serving" if self.ready_replicas else "unavailable"

    def as_dict(self, locale: str = i18n.DEFAULT) -> dict:
        serving = self.version(self.serving)
        return {
            "name": self.name,
            "status": self.status,
            "owner": self.owner,
            "access": self.access,
            "course": self.course,
            "replicas": self.replicas,
            "resource_type": self.resource_type,
            "running": self.running,
            "asleep": self.asleep,
            "idle_seconds": self.idle_seconds,
            "serving": self.serving,
            "rolling": self.rolling,
            "message": i18n.said(locale, self.message),
            "address": f"/serve/{self.owner}/{self.name}/",
            "restarts": self.restarts,
            "ready": len(self.ready_replicas),
            "source": serving.source if serving else None,
            "requests": self.requests,
            "failures": self.failures,
            "last_request": iso(self.last_request),
            "created": iso(self.created),
        }


class DeploymentVersion(Base):
    __tablename__ = "deployment_versions"
    __table_args__ = (UniqueConstraint("deployment_id", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployments.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(512))  # as the user named it: "mnist#3", "alice/digits:2"
    # what is mounted: the output's snapshot (kind "output") or the dataset version's tree ("dataset")
    source_kind: Mapped[str] = mapped_column(String(16))
    source_key: Mapped[str] = mapped_column(String(64))
    execution_id: Mapped[int | None] = mapped_column(ForeignKey("executions.id"), nullable=True, index=True)
    dataset_version_id: Mapped[int | None] = mapped_column(ForeignKey("dataset_versions.id"), nullable=True)
    image: Mapped[str] = mapped_column(String(512))
    command: Mapped[str] = mapped_column(Text)
    port: Mapped[int] = mapped_column(Integer)
    ready_path: Mapped[str] = mapped_column(String(512), default="/")
    # new (not yet served), serving, failed (its rollout never became ready: the reason), retired
    state: Mapped[str] = mapped_column(String(16), default="new")
    failure: Mapped[str | None] = mapped_column(Text, nullable=True)  # as Deployment.message
    failed_starts: Mapped[int] = mapped_column(Integer, default=0)  # its replicas that ended before ready
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)

    deployment: Mapped[Deployment] = relationship(back_populates="versions")

    def as_dict(self) -> dict:
        return {
            "version": self.number,
            "source": self.source,
            "image": self.image,
            "command": self.command,
            "port": self.port,
            "ready_path": self.ready_path,
            "state": self.state,
            "failure": self.failure,
            "created": iso(self.created),
        }


class Replica(Base):
    __tablename__ = "deployment_replicas"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployments.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    server: Mapped[str] = mapped_column(String(64), unique=True)
    state: Mapped[str] = mapped_column(String(16), default="starting")
    # where its app answers (host:port), written by the spawner once its container runs
    address: Mapped[str | None] = mapped_column(String(255), nullable=True)
    node: Mapped[str | None] = mapped_column(String(255), nullable=True)
    restarts: Mapped[int] = mapped_column(Integer, default=0)  # of the replicas it replaces, in a row
    failed_checks: Mapped[int] = mapped_column(Integer, default=0)  # readiness checks failed in a row
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    ready_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    ended: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)  # its server stopped
    # waiting: its server is asked for from then on; draining: its server is stopped from then on
    not_before: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)  # as Deployment.message

    deployment: Mapped[Deployment] = relationship(back_populates="replica_records")


class DeploymentKey(Base):
    __tablename__ = "deployment_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployments.id"), index=True)
    label: Mapped[str] = mapped_column(String(64))
    prefix: Mapped[str] = mapped_column(String(16))  # its first characters, to tell keys apart on the page
    digest: Mapped[str] = mapped_column(String(64), unique=True)  # SHA-256 (hex) of the key
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    revoked: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    last_used: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)

    deployment: Mapped[Deployment] = relationship(back_populates="keys")

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "label": self.label,
            "prefix": self.prefix,
            "created": iso(self.created),
            "revoked": iso(self.revoked),
            "last_used": iso(self.last_used),
        }


def find(session: Session, owner: str, name: str) -> Deployment | None:
    return session.scalar(select(Deployment).where(Deployment.owner == owner, Deployment.name == name))


def by_key(session: Session, key: str) -> Deployment | None:
    return session.scalar(select(Deployment).where(Deployment.key == key))


def replica_by_server(session: Session, server: str) -> Replica | None:
    return session.scalar(select(Replica).where(Replica.server == server))


class DeploymentTraffic(Base):
    """A deployment's requests in one minute (the router's counts): its page's chart. Kept a day."""

    __tablename__ = "deployment_traffic"
    __table_args__ = (UniqueConstraint("deployment_id", "minute"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployments.id"), index=True)
    minute: Mapped[dt.datetime] = mapped_column(DateTime)
    requests: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    latency_buckets: Mapped[list] = mapped_column(JSON)  # counts per bucket of BUCKETS (not cumulative)
    latency_sum: Mapped[float] = mapped_column(Float, default=0.0)


# the latency histogram's upper bounds (seconds); the last bucket is everything slower
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
