"""Storage quotas: limits with overrides, footprints that count shared files once, deleting outputs,
on a real SQLite database and a copying home store in a temporary directory."""

import os

import pytest

from workspace import lifecycle
from workspace.errors import UserError
from workspace.executions import Execution
from workspace.limits import quotas
from workspace.limits.footprints import Item, footprint
from workspace.limits.quotas import Limit, StorageQuota
from workspace.outputs import saved as outputs
from workspace.store.homes import CopyHomeStore


def policy(**kw) -> StorageQuota:
    return StorageQuota(**kw)


def test_limit_default_groups_take_the_largest_user_wins():
    p = policy(
        bytes="10G",
        files=1000,
        groups={"staff": {"bytes": "1T"}, "phd": {"bytes": "100G", "files": 5000}},
        users={"bob": {"files": 0}},
    )
    assert p.limit_for("ann", set()) == Limit(10 << 30, 1000)
    assert p.limit_for("ann", {"phd"}) == Limit(100 << 30, 5000)
    # staff leaves files out: the default's 1000, but phd's 5000 is larger
    assert p.limit_for("ann", {"staff", "phd"}) == Limit(1 << 40, 5000)
    assert p.limit_for("bob", {"phd"}) == Limit(100 << 30, None)  # 0 files: no limit
    assert policy(bytes="", files=0).limit_for("x", set()) == Limit(None, None)


def test_bad_override_names_the_setting():
    with pytest.raises(ValueError, match="unknown setting.*size"):
        policy(groups={"g": {"size": "1G"}}).limit_for("x", {"g"})


def write(path, name, data: bytes):
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_bytes(data)


def test_footprint_counts_a_hard_linked_file_once_and_says_what_deleting_frees(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "shared", b"x" * 1000)
    write(a, "only-a", b"y" * 10)
    b.mkdir()
    os.link(a / "shared", b / "shared")
    write(b, "only-b", b"z" * 100)
    os.symlink("shared", b / "link")
    fp = footprint([(Item("output", "a", {}, None), a), (Item("output", "b", {}, None), b)])
    assert (fp.bytes, fp.files) == (1110, 4)
    ia, ib = fp.items
    assert (ia.bytes, ia.files, ia.unique_bytes, ia.unique_files) == (1010, 2, 10, 1)
    assert (ib.bytes, ib.files, ib.unique_bytes, ib.unique_files) == (1100, 3, 100, 2)


def test_a_changed_file_is_another_file(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "f", b"1" * 50)
    b.mkdir()
    os.link(a / "f", b / "f")
    assert footprint([(Item("output", "a", {}, None), a), (Item("output", "b", {}, None), b)]).bytes == 50
    os.unlink(b / "f")
    write(b, "f", b"2" * 60)
    assert footprint([(Item("output", "a", {}, None), a), (Item("output", "b", {}, None), b)]).bytes == 110


@pytest.fixture
def env(database, tmp_path):
    db = database
    store = CopyHomeStore(root=str(tmp_path / "store"), uid=os.getuid(), gid=os.getgid()).setup()
    return db, store


def run_once(db, store, owner, name, content: dict[str, bytes], choice="latest", stop=True):
    plan = lifecycle.begin(db, owner, name, choice, None)
    lifecycle.restore(db, store, plan, None)
    home = store.live_path(plan.live_key)
    for rel, data in content.items():
        (home / rel).write_bytes(data)
    lifecycle.transition(db, plan.execution_id, "running")
    if stop:
        lifecycle.save(db, store, plan.execution_id, "user", None)
        lifecycle.record_snapshot_size(db, store, plan.execution_id)
    return plan


def test_usage_of_a_lineage_counts_unchanged_files_once_and_is_remeasured_after_a_change(env):
    db, store = env
    run_once(db, store, "ann", "ws", {"big": b"b" * 100_000})
    run_once(db, store, "ann", "ws", {"small": b"s" * 1000})
    run_once(db, store, "bob", "ws", {"other": b"o" * 5})
    usage = quotas.current(db, store, "ann")
    assert (usage.bytes, usage.files) == (101_000, 2)
    assert [i["label"] for i in usage.items] == ["the output of “ws” #1", "the output of “ws” #2"]
    assert usage.items[1]["unique_bytes"] == 1000  # #2 alone holds only what it added
    assert quotas.current(db, store, "ann").measured_at == usage.measured_at  # nothing changed: not walked
    outputs.delete_output(db, store, "ann", "ws", 1)
    again = quotas.current(db, store, "ann")
    assert (again.bytes, again.files) == (101_000, 2)  # #2 still holds the big file
    assert again.measured_at > usage.measured_at


