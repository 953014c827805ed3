"""Dataset versions: where one comes from, how they are numbered, deleting one a workspace mounts; on a real
SQLite database and a copying home store in a temporary directory."""

import os

import pytest

from workspace import dataset_versions, lifecycle
from workspace.caller import Caller
from workspace.datasets import Dataset, DatasetRules, find_dataset
from workspace.errors import UserError
from workspace.executions import Execution
from workspace.limits.quotas import StorageUsage
from workspace.store.homes import StoreFullError

PROF = Caller("prof")
ROOT = Caller("root", admin=True)


@pytest.fixture
def env(database, store, tmp_path):
    db = database
    with db.session() as s:
        s.add(Dataset(owner="prof", name="mnist"))
    host = tmp_path / "host"
    (host / "train").mkdir(parents=True)
    (host / "train/a.bin").write_bytes(b"a" * 1000)
    return db, store, DatasetRules(), host


def saved_output(db, store, owner, name, files: dict[str, bytes]):
    """An execution of `name` that ran and saved `files` in its home."""
    plan = lifecycle.begin(db, owner, name, "latest", None)
    lifecycle.restore(db, store, plan, None)
    home = store.live_path(plan.live_key)
    for rel, data in files.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_bytes(data)
    lifecycle.transition(db, plan.execution_id, "running")
    lifecycle.save(db, store, plan.execution_id, "user", None)
    return plan


def test_versions_are_numbered_and_a_deleted_number_is_not_reused(env):
    db, store, rules, host = env
    first = dataset_versions.add(db, store, rules, "prof", "mnist", {"from_path": str(host)}, ROOT)
    assert (first["version"], first["origin"], first["origin_detail"], first["bytes"], first["files"]) == (
        1,
        "host",
        str(host),
        1000,
        1,
    )
    dataset_versions.add(db, store, rules, "prof", "mnist", {"from_path": str(host / "train")}, ROOT)
    dataset_versions.delete(db, store, "prof", "mnist", 2, PROF)
    assert dataset_versions.add(db, store, rules, "prof", "mnist", {"from_path": str(host)}, ROOT)["version"] == 3
    with db.session() as s:
        ds = find_dataset(s, "prof", "mnist")
        assert [v.number for v in ds.live_versions()] == [1, 3]
        assert dataset_versions.next_number(ds) == 4
        gone = next(v for v in ds.versions if v.number == 2)
        assert not store.dataset_path(gone.key).exists()
        # the owner's storage was measured after the last one: v1 and v3 (two copies) count at once
        assert s.get(StorageUsage, "prof").bytes == 2000


def test_a_version_from_an_output_or_a_folder_of_it(env):
    db, store, rules, _ = env
    saved_output(db, store, "prof", "prep", {"data/x.csv": b"1,2\n", "notes.txt": b"n"})
    whole = dataset_versions.add(
        db, store, rules, "prof", "mnist", {"from_execution": {"workspace": "prep", "number": 1}}, PROF
    )
    assert (whole["origin"], whole["origin_detail"], whole["files"]) == ("execution", "prep#1", 2)
    part = {"from_execution": {"workspace": "prep", "number": "1", "path": "data"}}
    assert dataset_versions.add(db, store, rules, "prof", "mnist", part, PROF)["origin_detail"] == "prep#1:data"


@pytest.mark.parametrize(
    "data, who, status, words",
    [
        ({}, PROF, 400, "Say where the version comes from: from_execution or from_path."),
        ({"from_path": "/srv/data"}, PROF, 403, "Only administrators can import"),
        ({"from_path": "relative"}, ROOT, 400, "from_path must be an absolute path"),
        ({"from_path": "/no/such/dir"}, ROOT, 400, "/no/such/dir does not exist."),
        ({"from_execution": "prep#1"}, PROF, 400, 'from_execution needs {"workspace"'),
        ({"from_execution": {"workspace": "prep", "number": "x"}}, PROF, 400, "must be an execution number like 3"),
        ({"from_execution": {"workspace": "prep", "number": 9}}, PROF, 404, "You have no execution prep#9."),
        ({"from_execution": {"workspace": "prep", "number": 2}}, PROF, 400, "Execution prep#2 has no saved output."),
        ({"from_path": "/srv/data"}, Caller("ann"), 404, "There is no dataset prof/mnist that you can see."),
    ],
)
def test_where_a_version_comes_from_is_checked_with_a_sentence(env, data, who, status, words):
    db, store, rules, _ = env
    saved_output(db, store, "prof", "prep", {"a": b"a"})
    lifecycle.begin(db, "prof", "prep", "latest", None)  # #2: no output yet
    with pytest.raises(UserError) as err:
        dataset_versions.add(db, store, rules, "prof", "mnist", data, who)
    assert err.value.status_code == status and words in err.value.jupyterhub_message
    with db.session() as s:
        assert find_dataset(s, "prof", "mnist").versions == []  # nothing recorded


def test_a_full_store_is_a_507_and_a_tree_the_rules_refuse_is_not_recorded(env, tmp_path):
    db, store, rules, _ = env
    with db.session() as s:
        dataset_id = find_dataset(s, "prof", "mnist").id

    def full(key, check):
        raise StoreFullError("no space left")

    with pytest.raises(UserError) as err:
        dataset_versions.make(db, store, rules, dataset_id, full, "host", "/srv/x", "root")
    assert err.value.status_code == 507 and "The storage is full" in err.value.jupyterhub_message
    bad = tmp_path / "bad"
    bad.mkdir()
    os.symlink("/etc/passwd", bad / "escape")
    with pytest.raises(UserError) as err:
        dataset_versions.make(
            db, store, rules, dataset_id, lambda k, c: store.dataset_from_path(bad, k, c), "host", str(bad), "root"
        )
    assert "a link pointing outside" in err.value.jupyterhub_message
    with db.session() as s:
        assert find_dataset(s, "prof", "mnist").versions == []


def test_a_version_a_running_workspace_mounts_cannot_be_deleted(env):
    db, store, rules, host = env
    dataset_versions.add(db, store, rules, "prof", "mnist", {"from_path": str(host)}, ROOT)
    plan = lifecycle.begin(db, "ann", "lab", "latest", None)
    with db.session() as s:
        version = find_dataset(s, "prof", "mnist").versions[0]
        s.get(Execution, plan.execution_id).datasets = [{"slot": 0, "ref": "prof/mnist:1", "version_id": version.id}]
    with pytest.raises(UserError) as err:
        dataset_versions.delete(db, store, "prof", "mnist", 1, PROF)
    assert (err.value.status_code, err.value.jupyterhub_message) == (
        409,
        "Version 1 of prof/mnist is mounted by a running workspace (ann/lab); stop it first.",
    )
    lifecycle.transition(db, plan.execution_id, "failed")
    dataset_versions.delete(db, store, "prof", "mnist", 1, PROF)
    with pytest.raises(UserError) as err:
        dataset_versions.delete(db, store, "prof", "mnist", 1, PROF)
    assert (err.value.status_code, err.value.jupyterhub_message) == (404, "The dataset prof/mnist has no version 1.")
