"""Collecting a course's work and locating outputs, on a real database (SQLite and PostgreSQL) and a copying
home store: each enrolled student's latest output (or the latest before a deadline), nothing of anyone
else, a manifest that says why a student has nothing; an output deleted, running or missing is a 4xx."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import tarfile

import pytest
from sqlalchemy import select

from workspace import lifecycle
from workspace.courses import Course
from workspace.db import move_clock, utcnow
from workspace.errors import UserError
from workspace.executions import Execution, Snapshot, find_workspace
from workspace.outputs import archives
from workspace.outputs import saved as outputs
from workspace.store.homes import CopyHomeStore

from .test_dataset_versions import saved_output


def read_tar(data: bytes) -> dict[str, bytes | str]:
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar:
            out[m.name] = tar.extractfile(m).read() if m.isreg() else ("link:" + m.linkname if m.issym() else "dir")
    return out


def collect(db, store, students, workspace="lab1", before=None, rel=b"submission", kind="tar.gz", left_out=None):
    items = outputs.collection(db, store, None, students, workspace, before, left_out)
    chunks = []
    w = archives.writer(kind, chunks.append)
    outputs.write_collection(w, items, rel, "cs101-submission")
    w.close()
    return b"".join(chunks), items


def test_each_enrolled_students_latest_work_and_a_manifest(database, store):
    db = database
    saved_output(db, store, "ann", "lab1", {"submission/a.py": b"print('v1')", "notes.txt": b"private"})
    deadline = utcnow() + dt.timedelta(seconds=1)
    move_clock_by(dt.timedelta(hours=1))
    try:
        saved_output(db, store, "ann", "lab1", {"submission/a.py": b"print('v2, late')"})
        saved_output(db, store, "bob", "lab1", {"submission/b.py": b"bob", "submission/data/x.csv": b"1,2"})
        saved_output(db, store, "zed", "lab1", {"submission/z.py": b"not enrolled"})  # same workspace name
        saved_output(db, store, "cat", "lab1", {"other/c.py": b"no submission dir"})
        saved_output(db, store, "dan", "lab1", {"elsewhere": b"x"})
        os.symlink("/etc", store.snapshot_path(_key(db, "dan", "lab1")) / "submission")  # a link as the path
        students = ["ann", "bob", "cat", "dan", "eve"]

        data, items = collect(db, store, students, left_out={"prof2": "not a student (an instructor)"})
        files = read_tar(data)
        top = "cs101-submission"
        assert files[f"{top}/students/ann/submission/a.py"] == b"print('v2, late')"
        assert files[f"{top}/students/bob/submission/data/x.csv"] == b"1,2"
        assert not any("zed" in name or "notes.txt" in name or "c.py" in name for name in files), files.keys()
        assert not any(isinstance(v, bytes) and b"root:x:0:0" in v for v in files.values())
        rows = {r["student"]: r for r in json.loads(files[f"{top}/manifest.json"])}
        assert set(rows) == {"ann", "bob", "cat", "dan", "eve", "prof2"}
        assert rows["ann"]["status"] == "collected" and rows["ann"]["execution"] == 2 and rows["ann"]["files"] == 1
        assert rows["bob"]["bytes"] == 6 and rows["bob"]["files"] == 2
        assert rows["cat"]["status"] == "missing" and "no “submission” in output #1" in rows["cat"]["reason"]
        assert rows["dan"]["status"] == "missing" and "is a link" in rows["dan"]["reason"]
        assert rows["eve"]["reason"] == "has no workspace “lab1”"
        assert rows["prof2"]["status"] == "skipped" and "instructor" in rows["prof2"]["reason"]
        table = list(csv.DictReader(io.StringIO(files[f"{top}/manifest.csv"].decode())))
        assert [r["student"] for r in table] == ["ann", "bob", "cat", "dan", "eve", "prof2"]
        assert table[0]["saved_at"] == rows["ann"]["saved_at"]

        # before the deadline: ann's first output; bob had saved nothing yet
        data, _ = collect(db, store, students, before=deadline)
        files = read_tar(data)
        assert files[f"{top}/students/ann/submission/a.py"] == b"print('v1')"
        rows = {r["student"]: r for r in json.loads(files[f"{top}/manifest.json"])}
        assert rows["ann"]["execution"] == 1
        assert rows["bob"]["status"] == "missing" and "saved nothing of “lab1” before" in rows["bob"]["reason"]

        # the whole output, as a zip
        data, items = collect(db, store, ["ann"], rel=b"", kind="zip")
        assert [i.status for i in items] == ["collected"]
    finally:
        move_clock_by(-dt.timedelta(hours=1))


def move_clock_by(delta):
    move_clock(delta)


def _key(db, owner, name) -> str:
    with db.session() as s:
        return max(find_workspace(s, owner, name).executions, key=lambda e: e.number).snapshot.key


def test_the_course_workspace_is_its_setups(database):
    with database.session() as s:
        s.add(Course(name="cs101", workspace="lab7"))
    assert outputs.course_workspace(database, "cs101") == "lab7"
    assert outputs.course_workspace(database, "ml200") == "ml200"


def test_locating_an_output_says_why_there_is_none(database, store):
    db = database
    saved_output(db, store, "ann", "lab1", {"a.txt": b"a"})
    found = outputs.locate(db, store, None, "ann", "lab1", 1)
    assert found.root == store.snapshot_path(_key(db, "ann", "lab1")) and found.label == "lab1-1"
    for args, status, words in (
        (("ann", "nope", 1), 404, "There is no workspace “nope”."),
        (("ann", "lab1", 7), 404, "has no execution #7"),
        (("bob", "lab1", 1), 404, "There is no workspace"),  # another's: theirs is not asked for
    ):
        with pytest.raises(UserError) as e:
            outputs.locate(db, store, None, *args)
        assert e.value.status_code == status and words in e.value.jupyterhub_message
    with db.session() as s:
        ex = s.scalars(select(Execution)).first()
        ex.snapshot.deleted = utcnow()
    with pytest.raises(UserError) as e:
        outputs.locate(db, store, None, "ann", "lab1", 1)
    assert e.value.status_code == 410 and "was deleted" in e.value.jupyterhub_message
    lifecycle.begin(db, "ann", "lab2", "latest", None)  # not saved yet
    with pytest.raises(UserError) as e:
        outputs.locate(db, store, None, "ann", "lab2", 1)
    assert e.value.status_code == 409 and "its output exists once its home is saved" in e.value.jupyterhub_message


def test_an_output_is_read_where_it_is_on_this_machine(database, store, tmp_path):
    """The central store, the store of record, a node's store mounted here; not a store agent's (another
    machine): there the output is a 409 until its copy arrives."""
    db = database
    saved_output(db, store, "ann", "lab1", {"a.txt": b"a"})
    key = _key(db, "ann", "lab1")
    elsewhere = CopyHomeStore(root=str(tmp_path / "node2"), uid=os.getuid(), gid=os.getgid()).setup()
    os.rename(store.snapshot_path(key), elsewhere.snapshot_path(key))
    with db.session() as s:
        s.scalars(select(Snapshot).where(Snapshot.key == key)).one().node = "node2"

    class Nodes:
        def __init__(self, node_store):
            self.node_store = node_store

        def of(self, node):
            return self.node_store if node == "node2" else store

    assert outputs.locate(db, store, None, "ann", "lab1", 1, record=elsewhere).root == elsewhere.snapshot_path(key)
    assert outputs.locate(db, store, Nodes(elsewhere), "ann", "lab1", 1).root == elsewhere.snapshot_path(key)
    agent = type("AgentStore", (), {"has_snapshot": lambda self, k: True, "snapshot_path": lambda self, k: "/x"})()
    with pytest.raises(UserError) as e:
        outputs.locate(db, store, Nodes(agent), "ann", "lab1", 1)
    assert e.value.status_code == 409 and "still being copied from node2" in e.value.jupyterhub_message
