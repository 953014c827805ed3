"""The pure parts of a backup (workspace/setup/backup_sets.py): the manifest and its checks, which parent a delta
is taken from, the order a restore receives the outputs in, and what a pruning keeps."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from workspace.setup.backup_sets import (
    BackupError,
    Item,
    Manifest,
    Records,
    choose_parent,
    lineages,
    next_number,
    parse_every,
    prune,
    restore_order,
    set_name,
    with_parents,
)


def item(key: str, parent: str | None = None, area: str = "snapshots", **kw) -> Item:
    return Item(area, key, "stream", "d" * 64, 10, parent, sha256="a" * 64, identity=f"uuid-{key}", **kw)


def manifest(name: str = "0001-20250301T020000Z", items=(), **kw) -> Manifest:
    return Manifest(
        name=name,
        created="2025-03-01T02:00:00+00:00",
        store="btrfs",
        databases={"workspace": {"kind": "sqlite", "file": "db/workspace.sqlite", "sha256": "b" * 64, "bytes": 1}},
        files=[{"path": "secrets/secrets.env", "to": "secrets.env", "kind": "file", "digest": "c" * 64}],
        items=list(items),
        **kw,
    )


def test_a_manifest_reads_back_as_written():
    m = manifest(items=[item("s1"), item("s2", "s1"), item("s0", kept=False)], missing=[{"area": "snapshots"}])
    again = Manifest.from_json(m.to_json())
    assert again == m
    assert [i.key for i in again.outputs] == ["s1", "s2"]
    assert again.items[1].path == "pool/snapshots/s2.stream"
    assert replace(again.items[0], form="tree").path == "pool/snapshots/s1"


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda d: d["items"][0].update(key="../../etc"), "damaged"),
        (lambda d: d["items"][0].update(key=".partial-x"), "damaged"),
        (lambda d: d["items"][0].update(area="live"), "damaged"),
        (lambda d: d["items"][0].update(parent="nowhere"), "not in the set"),
        (lambda d: d["items"][0].update(sha256=None), "damaged"),
        (lambda d: d["files"][0].update(to="../../root/.ssh/authorized_keys"), "not inside the backup"),
        (lambda d: d["files"][0].update(path="/etc/shadow"), "not inside the backup"),
        (lambda d: d["databases"]["workspace"].update(file="db/../../x"), "not inside the backup"),
        (lambda d: d.update(name="../x"), "damaged"),
        (lambda d: d.update(format=99), "format 99"),
        (lambda d: d.update(surprise=1), "damaged"),
        (lambda d: d.pop("items"), "damaged"),
    ],
)
def test_a_tampered_manifest_is_refused_with_a_sentence(change, says):
    data = json.loads(manifest(items=[item("s1")]).to_json())
    change(data)
    with pytest.raises(BackupError, match=says):
        Manifest.from_json(json.dumps(data), "DEST/0001/manifest.json")
    with pytest.raises(BackupError, match="damaged"):
        Manifest.from_json("{not json", "DEST/0001/manifest.json")


def test_a_circle_of_parents_is_refused():
    with pytest.raises(BackupError, match="circle"):
        Manifest.from_json(manifest(items=[item("a", "b"), item("b", "a")]).to_json())


def test_lineages_follow_what_each_execution_restored():
    # ex 1 -> s1; ex 2 restored 1 -> s2; ex 3 restored 2, no output (its save failed); ex 4 restored 3 -> s4;
    # ex 5 started fresh -> s5; ex 6 restored 4, still running (no snapshot)
    executions = [(1, 11, None), (2, 12, 1), (3, None, 2), (4, 14, 3), (5, 15, None), (6, None, 4)]
    keys = {11: "s1", 12: "s2", 14: "s4", 15: "s5"}
    assert lineages(executions, keys) == {"s1": [], "s2": ["s1"], "s4": ["s2", "s1"], "s5": []}
    assert lineages(executions, keys, limit=1)["s4"] == ["s2"]
    # a restored-from that loops (a damaged record) ends the walk
    assert lineages([(1, 11, 2), (2, 12, 1)], {11: "a", 12: "b"}) == {"a": ["b"], "b": ["a"]}


def test_wanted_are_the_live_outputs_oldest_first_and_the_versions_after_their_dataset_s_earlier_ones():
    records = Records(
        snapshots=[(2, "s2", False), (1, "s1", False), (3, "s3", True)],
        executions=[(1, 1, None), (2, 2, 1), (3, 3, 2)],
        versions=[("v2", 7, 2), ("w1", 8, 1), ("v1", 7, 1), ("v3", 7, 3)],
    )
    assert records.wanted() == [
        ("snapshots", "s1", []),
        ("snapshots", "s2", ["s1"]),
        ("datasets", "v1", []),
        ("datasets", "v2", ["v1"]),
        ("datasets", "v3", ["v2", "v1"]),
        ("datasets", "w1", []),
    ]


def test_the_parent_is_the_nearest_in_the_pool_that_the_store_still_holds():
    pool, store = {"s1", "s2"}, {"s1", "s3"}
    assert choose_parent(["s3", "s2", "s1"], pool.__contains__, store.__contains__) == "s1"
    assert choose_parent(["s3", "s2"], pool.__contains__, store.__contains__) is None
    assert choose_parent([], pool.__contains__, store.__contains__) is None


def test_restore_order_puts_parents_first_whatever_the_listing():
    items = [
        item("c", "b"),
        item("d", "a"),
        item("b", "a"),
        item("a"),
        item("v2", "v1", "datasets"),
        item("v1", area="datasets"),
    ]
    order = [i.key for i in restore_order(items)]
    assert sorted(order) == sorted(i.key for i in items)
    for i in items:
        if i.parent:
            assert order.index(i.parent) < order.index(i.key)
    # the same key in the other area is another item
    with pytest.raises(ValueError, match="not in the set"):
        restore_order([item("x", "a", "datasets"), item("a")])


def test_with_parents_adds_what_the_deltas_need_as_not_kept():
    pool = {i.ref: i for i in [item("a"), item("b", "a"), item("c", "b"), item("z")]}
    got = {i.key: i.kept for i in with_parents([pool[("snapshots", "c")]], pool)}
    assert got == {"c": True, "b": False, "a": False}
    got = {i.key: i.kept for i in with_parents([pool[("snapshots", "c")], pool[("snapshots", "a")]], pool)}
    assert got == {"c": True, "b": False, "a": True}


def test_pruning_keeps_the_newest_sets_and_every_stream_their_chains_need():
    a, b, c = item("a"), item("b", "a"), item("c", "b")
    one = manifest("0001-20250301T020000Z", [a])
    two = manifest("0002-20250302T020000Z", [a, b])
    # a was deleted in the deployment before the third: still needed, as c's delta goes through b to a
    three = manifest("0003-20250303T020000Z", [replace(a, kept=False), replace(b, kept=False), c])
    gone, used = prune([(m.name, m) for m in (three, one, two)], keep=1)
    assert gone == ["0001-20250301T020000Z", "0002-20250302T020000Z"]
    assert used == {"pool/snapshots/a.stream", "pool/snapshots/b.stream", "pool/snapshots/c.stream"}
    # what is left restores: every parent of the kept set's items is in it
    assert [i.key for i in restore_order(three.items)] == ["a", "b", "c"]
    assert prune([(m.name, m) for m in (one, two, three)], keep=5) == ([], used)
    with pytest.raises(BackupError, match="at least one"):
        prune([(one.name, one)], keep=0)


def test_set_names_sort_by_age_and_number_on():
    assert set_name(3, "20250301T020000Z") == "0003-20250301T020000Z"
    assert next_number(["0003-20250301T020000Z", "pool", "WORKSPACE-BACKUP", ".partial-0004-x"]) == 4
    assert next_number([]) == 1
    with pytest.raises(ValueError):
        set_name(1, "../x")


@pytest.mark.parametrize("text, seconds", [("24h", 86400), ("30m", 1800), ("7d", 604800), ("90", 90), ("1.5h", 5400)])
def test_every_reads_a_time(text, seconds):
    assert parse_every(text) == seconds


@pytest.mark.parametrize("text", ["", "daily", "5s", "-1h", "1w"])
def test_every_refuses_what_is_not_a_time_of_a_minute_or_more(text):
    with pytest.raises(BackupError, match="--every"):
        parse_every(text)
