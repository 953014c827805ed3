"""What a btrfs send stream carries between stores: the identities of subvolumes and the stream's format.

Shared by the ways a snapshot moves between stores: replication between
stores this process reaches (replication.py), between store agents
(agent.py), and through a file (a backup's stream: `send_to_file`, received
again by `receive_from_file`). Why a copy's identity decides which parent
fits, and why the stream's first command is renamed to the partial name, is
told in replication.py.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from workspace.store.copier import fsync_dir
from workspace.store.homes import PARTIAL, BtrfsHomeStore, HomeStoreError, StoreFullError, is_full


@dataclass(frozen=True)
class Ids:
    """What identifies a subvolume across filesystems (from `btrfs subvolume show`)."""

    uuid: str
    received_uuid: str | None = None
    generation: int = 0
    readonly: bool = False

    @property
    def identity(self) -> str:
        """The UUID a send stream gives this subvolume (and a receive gives its copy as Received UUID)."""
        return self.received_uuid or self.uuid


def same_snapshot(source: Ids, target: Ids) -> bool:
    """True if `target` is a copy of `source` (or its origin) as `btrfs receive` finds parents."""
    return source.identity in (target.received_uuid, target.uuid)


def parse_show(text: str) -> Ids:
    """Ids from the output of `btrfs subvolume show`."""

    def field(name: str) -> str | None:
        m = re.search(rf"^\s*{name}:\s*(\S+)", text, re.M)
        return m.group(1) if m and m.group(1) != "-" else None

    uuid = field("UUID")
    if uuid is None:
        raise HomeStoreError("`btrfs subvolume show` printed no UUID; is btrfs-progs 4.x or newer installed?")
    flags = re.search(r"^\s*Flags:\s*(.*)$", text, re.M)
    return Ids(
        uuid=uuid,
        received_uuid=field("Received UUID"),
        generation=int(field("Generation") or 0),
        readonly=bool(flags and "readonly" in flags.group(1)),
    )


def subvolume_ids(store: BtrfsHomeStore, path: Path) -> Ids:
    """The identities of the subvolume at `path` in `store` (HomeStoreError if it is none)."""
    try:
        return parse_show(store._run("subvolume", "show", path))
    except subprocess.CalledProcessError as e:
        raise HomeStoreError(f"{path} is not a btrfs subvolume ({e.stderr}); only a store's snapshots can be sent")


def held(store: BtrfsHomeStore, path: Path, identity: str) -> bool:
    """Whether `path` holds a copy of the snapshot `identity` already (False: nothing is there); a
    HomeStoreError where it holds another of the same name."""
    if not path.exists():
        return False
    there = subvolume_ids(store, path)
    if identity in (there.received_uuid, there.uuid):  # as `same_snapshot` decides
        return True
    raise HomeStoreError(
        f"{path} holds another {path.parent.name[:-1]} of the same name (another origin); "
        "delete it there or use another key"
    )


@contextmanager
def receiving(store: BtrfsHomeStore, directory: Path, key: str, identity: str) -> Iterator[Path]:
    """The partial subvolume a receive of `key` into `directory` writes (a stale one removed first).

    Once the body has received it, it is published as `key` (durably) if it arrived whole: read-only
    and with the sent snapshot's `identity`. If anything fails it is removed: `key` appears whole or
    not at all.
    """
    partial, final = directory / (PARTIAL + key), directory / key
    if partial.exists():  # left by a crash (setup removes these too)
        store._remove(partial)
    try:
        yield partial
        received = subvolume_ids(store, partial)
        if not received.readonly or received.received_uuid != identity:
            raise HomeStoreError(f"the received {partial} is incomplete (not read-only or another identity)")
        os.rename(partial, final)  # one directory: a read-only subvolume may be renamed, not moved
        fsync_dir(directory)
        store._sync()
    except BaseException:
        if partial.exists():
            try:
                store._remove(partial)
            except Exception:  # the store's next setup() removes it
                store.log.exception("Could not remove partial %s", partial)
        raise


# -- the stream's first command names the subvolume; it is renamed to the partial name ---------

STREAM_HEADER = 17  # "btrfs-stream\0" and a little-endian u32 version
CMD_HEADER = struct.Struct("<IHI")  # payload length, command, crc32c
TLV = struct.Struct("<HH")  # attribute, length
CMD_SUBVOL, CMD_SNAPSHOT, ATTR_PATH = 1, 2, 15


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC-32C without the usual inversions, as btrfs checksums stream commands (seed 0)."""
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def rename_subvolume_command(header: bytes, payload: bytes, old: bytes, new: bytes) -> bytes:
    """The stream's first command (header and payload) with the subvolume's name `old` made `new`."""
    length, cmd, crc = CMD_HEADER.unpack(header)
    if cmd not in (CMD_SUBVOL, CMD_SNAPSHOT) or length != len(payload):
        raise HomeStoreError(f"unexpected btrfs send stream (first command {cmd}); is btrfs-progs too new or old?")
    if crc32c(CMD_HEADER.pack(length, cmd, 0) + payload) != crc:
        raise HomeStoreError("the btrfs send stream's first command fails its checksum")
    out, pos = [], 0
    while pos < len(payload):
        attr, size = TLV.unpack_from(payload, pos)
        value = payload[pos + TLV.size : pos + TLV.size + size]
        if attr == ATTR_PATH:
            if value != old:
                raise HomeStoreError(f"the stream sends {value!r}, not {old!r}")
            value = new
        out.append(TLV.pack(attr, len(value)) + value)
        pos += TLV.size + size
    body = b"".join(out)
    return CMD_HEADER.pack(len(body), cmd, crc32c(CMD_HEADER.pack(len(body), cmd, 0) + body)) + body


