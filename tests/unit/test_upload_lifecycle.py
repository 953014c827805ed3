"""An upload's life: begun (checked against the dataset, the pending uploads and the quota), completed
into a version (size and checksum checked); on a real SQLite database and a copying home store."""

import hashlib

import pytest

from workspace.caller import Caller
from workspace.datasets import Dataset, DatasetRules, find_dataset
from workspace.errors import UserError
from workspace.limits.quotas import StorageQuota, StorageUsage
from workspace.uploads import staging as uploads

PROF = Caller("prof")


@pytest.fixture
def env(database, store):
    with database.session() as s:
        s.add(Dataset(owner="prof", name="weights"))
    return database, store


def begin(env, data, who=PROF, quota=None, max_pending=4):
    db, store = env
    quota = quota or StorageQuota()
    return uploads.begin(db, store, "prof", "weights", data, who, quota=quota, max_pending=max_pending)


def complete(env, up, sha256=None, who=PROF):
    db, store = env
    return uploads.complete(
        db, store, "prof", "weights", up.id, sha256, who, rules=DatasetRules(), sandbox=None, quota=StorageQuota()
    )


def send(up, data: bytes):
    with up.open_at(up.offset) as f:
        f.write(data)


@pytest.mark.parametrize(
    "data, who, status, words",
    [
        ({"size": 3}, PROF, 400, "Give the file's name (without folders)"),
        ({"filename": "a/b", "size": 3}, PROF, 400, "Give the file's name (without folders)"),
        ({"filename": "a", "size": -1}, PROF, 400, "Give the file's size in bytes"),
        ({"filename": "a", "size": 3, "sha256": "xyz"}, PROF, 400, "“sha256” must be the file's SHA-256"),
        ({"filename": "a.txt", "size": 3, "unpack": True}, PROF, 400, "a.txt is not an archive this server unpacks"),
        ({"filename": "a", "size": 3}, Caller("ann"), 404, "There is no dataset prof/weights"),
    ],
)
def test_a_bad_upload_is_refused_before_it_begins(env, data, who, status, words):
    with pytest.raises(UserError) as err:
        begin(env, data, who)
    assert err.value.status_code == status and words in err.value.jupyterhub_message
    assert list(uploads.pending(env[1].uploads_dir)) == []


def test_uploads_under_way_count_against_the_quota_and_their_number_is_bounded(env):
    begin(env, {"filename": "a", "size": 600})
    with pytest.raises(UserError) as err:
        begin(env, {"filename": "b", "size": 600}, quota=StorageQuota(bytes="1000"))
    assert err.value.status_code == 413 and "held by uploads under way" in err.value.jupyterhub_message
    with pytest.raises(UserError) as err:
        begin(env, {"filename": "c", "size": 1}, max_pending=1)
    assert err.value.status_code == 429 and "You have 1 unfinished uploads" in err.value.jupyterhub_message
    assert uploads.reserved(env[1].uploads_dir, "prof") == (600, 1)


def test_an_upload_is_its_uploaders_and_becomes_the_next_version(env):
    db, store = env
    up = begin(env, {"filename": "w.bin", "size": 6})
    root = store.uploads_dir
    assert (
        uploads.find(root, "prof", "weights", up.id, Caller("root", admin=True)).id == up.id
    )  # an administrator sees it
    for owner, name, user in (("prof", "other", "prof"), ("prof", "weights", "ann")):
        with pytest.raises(UserError) as err:
            uploads.find(root, owner, name, up.id, Caller(user))
        assert (err.value.status_code, err.value.jupyterhub_message) == (404, "There is no such upload.")
    send(up, b"abc")
    with pytest.raises(UserError) as err:
        complete(env, up)
    assert err.value.status_code == 409 and "send the rest from byte 3 first" in err.value.jupyterhub_message
    send(up, b"def")
    version = complete(env, up, sha256=hashlib.sha256(b"abcdef").hexdigest().upper())
    assert (version["version"], version["origin"], version["origin_detail"], version["bytes"]) == (
        1,
        "upload",
        "w.bin",
        6,
    )
    assert not up.dir.exists()
    with db.session() as s:
        key = find_dataset(s, "prof", "weights").versions[0].key
        assert s.get(StorageUsage, "prof").bytes == 6  # measured at once
    assert (store.dataset_path(key) / "w.bin").read_bytes() == b"abcdef"


def test_a_damaged_upload_is_discarded(env):
    up = begin(env, {"filename": "w.bin", "size": 3, "sha256": "0" * 64})
    send(up, b"abc")
    with pytest.raises(UserError) as err:
        complete(env, up)
    assert err.value.status_code == 400 and "w.bin arrived damaged" in err.value.jupyterhub_message
    assert not up.dir.exists()
    with env[0].session() as s:
        assert find_dataset(s, "prof", "weights").versions == []
