"""Prometheus metrics of the platform, read from the workspace database at scrape time.

The hub process restores and saves homes and the workspace service serves the
scrape (GET /services/workspace/metrics, workspace/service/metrics_api.py):
counters kept in either process would miss what the other does and start again
at zero with it. The execution records are the truth, so every figure here is
read from them (or from the store's filesystem) when Prometheus asks:

    workspace_executions{state}                 gauge: executions in each state (every state, 0 included)
    workspace_queue_length{resource_type}       gauge: starts waiting in each type's queue
    workspace_log_followers                     gauge: logs followed now (the service's; each ends with its client)
    workspace_{restore,save}_duration_seconds   histogram: seconds per restore / save
    workspace_{restore,save}_size_bytes         histogram: bytes per restore / save
    workspace_{restore,save}_files              histogram: files per restore / save
    workspace_store_{size,used,available}_bytes{node}   gauge: the filesystem of each node's home store
    workspace_node_{up,executions,gpus,gpus_free}{node} gauge: each node: up, executions placed, its GPUs, free
    workspace_outputs_unreplicated, workspace_replication_lag_seconds   gauges (with a store of record)
    workspace_replication_duration_seconds      histogram: seconds per send to the store of record

No label carries a user's or a workspace's name: only states, resource types
(the site's configuration), the node and the histograms' `le`.

**Cost.** The queue is one GROUP BY over the queued executions (the `state`
index). The states and the histograms cover every execution ever recorded (the
histograms are counters, as Prometheus expects: `rate()` works), but a scrape
does not read every record: an execution's state and figures never change once
it has ended (`stopped`, `failed`), so the collector keeps the totals of the
ended executions in memory and each scrape reads only the executions created
since the previous one and those not ended yet (by primary key). All records
are aggregated in the database at the first scrape and again every
`refresh_every` seconds (an hour); that pass also takes in a record committed
out of id order (PostgreSQL), which the incremental reads skip. Sums are kept
as integers (milliseconds for seconds), so a re-aggregation in another order
never makes a counter go down. Measured on SQLite with a million executions
(300 unfinished): the full pass 2-3 s, a scrape after it under 30 ms.

**Replication and nodes.** The outputs waiting for the store of record and
the oldest one's age are read through the index on `replicated_at`; the
replication histogram is one aggregate over the snapshots that were sent
(a full pass of that index: about a tenth of a second per million). The nodes
are the engine's (workspace/store/nodes.py: one on a single host, the swarm's on a
cluster), asked at each scrape; a node's store is measured by statvfs, as the
hub's own.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString
from sqlalchemy import bindparam, case, func, or_, select

from workspace.db import Database, utcnow
from workspace.deployments import traffic
from workspace.deployments.records import BUCKETS
from workspace.executions import FINAL, STATES, Execution, Snapshot
from workspace.limits.fit import executions_per_node, used_gpus
from workspace.store.homes import filesystem

log = logging.getLogger(__name__)

# A restore or save on btrfs takes a fraction of a second whatever the size; a copying store, minutes.
SECONDS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
BYTES_BUCKETS = (1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12)  # 1 MB ... 1 TB
FILES_BUCKETS = (10, 100, 1e3, 1e4, 1e5, 1e6, 1e7)


@dataclass(frozen=True)
class Histogram:
    """A histogram of one statistics column of the execution records."""

    column: str  # Execution's attribute, e.g. "save_seconds"
    name: str
    buckets: tuple[float, ...]
    scale: int  # the sum is kept as an integer of value × scale (seconds: milliseconds, as recorded)
    help: str

    @property
    def attr(self):
        return getattr(Execution, self.column)


def _histograms() -> tuple[Histogram, ...]:
    out = []
    for op, what in (("restore", "restore of a home into a new execution"), ("save", "save of a home as its output")):
        every = f"every {op} since the database began, from the execution records"
        out += [
            Histogram(
                f"{op}_seconds",
                f"workspace_{op}_duration_seconds",
                SECONDS_BUCKETS,
                1000,
                f"Seconds per {what} ({every}).",
            ),
            Histogram(f"{op}_bytes", f"workspace_{op}_size_bytes", BYTES_BUCKETS, 1, f"Bytes per {what} ({every})."),
            Histogram(f"{op}_files", f"workspace_{op}_files", FILES_BUCKETS, 1, f"Files per {what} ({every})."),
        ]
    return tuple(out)


HISTOGRAMS = _histograms()


class Tally:
    """What a set of execution records adds up to: how many are in each state, and per histogram
    [how many ≤ each bucket..., how many, sum × scale]."""

    def __init__(self, values: dict[str, list[int]] | None = None, states: dict[str, int] | None = None):
        self.values = values or {h.name: [0] * (len(h.buckets) + 2) for h in HISTOGRAMS}
        self.states = states or {}

    def copy(self) -> "Tally":
        return Tally({k: list(v) for k, v in self.values.items()}, dict(self.states))

    def add(self, row) -> None:
        """Add one execution record (anything with `state` and the statistics columns as attributes)."""
        self.states[row.state] = self.states.get(row.state, 0) + 1
        for h in HISTOGRAMS:
            value = getattr(row, h.column)
            if value is None:
                continue
            counts = self.values[h.name]
            for i, bound in enumerate(h.buckets):
                if value <= bound:
                    counts[i] += 1
            counts[-2] += 1
            counts[-1] += round(value * h.scale)

    @classmethod
    def aggregate(cls, session, *where) -> "Tally":
        """The tally of the records matching `where`, counted by the database (one pass)."""
        columns = []
        for h in HISTOGRAMS:
            col = h.attr
            columns += [func.sum(case((col <= b, 1), else_=0)) for b in h.buckets]
            # integers: exact in any order (bytes summed as they are, past 2**53 too)
            columns += [func.count(col), func.sum(col) if h.scale == 1 else func.sum(func.round(col * h.scale))]
        row = session.execute(select(*columns).where(*where)).one()
        values, i = {}, 0
        for h in HISTOGRAMS:
            n = len(h.buckets) + 2
            values[h.name] = [int(v or 0) for v in row[i : i + n]]
            i += n
        states = session.execute(select(Execution.state, func.count()).where(*where).group_by(Execution.state))
        return cls(values, dict(states.all()))

    def families(self) -> list[Metric]:
        out = []
        for h in HISTOGRAMS:
            counts = self.values[h.name]
            buckets = [(floatToGoString(b), counts[i]) for i, b in enumerate(h.buckets)] + [("+Inf", counts[-2])]
            out.append(HistogramMetricFamily(h.name, h.help, buckets=buckets, sum_value=counts[-1] / h.scale))
        return out


def _ids(name: str, ids: set[int]):
    # the ids inline (integers only): a long list of the unfinished never runs into a bound-parameter limit
    return bindparam(name, value=sorted(ids), expanding=True, literal_execute=True)


class WorkspaceCollector(Collector):
    """The platform's metrics, read from the workspace database (and the store's filesystem) per scrape."""

    def __init__(
        self,
        db: Database,
        store_root: str | None = None,
        resource_types: list[str] | tuple[str, ...] = (),
        node: str | None = None,
        refresh_every: float = 3600,
        replication: bool = False,
        engine_nodes: Callable[[], list] | None = None,
        node_stores=None,
        followers=None,
    ):
        self.db = db
        self.replication = replication  # a store of record is configured: outputs not yet in it are counted
        self.store_root = store_root
        self.resource_types = list(resource_types)
        self.node = node
        self.refresh_every = refresh_every
        self.engine_nodes = engine_nodes  # the nodes starts are placed on (workspace/store/nodes.py), asked per scrape
        self.node_stores = node_stores  # nodes.NodeStores: a node's store measured by its agent where it has one
        self.followers = followers  # service/streams.Followers: the logs followed now (None: not this process)
        self._lock = threading.Lock()  # scrapes run in threads; the totals are updated under it
        self._ended: Tally | None = None  # the executions with id <= _high that are not in _open
        self._high = 0
        self._open: set[int] = set()  # ids <= _high not ended when last read: their figures may still change
        self._refreshed = 0.0

    def collect(self):
        with self._lock, self.db.session() as s:
            queued = dict(
                s.execute(
                    select(Execution.resource_type, func.count())
                    .where(Execution.state == "queued", Execution.resource_type.is_not(None))
                    .group_by(Execution.resource_type)
                ).all()
            )
            tally = self._tally(s)
            behind = self._replication(s) if self.replication else None
            sends = self._sends(s) if self.replication else None
            nodes = self._nodes()
            placed = executions_per_node(s)
            used = used_gpus(s) if nodes else {}
        deployments = traffic.totals(self.db)
        states = tally.states

        executions = GaugeMetricFamily(
            "workspace_executions", "Executions in each state, from the execution records.", labels=["state"]
        )
        for state in dict.fromkeys([*STATES, *sorted(states)]):
            executions.add_metric([state], states.get(state, 0))
        yield executions

        waiting = GaugeMetricFamily(
            "workspace_queue_length",
            "Starts waiting in the queue of each resource type (state queued).",
            labels=["resource_type"],
        )
        for name in dict.fromkeys([*self.resource_types, *sorted(queued)]):
            waiting.add_metric([name], queued.get(name, 0))
        yield waiting

        yield from tally.families()
        if self.followers is not None:
            yield GaugeMetricFamily(
                "workspace_log_followers",
                "Logs followed now (`?follow=1` of a task's or an image build's log): each ends with its client.",
                value=self.followers.active,
            )
        yield from self._store(nodes)
        yield from self._node_families(nodes, placed, used)
        if sends is not None:
            yield sends
        if behind is not None:
            count, oldest = behind
            yield GaugeMetricFamily(
                "workspace_outputs_unreplicated",
                "Saved outputs not yet in the store of record (WorkspaceMixin.record_store_root).",
                value=count,
            )
            yield GaugeMetricFamily(
                "workspace_replication_lag_seconds",
                "Age of the oldest saved output not yet in the store of record (0: none waits).",
                value=(utcnow() - oldest).total_seconds() if oldest else 0,
            )
        yield from deployment_families(deployments)

    def _replication(self, s) -> tuple[int, dt.datetime | None]:
        """(how many, the oldest's time) of the outputs waiting for the store of record (an index on it)."""
        waiting = (Snapshot.replicated_at.is_(None), Snapshot.deleted.is_(None), Snapshot.backend == "btrfs")
        return s.execute(select(func.count(), func.min(Snapshot.created)).where(*waiting)).one()

    def _sends(self, s) -> Metric:
        """The histogram of the sends to the store of record (every one recorded, deleted outputs' too)."""
        col = Snapshot.replica_seconds
        row = s.execute(
            select(
                *(func.sum(case((col <= b, 1), else_=0)) for b in SECONDS_BUCKETS), func.count(col), func.sum(col)
            ).where(col.is_not(None))
        ).one()
        counts = [int(v or 0) for v in row[:-1]]
        buckets = [(floatToGoString(b), counts[i]) for i, b in enumerate(SECONDS_BUCKETS)] + [("+Inf", counts[-1])]
        return HistogramMetricFamily(
            "workspace_replication_duration_seconds",
            "Seconds per send of an output to the store of record (every send recorded).",
            buckets=buckets,
            sum_value=float(row[-1] or 0),
        )

    def _nodes(self) -> list:
        if self.engine_nodes is None:
            return []
        try:
            return list(self.engine_nodes())
        except Exception as e:  # the engine (a swarm's manager) does not answer: no node figures this scrape
            log.warning("metrics: cannot list the nodes: %s", e)
            return []

    def _node_families(self, nodes: list, placed: dict, used: dict):
        families = {
            "up": GaugeMetricFamily("workspace_node_up", "1 when the node is up, 0 when down.", labels=["node"]),
            "executions": GaugeMetricFamily(
                "workspace_node_executions", "Executions placed on the node and not ended.", labels=["node"]
            ),
            "gpus": GaugeMetricFamily("workspace_node_gpus", "GPUs of the node.", labels=["node"]),
            "free": GaugeMetricFamily(
                "workspace_node_gpus_free", "GPUs of the node no execution holds.", labels=["node"]
            ),
        }
        for n in nodes:
            families["up"].add_metric([n.name], 1 if n.ready else 0)
            families["executions"].add_metric([n.name], placed.get(n.name, 0))
            families["gpus"].add_metric([n.name], len(n.gpus))
            families["free"].add_metric([n.name], len([g for g in n.gpus if g not in used.get(n.name, ())]))
        if nodes:
            yield from families.values()

    def _tally(self, s) -> Tally:
        """Every record's figures: the ended ones' kept totals plus a read of the new and the unfinished."""
        if self._ended is None or time.monotonic() - self._refreshed >= self.refresh_every:
            self._refresh(s)
        rows = s.execute(
            select(Execution.id, Execution.state, *(h.attr for h in HISTOGRAMS)).where(
                or_(Execution.id > self._high, Execution.id.in_(_ids("open", self._open)))
            )
        ).all()
        current = self._ended.copy()
        for row in rows:
            current.add(row)
            self._high = max(self._high, row.id)
            if row.state in FINAL:  # its figures are final: into the kept totals, not read again
                self._ended.add(row)
                self._open.discard(row.id)
            else:
                self._open.add(row.id)
        return current

    def _refresh(self, s) -> None:
        """Aggregate every record in the database.

        In this order: the highest id first, then which are unfinished, then the totals of the
        rest. A record in the totals had ended when the unfinished were read, so its figures are
        final; one that ends in between is still among the unfinished, read again at every scrape
        until it is folded in: never counted twice, never lost.
        """
        high = s.scalar(select(func.max(Execution.id))) or 0
        unfinished = set(
            s.scalars(select(Execution.id).where(Execution.id <= high, Execution.state.not_in(FINAL))).all()
        )
        ended = Tally.aggregate(s, Execution.id <= high, Execution.id.not_in(_ids("unfinished", unfinished)))
        self._ended, self._high, self._open = ended, high, unfinished
        self._refreshed = time.monotonic()

    def _store(self, nodes: list):
        """The filesystems of the home stores: this process's and each node's of its own (statvfs: constant
        time, no walk of the trees)."""
        stores = [(self.node or "", self.store_root)] if self.store_root else []
        stores += [(n.name, n.store) for n in nodes if n.store and n.store != self.store_root]
        where = "the filesystem of the node's home store (statvfs of its root; shared with whatever else is on it)"
        families = {
            name: GaugeMetricFamily(f"workspace_store_{name}_bytes", f"{what} {where}.", labels=["node"])
            for name, what in (
                ("size", "Size of"),
                ("used", "Bytes used on"),
                ("available", "Bytes available to unprivileged users on"),
            )
        }
        for node, root in stores:
            try:
                if self.node_stores is not None and node != (self.node or ""):
                    fs = self.node_stores.of(node).filesystem()  # on its node, maybe through its agent
                else:
                    fs = filesystem(root)
            except Exception as e:
                log.warning("metrics: cannot read the filesystem of the home store of %s: %s", node or "this node", e)
                continue
            for name in ("size", "used", "available"):
                families[name].add_metric([node], fs[name])
        if stores:
            yield from families.values()


def registry(collector: WorkspaceCollector) -> CollectorRegistry:
    """A registry with only the platform's metrics (none of the process's own)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg


def deployment_families(totals: list[dict]):
    """Each deployment's traffic through the router (#33), labelled by its key (no user's name): requests,
    failures (5xx or no answer), the latency histogram and its ready replicas."""
    requests = CounterMetricFamily(
        "workspace_deployment_requests", "Requests to a deployment through the router.", labels=["deployment"]
    )
    failures = CounterMetricFamily(
        "workspace_deployment_failures",
        "Requests to a deployment answered 5xx or not at all.",
        labels=["deployment"],
    )
    latency = HistogramMetricFamily(
        "workspace_deployment_request_seconds",
        "Seconds from a request's arrival at the router to its answer's last byte.",
        labels=["deployment"],
    )
    ready = GaugeMetricFamily(
        "workspace_deployment_ready_replicas",
        "Ready replicas of a deployment's serving version.",
        labels=["deployment"],
    )
    for t in totals:
        requests.add_metric([t["key"]], t["requests"])
        failures.add_metric([t["key"]], t["failures"])
        cumulative, running = [], 0
        for bound, count in zip([*map(floatToGoString, BUCKETS), "+Inf"], t["buckets"]):
            running += count
            cumulative.append((bound, running))
        latency.add_metric([t["key"]], cumulative, t["seconds"])
        ready.add_metric([t["key"]], t["ready"])
    yield from (requests, failures, latency, ready)
