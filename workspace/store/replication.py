"""Snapshots between nodes' home stores: btrfs send / receive, incremental where it can be.

    replicate(source, snapshot, target, parents)   -> Replication (a Transfer)
    replicate_dataset(source, version, target)     -> Replication

Each node keeps its own btrfs store, so restores and saves stay constant-time
where the execution runs; a saved snapshot is sent to the store of record, and
a node that lacks a snapshot receives it, in both cases only the delta from
the nearest snapshot of its lineage that both stores hold.

Which parent works. A stream names the snapshot by its *identity*: its
Received UUID if it was itself received, else its own UUID; an incremental
stream names its parent the same way. `btrfs receive` gives the new subvolume
that identity as its Received UUID, and looks the parent up on the target
filesystem by Received UUID, then by UUID. So a snapshot keeps the identity
of the store that saved it along any chain of stores, and the target's copy of
a parent fits when its Received UUID (it was received) or its UUID (the target
saved it) is the source's identity of that parent. `choose_parent` checks
exactly this, so a snapshot of the same name but another origin is never used
as a parent (the receive would fail or, worse, apply a delta to other data).

Publishing. A subvolume is received under the name in the stream, and a
read-only subvolume cannot be moved to another directory (that rewrites its
`..`), only renamed inside one. So the first command of the stream, which
names the subvolume, is rewritten (name and checksum) from `<key>` to
`.partial-<key>`: the receive writes `snapshots/.partial-<key>`, which is
renamed to `snapshots/<key>` once complete and read-only, as a save does. A
crash leaves only a partial, which the store's `setup(clean=True)` removes.

Security. The snapshot is a student's tree (any names, links). Nothing here
looks inside it but `paths.measure` (which never follows a link); `btrfs
receive` runs confined (`--chroot`) to the store's `snapshots/` (or
`datasets/`) directory and stops at the stream's end (`-e`); no shell is used
and keys are checked by the store. One replication of a key into a store at a
time: the caller serializes them.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from workspace import i18n
from workspace.store.btrfs_send import Ids, held, receiving, renamed_head, same_snapshot, subvolume_ids, write_all
from workspace.store.copier import Progress, Transfer
from workspace.store.homes import (
    BtrfsHomeStore,
    HomeStore,
    HomeStoreError,
    StoreFullError,
    is_full,
    valid_key,
)
from workspace.store.paths import measure

CHUNK = 1 << 20  # bytes moved per splice: memory stays bounded whatever the home's size


@dataclass
class Replication(Transfer):
    """A send's statistics; `bytes` counts the stream as it passed, `bytes_total` is an estimate."""

    snapshot: str = ""
    parent: str | None = None  # None: a full send
    sent: bool = True  # False: the target held the snapshot already

    def describe(self, locale: str = i18n.DEFAULT) -> str:
        """One line for a progress bar (and the log), in `locale`."""
        if not self.sent:
            return i18n.translate(locale, "{snapshot} is there already: nothing sent", snapshot=self.snapshot)
        if self.parent:
            kind = i18n.translate(locale, "changes since {parent}", parent=self.parent)
        else:
            kind = i18n.translate(locale, "whole home")
        eta = self.eta_s
        figures = dict(
            mb=self.bytes / 1e6,
            mb_total=(self.bytes_total or 0) / 1e6,
            kind=kind,
            mb_per_s=self.mb_per_s,
            eta=eta,
        )
        if not self.bytes_total:
            return i18n.translate(
                locale, "{mb:,.1f} MB sent ({kind}), {mb_per_s:,.1f} MB/s, time left unknown", **figures
            )
        if eta is not None and self.bytes < self.bytes_total:
            return i18n.translate(
                locale,
                "{mb:,.1f} of about {mb_total:,.1f} MB sent ({kind}), {mb_per_s:,.1f} MB/s, about {eta:,.0f} s left",
                **figures,
            )
        return i18n.translate(
            locale, "{mb:,.1f} of about {mb_total:,.1f} MB sent ({kind}), {mb_per_s:,.1f} MB/s", **figures
        )

    def as_dict(self) -> dict:
        return {**super().as_dict(), "parent": self.parent, "sent": self.sent}


