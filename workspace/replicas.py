"""The store of record: every saved output copied off the node that saved it.

A swarm's node keeps the homes it saved in its own store; until an output's
copy is in the store of record, losing that node loses the output. So the save
that made an output sends it at once (spawner/home_stores.py, and
lifecycle.finish_pending_saves for a save finished later), and the workspace
service sends, every round, whatever is still only on its node
(`replicate_pending`): a send that failed, and one whose sender died.

One process at a time sends an output: the send holds a lease in the
snapshot's record (`replica_sender`, `replica_until`), renewed while bytes
move. A lease whose holder is gone (a process of this host that no longer
exists) or that ran out is taken over. Before the lease, the service left a
new output to its save for five minutes, and a hub killed between its save and
its send left the output on one node that long (found by
tests/cluster/test_chaos.py, seed 1974340516).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Callable

from sqlalchemy import select, update

from workspace import process
from workspace.db import Database, utcnow
from workspace.executions import Execution, Snapshot
from workspace.store import replication
from workspace.store.copier import Transfer
from workspace.store.homes import HomeStore, HomeStoreError

log = logging.getLogger("workspace.replicas")

# how long a send's claim holds without news of it: renewed while bytes move, so only a sender that died
# or hangs lets it run out
SEND_LEASE = dt.timedelta(minutes=2)
RENEW_EVERY = 30.0  # s: how often a moving send renews its lease


def claim_send(db: Database, snapshot_key: str, sender: str, ttl: dt.timedelta = SEND_LEASE) -> bool:
    """Take (or renew) the lease on sending an output; False if a live sender holds it, or it arrived."""
    now = utcnow()
    with db.session() as s:
        holder = s.scalar(select(Snapshot.replica_sender).where(Snapshot.key == snapshot_key))
        free = (Snapshot.replica_until.is_(None)) | (Snapshot.replica_until < now) | (Snapshot.replica_sender == sender)
        if process.gone(holder):
            log.warning("taking over the send of output %s from %s, which is gone", snapshot_key, holder)
            free = free | (Snapshot.replica_sender == holder)
        result = s.execute(
            update(Snapshot)
            .where(Snapshot.key == snapshot_key, Snapshot.replicated_at.is_(None), Snapshot.deleted.is_(None))
            .where(free)
            .values(replica_sender=sender, replica_until=now + ttl)
        )
        return result.rowcount == 1


def release_send(db: Database, snapshot_key: str, sender: str, **fields) -> None:
    """End a send's lease (with what it found: `replicated_at`, `replica_error`, ...)."""
    with db.session() as s:
        s.execute(
            update(Snapshot)
            .where(Snapshot.key == snapshot_key, Snapshot.replica_sender == sender)
            .values(replica_sender=None, replica_until=None, **fields)
        )


def replicate(db: Database, store: HomeStore, record: HomeStore, snapshot_key: str) -> bool:
    """Send a saved output to the store of record, incrementally from the nearest earlier output of its
    lineage that both stores hold; record when it arrived, or why not (retried later). Whether it is
    there (False too while another process sends it)."""
    with db.session() as s:
        snap = s.scalar(select(Snapshot).where(Snapshot.key == snapshot_key))
        if snap is None or snap.deleted is not None:
            return False
        if snap.replicated_at is not None:
            return True
        parents, size = lineage(s, snap), snap.bytes
    sender = process.identity()
    if not claim_send(db, snapshot_key, sender):
        return False
    renewed = [time.monotonic()]

    def renew(_stats) -> None:  # bytes moved: the sender is alive
        if time.monotonic() - renewed[0] >= RENEW_EVERY:
            renewed[0] = time.monotonic()
            claim_send(db, snapshot_key, sender)

    try:
        sent = replication.replicate(store, snapshot_key, record, parents, renew, size=size)
    except (HomeStoreError, OSError) as e:
        log.error("replicating output %s to the store of record failed: %s", snapshot_key, e)
        release_send(db, snapshot_key, sender, replica_error=str(e)[:1000])
        return False
    except BaseException:
        release_send(db, snapshot_key, sender)  # free for the next round at once
        raise
    release_send(
        db,
        snapshot_key,
        sender,
        replicated_at=utcnow(),
        replica_bytes=sent.bytes,
        replica_error=None,
        replica_seconds=round(sent.seconds, 3),
    )
    log.info("output %s is in the store of record: %s", snapshot_key, sent.describe())
    return True


