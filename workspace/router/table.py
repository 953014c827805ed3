"""Where each deployment is served: its access rules, its keys and its ready replicas, read from the
records twice a second (`Table.refresh`), so that a new version, a dead replica or a revoked key changes
the routing within half a second, without the controller and the router talking to each other.

Only ready replicas of the serving version are in a route: a starting one, one being drained before it
stops, and one that failed its readiness checks get no request.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.orm import selectinload

from workspace.db import Database, utcnow
from workspace.deployments.records import Deployment, DeploymentKey

log = logging.getLogger("workspace.router")
SUSPECT = 10.0  # s a replica that could not be reached is passed over


@dataclass(frozen=True)
class Route:
    id: int
    key: str
    owner: str
    name: str
    access: str  # private, course or public
    course: str | None
    status: str  # records.Deployment.status: serving, updating, starting, asleep, stopped, ...
    replicas: tuple[str, ...]  # the addresses (host:port) of the serving version's ready replicas
    keys: frozenset[str] = frozenset()  # the SHA-256 of its API keys that are not revoked
    turn: itertools.count = field(default_factory=itertools.count, compare=False)

    @property
    def asleep(self) -> bool:
        return self.status == "asleep"

    def order(self) -> list[str]:
        """Its ready replicas, starting with the next one in turn (round robin); the rest to retry on."""
        if not self.replicas:
            return []
        first = next(self.turn) % len(self.replicas)
        return list(self.replicas[first:] + self.replicas[:first])


class Table:
    def __init__(self, db: Database):
        self.db = db
        self.routes: dict[tuple[str, str], Route] = {}
        self.changed = asyncio.Event()  # set at each refresh: a request waiting for a replica looks again
        self.suspects: dict[str, float] = {}  # address -> until when it is passed over

    def suspect(self, address: str) -> None:
        """A replica that could not be reached: passed over for `SUSPECT` seconds."""
        self.suspects[address] = time.monotonic() + SUSPECT

    def usable(self, addresses: list[str]) -> list[str]:
        """`addresses` with the suspect ones last (tried only when no other answers)."""
        now = time.monotonic()
        return sorted(addresses, key=lambda a: self.suspects.get(a, 0) > now)

    def get(self, owner: str, name: str) -> Route | None:
        return self.routes.get((owner, name))

    def owners(self) -> set[str]:
        """Everyone with a deployment (each has the proxy's route on their own host)."""
        return {owner for owner, _ in self.routes}

    def load(self) -> dict[tuple[str, str], Route]:
        """Every deployment's route (blocking)."""
        out = {}
        with self.db.session() as s:
            keys: dict[int, set[str]] = {}
            for dep_id, digest in s.execute(
                select(DeploymentKey.deployment_id, DeploymentKey.digest).where(DeploymentKey.revoked.is_(None))
            ):
                keys.setdefault(dep_id, set()).add(digest)
            live = (
                select(Deployment).where(Deployment.deleted.is_(None)).options(selectinload(Deployment.replica_records))
            )
            for dep in s.scalars(live):
                out[(dep.owner, dep.name)] = Route(
                    id=dep.id,
                    key=dep.key,
                    owner=dep.owner,
                    name=dep.name,
                    access=dep.access,
                    course=dep.course,
                    status=dep.status,
                    replicas=tuple(r.address for r in dep.ready_replicas),
                    keys=frozenset(keys.get(dep.id, ())),
                )
        return out

    async def refresh(self) -> None:
        fresh = await asyncio.get_running_loop().run_in_executor(None, self.load)
        for where, route in fresh.items():
            old = self.routes.get(where)
            if old is not None and old.replicas == route.replicas:
                object.__setattr__(route, "turn", old.turn)  # the round robin goes on where it was
        self.routes = fresh
        now = time.monotonic()
        self.suspects = {a: t for a, t in self.suspects.items() if t > now}
        self.changed.set()
        self.changed = asyncio.Event()

    async def keep_fresh(self, interval: float = 0.5) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:
                log.exception("reading the deployments failed; the routes stay as they were")
            await asyncio.sleep(interval)

    def wake(self, dep_id: int) -> None:
        """Ask the controller to start a deployment scaled to zero (blocking)."""
        with self.db.session() as s:
            s.execute(
                update(Deployment)
                .where(Deployment.id == dep_id, Deployment.asleep.is_(True), Deployment.woken.is_(None))
                .values(woken=utcnow())
            )