def renamed_head(fd: int, key: str) -> bytes | None:
    """The stream's header and first command read from `fd`, the subvolume's name `key` made the partial
    name (the receive writes that, published once complete); None where no stream began (the send failed
    first: its status and message say why)."""
    head = read_exact(fd, STREAM_HEADER + CMD_HEADER.size)
    if len(head) < STREAM_HEADER + CMD_HEADER.size or not head.startswith(b"btrfs-stream\0"):
        return None
    payload = read_exact(fd, CMD_HEADER.unpack_from(head, STREAM_HEADER)[0])
    first = rename_subvolume_command(head[STREAM_HEADER:], payload, os.fsencode(key), os.fsencode(PARTIAL + key))
    return head[:STREAM_HEADER] + first


def read_exact(fd: int, n: int) -> bytes:
    """`n` bytes, or fewer where the stream ends."""
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (a pipe may take less at a time)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- a stream through a file: a backup's copy of a snapshot, received again at a restore -------------

FILE_CHUNK = 1 << 20


def send_to_file(
    store: BtrfsHomeStore, snap: Path, parent: Path | None, out, sent: Callable[[int], None] | None = None
) -> tuple[int, str]:
    """Write `btrfs send [-p parent] snap` to the open binary file `out`; (bytes, sha256 of the stream).

    `sent(n)` is told each chunk's size as it passes (progress). Raises HomeStoreError if the send fails
    (the file then holds a part of a stream: the caller removes it)."""
    cmd = [store.btrfs, "send", *(["-p", str(parent)] if parent else []), str(snap)]
    digest, size = hashlib.sha256(), 0
    with tempfile.TemporaryFile() as err:
        send = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        try:
            while chunk := send.stdout.read(FILE_CHUNK):
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
                if sent is not None:
                    sent(len(chunk))
        finally:
            send.stdout.close()
            if send.wait() != 0 or size == 0:
                err.seek(0)
                message = err.read()[-2000:].decode(errors="replace").strip() or f"exit status {send.returncode}"
                raise HomeStoreError(f"btrfs send of {snap} failed ({message})")
    return size, digest.hexdigest()


def receive_from_file(store: BtrfsHomeStore, directory: Path, key: str, identity: str, stream: Path) -> int:
    """Receive the send stream in the file `stream` as `directory/key` (published whole or not at all, as
    `receiving` does; `btrfs receive` confined to `directory`); the stream's bytes. The stream must name
    `key` (it is renamed to the partial name as it passes) and give the subvolume `identity`."""
    with open(stream, "rb") as f, receiving(store, directory, key, identity) as _partial:
        head = renamed_head(f.fileno(), key)
        if head is None:
            raise HomeStoreError(f"{stream} is not a btrfs send stream")
        size = len(head)
        with tempfile.TemporaryFile() as err:
            # --chroot: the receive cannot write outside `directory`, whatever the stream says; -e: stop at its end
            recv = subprocess.Popen(
                [store.btrfs, "receive", "-e", "--chroot", str(directory)],
                stdin=subprocess.PIPE,
                stdout=err,
                stderr=err,
            )
            try:
                write_all(recv.stdin.fileno(), head)
                while chunk := f.read(FILE_CHUNK):
                    write_all(recv.stdin.fileno(), chunk)
                    size += len(chunk)
            except BrokenPipeError:
                pass  # the receive stopped reading: its status says why
            finally:
                recv.stdin.close()
            if recv.wait() != 0:
                err.seek(0)
                message = err.read()[-2000:].decode(errors="replace").strip() or "no message"
                error = StoreFullError if is_full(message) else HomeStoreError
                raise error(f"btrfs receive of {stream.name} into {directory} failed ({message})")
    return size
