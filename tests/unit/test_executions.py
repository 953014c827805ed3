"""Execution records: state machine, lineage, continue-from, leases, migrations."""

import datetime as dt

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from workspace import courses, jobs, sweeps  # noqa: F401  (every model on Base.metadata, for the migration check)
from workspace import db as dbmod
from workspace.db import Base, Database
from workspace.errors import UserError
from workspace.executions import (
    InvalidTransition,
    Snapshot,
    claim,
    get_or_create_workspace,
    new_execution,
    parse_continue_from,
    plan_continuation,
    release_claim,
)
from workspace.labelling import projects as _labelling  # noqa: F401


@pytest.fixture
def db(database):
    return database


def finish(s, ex, with_output=True):
    for state in ("preparing", "restoring", "running", "saving"):
        if ex.state != state:
            ex.to(s, state)
    if with_output:
        ex.snapshot = Snapshot(key=ex.snapshot_key, backend="copy", bytes=1, files=1)
    ex.to(s, "stopped")


def test_migrations_match_the_models(db):
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], "a model changed without a migration in workspace/migrations/versions/"


def test_upgrade_twice_keeps_records(database_url, tmp_path):
    with Database(database_url, key_file=tmp_path / "key").session() as s:
        get_or_create_workspace(s, "ada", "thesis")
    with Database(database_url, key_file=tmp_path / "key").session() as s:
        assert get_or_create_workspace(s, "ada", "thesis").id == 1


def test_transitions_are_checked_and_stored(db):
    with db.session() as s:
        ws = get_or_create_workspace(s, "ada", "thesis")
        ex = new_execution(s, ws, None, None)
        ex.to(s, "preparing")
        with pytest.raises(InvalidTransition):
            ex.to(s, "saving")
        finish(s, ex)
        states = [t.state for t in ex.transitions]
        assert states == ["queued", "preparing", "restoring", "running", "saving", "stopped"]
        assert ex.started is not None and ex.stopped >= ex.started


@pytest.mark.parametrize(
    "value, expected",
    [(None, "latest"), ("", "latest"), ("latest", "latest"), ("Fresh", "fresh"), (3, 3), ("3", 3), ("#2", 2)],
)
def test_continue_from_values(value, expected):
    assert parse_continue_from(value) == expected


@pytest.mark.parametrize("value", [0, -1, "abc", "1.5", True, [1], {"n": 1}])
def test_bad_continue_from_is_a_400_with_a_sentence(value):
    with pytest.raises(UserError) as err:
        parse_continue_from(value)
    assert err.value.status_code == 400
    assert "must be “latest”, “fresh” or the number" in err.value.jupyterhub_message


def test_continuation_walks_up_to_the_nearest_output(db):
    with db.session() as s:
        ws = get_or_create_workspace(s, "ada", "thesis")
        assert plan_continuation(s, ws, "latest") == (None, None)
        e1 = new_execution(s, ws, None, None)
        finish(s, e1)
        e2 = new_execution(s, ws, e1, e1)
        e2.to(s, "preparing")
        e2.to(s, "stopped")  # closed while preparing: no output
        e3 = new_execution(s, ws, e2, e1)
        finish(s, e3, with_output=False)  # its save failed for good

        assert plan_continuation(s, ws, 2) == (e2, e1)
        assert plan_continuation(s, ws, 3) == (e3, e1)
        assert plan_continuation(s, ws, "latest") == (e1, e1)
        assert plan_continuation(s, ws, "fresh") == (None, None)
        with pytest.raises(UserError) as err:
            plan_continuation(s, ws, 9)
        assert err.value.jupyterhub_message == "Workspace “thesis” has no execution #9. It has executions #1–#3."


def test_executions_are_numbered_per_workspace(db):
    with db.session() as s:
        a = get_or_create_workspace(s, "ada", "a")
        b = get_or_create_workspace(s, "ada", "b")
        assert [new_execution(s, a, None, None).number for _ in range(3)] == [1, 2, 3]
        assert new_execution(s, b, None, None).number == 1


def test_a_lease_excludes_others_until_it_expires(db):
    with db.session() as s:
        ex = new_execution(s, get_or_create_workspace(s, "ada", "a"), None, None)
        ttl = dt.timedelta(minutes=5)
        assert claim(s, ex.id, "hub", ttl)
        assert not claim(s, ex.id, "service", ttl)
        assert claim(s, ex.id, "hub", ttl), "the owner renews"
        dbmod.move_clock(dt.timedelta(minutes=6))
        try:
            assert claim(s, ex.id, "service", ttl), "an expired lease can be taken"
        finally:
            dbmod.move_clock(-dt.timedelta(minutes=6))
        release_claim(s, ex.id, "service")
        assert claim(s, ex.id, "hub", ttl)


def test_save_progress_is_recorded_and_renews_the_lease(db):
    from workspace.executions import Execution
    from workspace.lifecycle import LEASE, _SaveProgress
    from workspace.store.copier import Transfer

    with db.session() as s:
        ex = new_execution(s, get_or_create_workspace(s, "ada", "a"), None, None)
        assert claim(s, ex.id, "hub", dt.timedelta(seconds=1))
        ex_id = ex.id
    _SaveProgress(db, ex_id, "hub")(Transfer(files=3, bytes=10, files_total=9, bytes_total=90))
    with db.session() as s:
        ex = s.get(Execution, ex_id)
        assert ex.save_progress["files"] == 3 and ex.save_progress["bytes_total"] == 90
        assert "3 of 9 files" in ex.save_progress["text"]
        assert ex.lease_until > dbmod.utcnow() + LEASE - dt.timedelta(minutes=1)