def choose_parent(
    candidates: Iterable[str], source: Callable[[str], Ids | None], target: Callable[[str], Ids | None]
) -> str | None:
    """The first candidate (nearest first) that both stores hold as the same snapshot; None: send in full."""
    for key in candidates:
        mine = source(key)
        if mine is None or not mine.readonly:
            continue
        theirs = target(key)
        if theirs is not None and same_snapshot(mine, theirs):
            return key
    return None


# -- the transfer ---------------------------------------------------------------------------


def replicate(
    source: HomeStore,
    snapshot: str,
    target: HomeStore,
    parents: Iterable[str] = (),
    progress: Progress | None = None,
    *,
    size: int | None = None,
    progress_interval: float = 0.5,
) -> Replication:
    """Send `snapshot` from `source` to `target`, incrementally from the nearest of `parents` both hold.

    `parents` are candidates, nearest first (the snapshot's lineage). `size`
    is the snapshot's recorded size, the total of a full send's progress
    (measured if not given). Durable on the target when it returns; already
    there: nothing is sent. On failure the target holds nothing new.
    """
    return _replicate(source, target, "snapshots", snapshot, list(parents), progress, size, progress_interval)


def replicate_dataset(
    source: HomeStore,
    version: str,
    target: HomeStore,
    parents: Iterable[str] = (),
    progress: Progress | None = None,
    *,
    progress_interval: float = 0.5,
) -> Replication:
    """Send dataset version `version` (`datasets/<key>`, a read-only subvolume on btrfs) to `target`.

    A node receives a version on first use and keeps it, read-only, beside its
    snapshots; `parents` may name other versions of the dataset both may hold.
    """
    return _replicate(source, target, "datasets", version, list(parents), progress, None, progress_interval)


def _replicate(
    source: HomeStore,
    target: HomeStore,
    area: str,
    key: str,
    parents: list[str],
    progress: Progress | None,
    size: int | None,
    interval: float,
) -> Replication:
    if getattr(source, "remote", False) or getattr(target, "remote", False):
        return _between_agents(source, target, area, key, parents, progress, size, interval)
    for store in (source, target):
        if not isinstance(store, BtrfsHomeStore):
            raise HomeStoreError(
                f"replication needs btrfs home stores on both nodes; {store.root} is a {store.kind} store"
            )
    key = valid_key(key)
    src_dir, dst_dir = Path(source.root) / area, Path(target.root) / area
    snap = src_dir / key
    if not snap.exists():
        raise HomeStoreError(f"{area[:-1]} {key} does not exist in {source.root}")
    mine = subvolume_ids(source, snap)
    if not mine.readonly:
        raise HomeStoreError(f"{snap} is not read-only; only saved snapshots can be sent")
    if held(target, dst_dir / key, mine.identity):
        return Replication(snapshot=key, sent=False)
    parent = choose_parent(parents, _lookup(source, src_dir), _lookup(target, dst_dir))
    stats = Replication(snapshot=key, parent=parent)
    base = src_dir / parent if parent else None
    stats.bytes_total = _estimate(source, snap, base, size)
    if progress is not None:
        progress(stats)  # the total, at once
    try:
        with receiving(target, dst_dir, key, mine.identity):
            _send_receive(source, snap, base, target, dst_dir, key, stats, progress, interval)
    except (OSError, subprocess.CalledProcessError) as e:
        raise (StoreFullError if is_full(e) else HomeStoreError)(f"sending {key} failed: {e}") from e
    stats.bytes_total = stats.bytes  # no longer an estimate
    stats.tick()
    if progress is not None:
        progress(stats)
    return stats


def _between_agents(
    source, target, area: str, key: str, parents: list[str], progress: Progress | None, size: int | None, interval
) -> Replication:
    """A node's store on another machine: the agents move it, the target's pulling from the source's node to
    node (agent_store.py); both need one."""
    for store in (source, target):
        if not getattr(store, "remote", False):
            raise HomeStoreError(
                "a snapshot moves between stores with agents on both sides: give the hub's own store an agent "
                "(c.SwarmWorkspaceSpawner.store_agent_url)"
            )
    return target.pull(source, area, key, parents, progress, size, interval)


