"""What replication decides without a filesystem: the parent, identities, the renamed stream, the progress line."""

import struct

import pytest

from workspace.store.btrfs_send import (
    CMD_HEADER,
    CMD_SNAPSHOT,
    CMD_SUBVOL,
    TLV,
    Ids,
    crc32c,
    parse_show,
    rename_subvolume_command,
    same_snapshot,
)
from workspace.store.homes import HomeStoreError
from workspace.store.replication import Replication, choose_parent

# Saved on node A: their own UUIDs, no Received UUID.
A1 = Ids("a1", readonly=True)
A2 = Ids("a2", readonly=True)
# Copies on another store: received from A (Received UUID = A's UUID).
R1 = Ids("r1", received_uuid="a1", readonly=True)
R2 = Ids("r2", received_uuid="a2", readonly=True)
# A copy of a copy (received from the store of record, which had received it from A).
RR1 = Ids("rr1", received_uuid="a1", readonly=True)


def test_same_snapshot_follows_btrfs_receive():
    assert same_snapshot(A1, R1), "the target received it from the source"
    assert same_snapshot(R1, RR1), "both received it from the same origin"
    assert same_snapshot(R1, A1), "the target is the origin: receive finds it by UUID"
    assert not same_snapshot(A1, A2)
    assert not same_snapshot(A1, Ids("b1", readonly=True)), "same name on two nodes, saved separately"
    assert not same_snapshot(R1, Ids("x", received_uuid="a2"))


def test_choose_parent_takes_the_nearest_both_hold():
    source = {"s2": A2, "s1": A1}.get
    assert choose_parent(["s2", "s1"], source, {"s2": R2, "s1": R1}.get) == "s2"
    assert choose_parent(["s2", "s1"], source, {"s1": R1}.get) == "s1", "the target lacks s2"
    assert choose_parent(["s3", "s2", "s1"], source, {"s3": R1, "s1": R1}.get) == "s1", "the source lacks s3"
    assert choose_parent(["s2", "s1"], source, {}.get) is None, "nothing in common: a full send"
    assert choose_parent([], source, {"s1": R1}.get) is None


def test_choose_parent_skips_a_namesake_of_another_origin():
    source = {"s2": A2, "s1": A1}.get
    # the target saved an `s2` of its own: not the same data, a delta against it would be wrong
    target = {"s2": Ids("b2", readonly=True), "s1": R1}.get
    assert choose_parent(["s2", "s1"], source, target) == "s1"


def test_choose_parent_where_either_copy_was_received_or_saved():
    # the store of record (received copies) sends to a node that received them too
    assert choose_parent(["s1"], {"s1": R1}.get, {"s1": RR1}.get) == "s1"
    # ... or back to the node that saved them
    assert choose_parent(["s1"], {"s1": R1}.get, {"s1": A1}.get) == "s1"


def test_choose_parent_skips_a_writable_source():
    assert choose_parent(["s1"], {"s1": Ids("a1", readonly=False)}.get, {"s1": R1}.get) is None


SHOW_RECEIVED = """store/snapshots/s1
\tName: \t\t\ts1
\tUUID: \t\t\t9d5f318c-ec8f-8c46-9df3-970b4c85b6dd
\tParent UUID: \t\t-
\tReceived UUID: \t\t0cabd501-c583-d745-b0e5-57fad92a1da1
\tGeneration: \t\t8
\tGen at creation: \t8
\tFlags: \t\t\treadonly
"""

SHOW_LIVE = """store/live/e1
\tName: \t\t\te1
\tUUID: \t\t\tc62f9410-b3d5-0f42-b93f-a557cef69198
\tParent UUID: \t\t-
\tReceived UUID: \t\t-
\tGeneration: \t\t12
\tFlags: \t\t\t-
"""


def test_parse_show():
    assert parse_show(SHOW_RECEIVED) == Ids(
        "9d5f318c-ec8f-8c46-9df3-970b4c85b6dd", "0cabd501-c583-d745-b0e5-57fad92a1da1", 8, True
    )
    live = parse_show(SHOW_LIVE)
    assert live == Ids("c62f9410-b3d5-0f42-b93f-a557cef69198", None, 12, False)
    assert live.identity == live.uuid
    with pytest.raises(HomeStoreError):
        parse_show("ERROR: not a subvolume")


def test_crc32c_is_castagnoli_without_inversion():
    # the standard check value of CRC-32C, with the inversions btrfs leaves out put back
    assert crc32c(b"123456789", 0xFFFFFFFF) ^ 0xFFFFFFFF == 0xE3069283


def command(cmd: int, attrs: list[tuple[int, bytes]]) -> tuple[bytes, bytes]:
    payload = b"".join(TLV.pack(a, len(v)) + v for a, v in attrs)
    crc = crc32c(CMD_HEADER.pack(len(payload), cmd, 0) + payload)
    return CMD_HEADER.pack(len(payload), cmd, crc), payload


def parse(data: bytes) -> tuple[int, list[tuple[int, bytes]]]:
    length, cmd, crc = CMD_HEADER.unpack_from(data)
    payload = data[CMD_HEADER.size :]
    assert len(payload) == length
    assert crc32c(CMD_HEADER.pack(length, cmd, 0) + payload) == crc, "the checksum fits the new command"
    attrs, pos = [], 0
    while pos < length:
        a, n = TLV.unpack_from(payload, pos)
        attrs.append((a, payload[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return cmd, attrs


@pytest.mark.parametrize("cmd", [CMD_SUBVOL, CMD_SNAPSHOT])
def test_the_first_command_is_renamed_to_the_partial_name(cmd):
    uuid, ctransid = bytes(range(16)), struct.pack("<Q", 7)
    header, payload = command(cmd, [(15, b"s1"), (1, uuid), (2, ctransid)])
    assert parse(rename_subvolume_command(header, payload, b"s1", b".partial-s1")) == (
        cmd,
        [(15, b".partial-s1"), (1, uuid), (2, ctransid)],
    )


def test_a_stream_that_is_not_what_was_asked_is_refused():
    header, payload = command(CMD_SUBVOL, [(15, b"other")])
    with pytest.raises(HomeStoreError, match="not b's1'"):
        rename_subvolume_command(header, payload, b"s1", b".partial-s1")
    with pytest.raises(HomeStoreError, match="checksum"):
        rename_subvolume_command(header, payload.replace(b"other", b"oTher"), b"other", b".partial-other")
    header, payload = command(3, [(15, b"s1")])  # a mkfile first: not a stream of a subvolume
    with pytest.raises(HomeStoreError, match="first command"):
        rename_subvolume_command(header, payload, b"s1", b".partial-s1")


def test_describe():
    full = Replication(snapshot="s1", bytes=50_000_000, bytes_total=200_000_000, seconds=1.0)
    assert full.describe() == "50.0 of about 200.0 MB sent (whole home), 50.0 MB/s, about 3 s left"
    delta = Replication(snapshot="s2", parent="s1", bytes=1_000_000, seconds=0.5)
    assert delta.describe() == "1.0 MB sent (changes since s1), 2.0 MB/s, time left unknown"
    assert Replication(snapshot="s2", sent=False).describe() == "s2 is there already: nothing sent"
    assert delta.as_dict() == {"bytes": 1_000_000, "files": 0, "seconds": 0.5, "parent": "s1", "sent": True}
