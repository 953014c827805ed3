"""Runs beside a workspace (#31), the rules: which workspace a server starts, names, and the lineage's
"latest" (a run is a branch). A real database; the hub and engine parts are tests/integration/test_runs.py."""

from __future__ import annotations

import pytest

from workspace.errors import UserError
from workspace.executions import (
    RUN_SERVER,
    Execution,
    Snapshot,
    check_workspace_name,
    get_or_create_workspace,
    new_execution,
    new_run_server,
    plan_continuation,
)
from workspace.start_request import workspace_of


def test_a_run_server_names_the_workspace_it_runs_beside():
    server = new_run_server()
    assert RUN_SERVER.match(server) and len(server) <= 30  # a slug JupyterHub 6 accepts
    assert workspace_of(server, {"beside": "thesis", "task": {"command": "true"}}) == ("thesis", server)
    assert workspace_of("thesis", {}) == ("thesis", None)


@pytest.mark.parametrize(
    "server, options, words",
    [
        ("run-0123456789ab", {}, "needs “beside”"),
        ("run-0123456789ab", {"beside": 3}, "needs “beside”"),
        ("run-0123456789ab", {"beside": "../x"}, "cannot be a workspace name"),
        ("run-0123456789ab", {"beside": "run-0123456789ac"}, "the platform gives its own servers"),
        ("thesis", {"beside": "other"}, "is for a run beside"),
    ],
)
def test_bad_beside_is_the_users_400(server, options, words):
    with pytest.raises(UserError) as e:
        workspace_of(server, options)
    assert e.value.status_code == 400 and words in str(e.value.log_message), e.value.log_message


def test_no_workspace_takes_a_runs_name():
    with pytest.raises(UserError):
        check_workspace_name("run-0123456789ab")
    assert check_workspace_name("run-lab") == "run-lab"  # only the platform's exact pattern is taken


def test_latest_never_continues_from_a_run(database):
    with database.session() as s:
        ws = get_or_create_workspace(s, "ada", "thesis")
        own = new_execution(s, ws, None, None)
        for state in ("preparing", "restoring", "running", "saving", "stopped"):
            own.to(s, state)
        own.snapshot = Snapshot(key="s-own", backend="btrfs")
        run = new_execution(s, ws, own, own)
        run.server = new_run_server()
        for state in ("preparing", "restoring", "running", "saving", "stopped"):
            run.to(s, state)
        run.snapshot = Snapshot(key="s-run", backend="btrfs")
        s.flush()
        s.refresh(ws)
        assert own.has_output and run.has_output
        assert ws.latest is own and ws.summary()["current"]["number"] == own.number
        assert plan_continuation(s, ws, "latest") == (own, own)
        assert plan_continuation(s, ws, run.number) == (run, run)  # asked for by its number
        assert run.as_dict()["beside"] and not own.as_dict()["beside"]
        assert s.get(Execution, run.id).server == run.server
