"""The databases in a backup (workspace/setup/backup_db.py), on SQLite and on PostgreSQL: the copy is one
moment, the outputs read from it are exactly that moment's (also while another connection commits), a restore
refuses a database that is not empty and brings every record back, and the settled records say what the
backup could not hold."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url

from workspace.db import Database
from workspace.executions import Execution, Snapshot, Transition, get_or_create_workspace, new_execution
from workspace.setup import backup_db
from workspace.setup.backup_sets import BackupError


@pytest.fixture
def fresh_url(request, database_url, tmp_path):
    """Another empty database of the same kind as `database_url`: where a restore goes."""
    if database_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'restored' / 'w.sqlite'}"
        return
    admin = request.getfixturevalue("postgres_admin")
    name = f"test_{uuid.uuid4().hex[:16]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(admin.url).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))


def saved(db: Database, owner: str, state: str = "stopped") -> str:
    """An execution of owner/thesis in `state` (with an output when stopped); the output's key or ''."""
    with db.session() as s:
        ws = get_or_create_workspace(s, owner, "thesis")
        ex = new_execution(s, ws, ws.latest, ws.latest)
        for step in ("preparing", "restoring", "running", "saving", "stopped"):
            if ex.state == state:
                break
            if step == "stopped":
                ex.snapshot = Snapshot(key=ex.snapshot_key, backend="btrfs")
            ex.to(s, step)
        return ex.snapshot_key if ex.snapshot else ""


def test_a_copy_is_one_moment_and_its_records_are_that_moment_s(database, tmp_path, monkeypatch):
    first = saved(database, "ada")
    second = saved(database, "ada")
    later = []
    if database.url.startswith("postgresql"):
        # another connection commits an output while pg_dump runs: neither the dump nor the records hold it
        real = backup_db._pg_run

        def commit_meanwhile(tool, url, args):
            later.append(saved(database, "bob"))
            real(tool, url, args)

        monkeypatch.setattr(backup_db, "_pg_run", commit_meanwhile)
    entry, records = backup_db.copy(database.url, tmp_path, "workspace", records=True)
    assert entry["kind"] == ("postgresql" if later else "sqlite") and entry["bytes"] > 0
    assert entry["sha256"] == backup_db.sha256_of(tmp_path / Path(entry["file"]).name)
    assert [key for _, key, deleted in records.snapshots] == [first, second]
    assert [w[1] for w in records.wanted()] == [first, second]
    assert records.wanted()[1][2] == [first]  # the second continues the first: a delta from it
    assert later == [] or later[0] not in {k for _, k, _ in records.snapshots}


def test_a_restore_refuses_a_database_that_is_not_empty_and_brings_every_record_back(database, fresh_url, tmp_path):
    keys = [saved(database, "ada"), saved(database, "bob")]
    with database.session() as s:
        transitions = len(s.scalars(select(Transition)).all())
    entry, _ = backup_db.copy(database.url, tmp_path, "workspace")
    copy = tmp_path / Path(entry["file"]).name

    backup_db.check_target(entry, fresh_url, False, "workspace")
    backup_db.restore(entry, copy, fresh_url, False)
    restored = Database(fresh_url, key_file=tmp_path / "key")
    try:
        with restored.session() as s:
            assert sorted(s.scalars(select(Snapshot.key))) == sorted(keys)
            assert len(s.scalars(select(Transition)).all()) == transitions > 8
    finally:
        restored.engine.dispose()
    with pytest.raises(BackupError, match="exists already|is not empty"):
        backup_db.check_target(entry, fresh_url, False, "workspace")
    backup_db.check_target(entry, fresh_url, True, "workspace")  # --force
    backup_db.restore(entry, copy, fresh_url, True)  # over the first restore: the same records again
    engine = create_engine(fresh_url)
    try:
        with engine.connect() as conn:
            assert sorted(conn.scalars(select(Snapshot.key))) == sorted(keys)
    finally:
        engine.dispose()

    other = "postgresql+psycopg://x@/y" if entry["kind"] == "sqlite" else f"sqlite:///{tmp_path / 'x.sqlite'}"
    with pytest.raises(BackupError, match=f"is {entry['kind']}, and this machine's is"):
        backup_db.check_target(entry, other, False, "workspace")


def test_settled_records_end_what_ran_during_the_backup_and_delete_what_went(database):
    kept, gone = saved(database, "ada"), saved(database, "bob")
    saved(database, "ada", state="running")
    saved(database, "cy", state="saving")
    saved(database, "dee", state="queued")
    ended, deleted = backup_db.settle(database.url, [{"area": "snapshots", "key": gone}], "0001-20250301T020000Z")
    assert (ended, deleted) == (3, 1)
    with database.session() as s:
        executions = s.scalars(select(Execution)).all()
        assert [ex.state for ex in executions] == ["stopped"] * 5
        for ex in executions:
            if ex.snapshot is None:
                assert ex.stop_reason == "lost" and "0001-20250301T020000Z" in ex.error
                assert ex.transitions[-1].state == "stopped"
        assert {k for k, d in s.execute(select(Snapshot.key, Snapshot.deleted)) if d is None} == {kept}


def test_a_database_that_is_missing_or_of_another_kind_is_a_sentence(tmp_path):
    with pytest.raises(BackupError, match="does not exist; is WORKSPACE_DATA_DIR"):
        backup_db.copy(f"sqlite:///{tmp_path / 'nowhere.sqlite'}", tmp_path, "workspace")
    with pytest.raises(BackupError, match="only SQLite and PostgreSQL"):
        backup_db.kind_of("mysql://x@y/z")
