"""What the API and the pages read of workspaces and executions: the listing, one's history, one execution,
its usage samples, and what a workspace may be named; on a real SQLite database."""

import datetime as dt

import pytest

from workspace import executions
from workspace.errors import UserError
from workspace.executions import UsageSample, get_or_create_workspace, new_execution


@pytest.fixture
def db(database):
    with database.session() as s:
        thesis = get_or_create_workspace(s, "ada", "thesis")
        for _ in range(2):
            ex = new_execution(s, thesis, None, None)
        for state in ("preparing", "restoring", "running"):
            ex.to(s, state)
        t0 = dt.datetime(2026, 12, 1, 10, 0)
        s.add_all(
            [UsageSample(execution_id=ex.id, at=t0 + dt.timedelta(minutes=m), cpu_percent=float(m)) for m in (2, 1, 3)]
        )
        get_or_create_workspace(s, "ada", "alpha")
        get_or_create_workspace(s, "bob", "other")
    return database


def test_the_listing_is_by_name_with_the_newest_execution(db):
    rows = executions.workspaces_of(db, "ada")
    assert [(r["name"], r["owner"], r["executions"], r["current"]) for r in rows] == [
        ("alpha", "ada", 0, None),
        ("thesis", "ada", 2, {"number": 2, "state": "running"}),
    ]
    assert "latest" not in rows[0]
    full = executions.workspaces_of(db, "ada", latest_in_full=True)
    assert full[0]["latest"] is None and full[1]["latest"]["number"] == 2 and full[1]["latest"]["transitions"]


def test_a_history_is_oldest_first_and_none_for_no_workspace(db):
    assert [e["number"] for e in executions.history(db, "ada", "thesis")] == [1, 2]
    assert executions.history(db, "ada", "alpha") == []
    assert executions.history(db, "ada", "nothing") is None
    assert executions.history(db, "bob", "thesis") is None  # another's name is not mine


@pytest.mark.parametrize(
    "name, number, words",
    [
        ("nothing", 1, "There is no workspace “nothing”."),
        ("thesis", 3, "Workspace “thesis” has no execution #3."),
        ("thesis", 2**40, "Workspace “thesis” has no execution #1099511627776."),
    ],
)
def test_a_missing_execution_is_a_404_with_a_sentence(db, name, number, words):
    with pytest.raises(UserError) as err:
        executions.execution_of(db, "ada", name, number)
    assert (err.value.status_code, err.value.jupyterhub_message) == (404, words)


def test_one_execution_and_its_usage_oldest_first(db):
    assert executions.execution_of(db, "ada", "thesis", 2)["state"] == "running"
    usage = executions.usage_of(db, "ada", "thesis", 2)
    assert (usage["number"], usage["state"]) == (2, "running")
    assert [u["cpu_percent"] for u in usage["samples"]] == [1.0, 2.0, 3.0]
    assert executions.usage_of(db, "ada", "thesis", 1)["samples"] == []
    with pytest.raises(UserError) as err:  # no workspace: the same words as no execution
        executions.usage_of(db, "ada", "nothing", 1)
    assert err.value.jupyterhub_message == "Workspace “nothing” has no execution #1."
    with db.session() as s:
        ws = executions.find_workspace(s, "ada", "thesis")
        assert ws.latest.number == 2
        assert executions.latest_sample(s, ws.latest.id).cpu_percent == 3.0
        assert executions.latest_sample(s, ws.executions[0].id) is None
        assert executions.find_workspace(s, "ada", "alpha").latest is None


def test_a_workspace_name_is_a_server_name_slug():
    assert executions.check_workspace_name("cs101-lab2") == "cs101-lab2"
    for bad in ("", "Thesis", "-x", "a b", "x" * 64):
        with pytest.raises(UserError) as err:
            executions.check_workspace_name(bad)
        assert err.value.status_code == 400 and "cannot be a workspace name" in err.value.jupyterhub_message