def test_over_quota_refusal_names_the_biggest_and_the_way_out(env):
    db, store = env
    run_once(db, store, "ann", "thesis", {"data.bin": b"d" * 2_000_000})
    status = quotas.status(db, store, policy(bytes="1M"), "ann", set())
    assert status.over
    err = status.refusal("/services/workspace/storage")
    assert err.status_code == 403
    text = err.jupyterhub_message
    assert "2.0 MB of 1.0 MB" in text and "the output of “thesis” #1 (2.0 MB, 1 files)" in text
    assert "cleanup mode" in text and "/services/workspace/storage" in text
    near = quotas.status(db, store, policy(bytes="2.1M"), "ann", set())
    assert not near.over and near.near and "nearly full" in near.warning()
    assert quotas.status(db, store, policy(files=1), "ann", set()).over is False  # 1 of 1 files is not over
    assert quotas.status(db, store, policy(bytes="", files=0), "ann", set()).warning() is None


def test_deleting_an_output_is_refused_while_a_running_execution_continues_from_it(env):
    db, store = env
    run_once(db, store, "ann", "ws", {"f": b"1"})
    running = run_once(db, store, "ann", "ws", {"g": b"2"}, choice=1, stop=False)
    with pytest.raises(UserError) as e:
        outputs.delete_output(db, store, "ann", "ws", 1)
    assert e.value.status_code == 409 and "#2 (running)" in e.value.jupyterhub_message
    with pytest.raises(UserError) as e:
        outputs.delete_output(db, store, "ann", "ws", 2)
    assert e.value.status_code == 409 and "no saved output" in e.value.jupyterhub_message
    with pytest.raises(UserError) as e:
        outputs.delete_output(db, store, "ann", "ws", 9)
    assert e.value.status_code == 404
    lifecycle.save(db, store, running.execution_id, "user", None)
    with db.session() as s:
        key = s.get(Execution, running.execution_id).restored_from.snapshot_key
    assert store.has_snapshot(key)
    assert outputs.delete_output(db, store, "ann", "ws", 1)["number"] == 1
    assert not store.has_snapshot(key)
    with db.session() as s:
        assert not s.get(Execution, running.execution_id).restored_from.has_output


def test_cleanup_keeps_the_newest_of_each_workspace(env):
    db, store = env
    for content in ({"a": b"1"}, {"b": b"2"}, {"c": b"3"}):
        run_once(db, store, "ann", "one", content)
    run_once(db, store, "ann", "two", {"d": b"4"})
    result = outputs.cleanup(db, store, "ann", keep=1)
    assert sorted((d["workspace"], d["number"]) for d in result["deleted"]) == [("one", 1), ("one", 2)]
    assert result["kept"] == []
    plan = lifecycle.begin(db, "ann", "one", "latest", None)
    assert plan.restore_from == 3
    with pytest.raises(UserError):
        outputs.cleanup(db, store, "ann", keep=0)


def test_one_users_long_measurement_never_holds_up_another_users(env, monkeypatch):
    import threading

    db, store = env
    run_once(db, store, "slow", "ws", {"f": b"x"})
    run_once(db, store, "quick", "ws", {"g": b"y"})
    entered, release = threading.Event(), threading.Event()
    real = quotas.footprint

    def footprint(trees):
        if threading.current_thread().name == "slow":
            entered.set()
            release.wait(10)
        return real(trees)

    monkeypatch.setattr(quotas, "footprint", footprint)
    slow = threading.Thread(target=quotas.measure, args=(db, store, "slow"), name="slow")
    slow.start()
    assert entered.wait(10)
    done = threading.Thread(target=quotas.measure, args=(db, store, "quick"), name="quick")
    done.start()
    done.join(5)
    assert not done.is_alive(), "quick's measurement waited behind slow's"
    release.set()
    slow.join(10)


def test_home_files_notice_near_and_over_the_limit():
    assert quotas.home_files_notice(80, 100) is None and quotas.home_files_notice(10, None) is None
    assert "near its limit of 100" in quotas.home_files_notice(95, 100)
    over = quotas.home_files_notice(101, 100)
    assert "more than 100 files" in over and "cleanup mode" in over