def _lookup(store: BtrfsHomeStore, directory: Path) -> Callable[[str], Ids | None]:
    """The identities of `directory`'s subvolumes by name (None: not there), for `choose_parent`."""

    def ids(name: str) -> Ids | None:
        path = directory / valid_key(name)
        return subvolume_ids(store, path) if path.exists() else None

    return ids


def _estimate(source: BtrfsHomeStore, snap: Path, parent: Path | None, size: int | None) -> int:
    """The bytes a send of `snap` will move: what changed since `parent` (the delta's data, cheap to find),
    else the whole snapshot (`size`, its recorded size, or measured)."""
    if parent is not None:
        return source.changes(snap, subvolume_ids(source, parent).generation)[0]
    return size if size is not None else measure(snap)[0]


def _send_receive(
    source: BtrfsHomeStore,
    snap: Path,
    parent: Path | None,
    target: BtrfsHomeStore,
    dest: Path,
    key: str,
    stats: Replication,
    progress: Progress | None,
    interval: float,
) -> None:
    """`btrfs send [-p parent] snap | btrfs receive`, the stream passing through this process (counted)."""
    send_cmd = [source.btrfs, "send", *(["-p", str(parent)] if parent else []), str(snap)]
    # --chroot: the receive cannot write outside `dest`, whatever the stream says; -e: stop at its end
    recv_cmd = [target.btrfs, "receive", "-e", "--chroot", str(dest)]
    with tempfile.TemporaryFile() as send_err, tempfile.TemporaryFile() as recv_err:
        send = subprocess.Popen(send_cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=send_err)
        recv = subprocess.Popen(recv_cmd, stdin=subprocess.PIPE, stdout=recv_err, stderr=recv_err)
        try:
            for pipe in (send.stdout, recv.stdin):
                try:  # larger pipes: fewer wake-ups per MiB
                    fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, CHUNK)
                except OSError:
                    pass
            try:
                ended = _pump(send.stdout.fileno(), recv.stdin.fileno(), key, stats, progress, interval)
            except BrokenPipeError:
                ended = None  # the receive stopped reading: its status says why
            # close both ends this process holds: a send blocked on a pipe nobody reads would never end
            recv.stdin.close()
            send.stdout.close()
            recv_rc, send_rc = recv.wait(), send.wait()
        except BaseException:
            for proc in (send, recv):
                proc.kill()
                proc.wait()
            raise
        finally:
            send.stdout.close()
            recv.stdin.close()
        # Name the side that failed first: a send that stops starves the receive (which then fails
        # too), a receive that stops breaks the pipe (and the send fails too). A receive may also stop
        # reading because it is done: with -e it ends at the stream's end command.
        if recv_rc != 0 and ended is None:
            _fail("btrfs receive", recv_err, f"check the store at {target.root}")
        if send_rc != 0 or ended is False:
            _fail("btrfs send", send_err, f"check {snap} on the source node")
        if recv_rc != 0:
            _fail("btrfs receive", recv_err, f"check the store at {target.root}")


def _fail(what: str, err, advice: str) -> None:
    err.seek(0)
    message = err.read()[-2000:].decode(errors="replace").strip() or "no message"
    if is_full(message):
        raise StoreFullError(f"{what} failed, the target store is full ({message}): free or grow it, then send again")
    raise HomeStoreError(f"{what} failed ({message}): {advice}, then send again")


def _pump(src: int, dst: int, key: str, stats: Replication, progress: Progress | None, interval: float) -> bool:
    """Move the stream from `src` to `dst`; True once the send closed it, False if it never began."""
    head = renamed_head(src, key)
    if head is None:
        return False  # the send failed before its stream began; its status and message say why
    write_all(dst, head)
    stats.bytes = len(head)
    last = time.monotonic()
    while True:
        n = os.splice(src, dst, CHUNK)  # pipe to pipe in the kernel: counted, never copied here
        if n == 0:
            return True
        stats.bytes += n
        if progress is not None and time.monotonic() - last >= interval:
            stats.tick()
            progress(stats)
            last = time.monotonic()