def lineage(session, snap: Snapshot, limit: int = 50) -> list[str]:
    """The keys of the earlier outputs `snap` descends from, nearest first: the parents an incremental
    send may start from."""
    ex = session.scalar(select(Execution).where(Execution.snapshot_id == snap.id))
    parents, seen, earlier = [], set(), ex.restored_from if ex else None
    while earlier is not None and earlier.id not in seen and len(parents) < limit:
        seen.add(earlier.id)
        if earlier.snapshot is not None and earlier.snapshot.deleted is None:
            parents.append(earlier.snapshot.key)
        earlier = earlier.restored_from
    return parents


def receive(
    db: Database,
    snapshot_key: str,
    target: HomeStore,
    sources: list[HomeStore],
    progress: Callable[[Transfer], None] | None = None,
) -> "replication.Replication":
    """Bring a saved output into `target` (the store of the node a start was placed on) from the first
    of `sources` that holds it, incrementally from the nearest output of its lineage the target holds."""
    with db.session() as s:
        snap = s.scalar(select(Snapshot).where(Snapshot.key == snapshot_key))
        parents, size = lineage(s, snap), snap.bytes
    source = None
    for store in sources:
        try:
            if store.has_snapshot(snapshot_key):
                source = store
                break
        except HomeStoreError as e:  # a node that does not answer (its store agent is gone): the next one
            log.warning("looking for output %s: %s", snapshot_key, e)
    if source is None:
        raise HomeStoreError(f"no reachable store holds output {snapshot_key}")
    return replication.replicate(source, snapshot_key, target, parents, progress, size=size)


def replicate_pending(db: Database, store: HomeStore, record: HomeStore, node: str, limit: int = 20) -> int:
    """Send the outputs `node` (its store: `store`) saved that are not in the store of record yet, oldest
    first, but those a live sender holds (a save sending its own); how many arrived."""
    now = utcnow()
    with db.session() as s:
        rows = list(
            s.execute(
                select(Snapshot.key, Snapshot.replica_sender, Snapshot.replica_until)
                .where(
                    Snapshot.replicated_at.is_(None),
                    Snapshot.deleted.is_(None),
                    Snapshot.backend == "btrfs",
                    (Snapshot.node == node) | Snapshot.node.is_(None),
                    # free, or held by a process of this host (which may be gone)
                    Snapshot.replica_until.is_(None)
                    | (Snapshot.replica_until < now)
                    | Snapshot.replica_sender.startswith(f"{process.HOST}:", autoescape=True),
                )
                .order_by(Snapshot.created, Snapshot.id)
                .limit(limit * 5)
            )
        )
    keys = [key for key, sender, until in rows if until is None or until < now or process.gone(sender)][:limit]
    return sum(1 for key in keys if store.has_snapshot(key) and replicate(db, store, record, key))


def purge_deleted_copies(db: Database, store: HomeStore, within: dt.timedelta = dt.timedelta(days=30)) -> int:
    """Delete from a node's store the copies of outputs their owners deleted (in the last `within`: a node
    down longer than that keeps them until an administrator cleans its store); how many."""
    with db.session() as s:
        keys = list(
            s.scalars(select(Snapshot.key).where(Snapshot.deleted.is_not(None), Snapshot.deleted > utcnow() - within))
        )
    gone = 0
    for key in keys:
        if store.has_snapshot(key):
            store.delete(key)
            gone += 1
    return gone


def purge_deleted_replicas(db: Database, record: HomeStore) -> int:
    """Delete from the store of record the copies of outputs their owners deleted; how many."""
    with db.session() as s:
        keys = list(
            s.scalars(select(Snapshot.key).where(Snapshot.deleted.is_not(None), Snapshot.replicated_at.is_not(None)))
        )
    for key in keys:
        if record.has_snapshot(key):
            record.delete(key)
        with db.session() as s:
            s.scalar(select(Snapshot).where(Snapshot.key == key)).replicated_at = None
    return len(keys)
