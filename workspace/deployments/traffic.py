"""A deployment's traffic (#33): requests, failures and latency, counted by the router and written here
every few seconds, read by its page's chart and by the Prometheus metrics.

The router keeps a `Counts` per deployment in memory and `record`s them together: each deployment's
totals (cumulative, as Prometheus' counters and histograms are) and its row of the minute (the chart's;
kept `KEEP`). Latency is the router's: from the request's arrival to the response's last byte.
"""

from __future__ import annotations

import bisect
import datetime as dt
from dataclasses import dataclass, field

from sqlalchemy import delete, select
from sqlalchemy.orm import selectinload

from workspace.db import Database, iso, utcnow

from .deployment import owned
from .records import BUCKETS, Deployment, DeploymentTraffic

KEEP = dt.timedelta(days=1)


@dataclass
class Counts:
    requests: int = 0
    failures: int = 0  # answered 5xx, or not at all
    buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    seconds: float = 0.0
    last: dt.datetime | None = None  # the newest request's time

    def add(self, seconds: float, failed: bool, at: dt.datetime) -> None:
        self.requests += 1
        self.failures += int(failed)
        self.buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.seconds += seconds
        self.last = at

    def merge(self, other: Counts) -> None:
        """Add `other`'s counts (a write that failed: they go with the next one)."""
        self.requests += other.requests
        self.failures += other.failures
        self.buckets = _added(self.buckets, other.buckets)
        self.seconds += other.seconds
        self.last = max(filter(None, (self.last, other.last)), default=None)


def record(db: Database, counts: dict[int, Counts]) -> None:
    """Add the router's counts (deployment id -> Counts) to the totals and to the minute's rows (blocking)."""
    minute = utcnow().replace(second=0, microsecond=0)
    with db.session() as s:
        for dep_id, c in counts.items():
            dep = s.get(Deployment, dep_id)
            if dep is None:
                continue
            dep.requests = (dep.requests or 0) + c.requests
            dep.failures = (dep.failures or 0) + c.failures
            dep.latency_sum = (dep.latency_sum or 0.0) + c.seconds
            dep.latency_buckets = _added(dep.latency_buckets, c.buckets)
            if c.last is not None and (dep.last_request is None or c.last > dep.last_request):
                dep.last_request = c.last
            row = s.scalar(
                select(DeploymentTraffic).where(
                    DeploymentTraffic.deployment_id == dep_id, DeploymentTraffic.minute == minute
                )
            )
            if row is None:
                row = DeploymentTraffic(deployment_id=dep_id, minute=minute, latency_buckets=[0] * len(c.buckets))
                s.add(row)
            row.requests = (row.requests or 0) + c.requests
            row.failures = (row.failures or 0) + c.failures
            row.latency_sum = (row.latency_sum or 0.0) + c.seconds
            row.latency_buckets = _added(row.latency_buckets, c.buckets)
        s.execute(delete(DeploymentTraffic).where(DeploymentTraffic.minute < minute - KEEP))


def _added(old: list | None, more: list[int]) -> list[int]:
    old = list(old or [])
    old += [0] * (len(more) - len(old))
    return [a + b for a, b in zip(old, more)]


def quantile(buckets: list[int], q: float) -> float | None:
    """The `q` quantile of a histogram's counts, as the upper bound of its bucket (None: no requests)."""
    total = sum(buckets)
    if not total:
        return None
    seen = 0
    for i, count in enumerate(buckets):
        seen += count
        if seen >= q * total:
            return BUCKETS[i] if i < len(BUCKETS) else float("inf")
    return None


def series(db: Database, owner: str, name: str, minutes: int = 60) -> dict:
    """Its last `minutes` minutes, one point a minute with traffic: requests, failures, p50 and p99 (s)."""
    since = utcnow().replace(second=0, microsecond=0) - dt.timedelta(minutes=minutes)
    with db.session() as s:
        dep = owned(s, owner, name)
        rows = s.scalars(
            select(DeploymentTraffic)
            .where(DeploymentTraffic.deployment_id == dep.id, DeploymentTraffic.minute >= since)
            .order_by(DeploymentTraffic.minute)
        )
        points = [
            {
                "minute": iso(r.minute),
                "requests": r.requests,
                "failures": r.failures,
                "p50": quantile(r.latency_buckets, 0.5),
                "p99": quantile(r.latency_buckets, 0.99),
            }
            for r in rows
        ]
        return {"buckets": list(BUCKETS), "points": points, "requests": dep.requests, "failures": dep.failures}


def totals(db: Database) -> list[dict]:
    """Every deployment's totals, for the Prometheus metrics (by its key: no user's name)."""
    with db.session() as s:
        return [
            {
                "key": d.key,
                "requests": d.requests or 0,
                "failures": d.failures or 0,
                "buckets": _added(d.latency_buckets, [0] * (len(BUCKETS) + 1)),
                "seconds": d.latency_sum or 0.0,
                "ready": len(d.ready_replicas),
            }
            for d in s.scalars(
                select(Deployment).where(Deployment.deleted.is_(None)).options(selectinload(Deployment.replica_records))
            )
        ]
