"""What the admin page shows: every unfinished execution with its queue place and last usage
(queue_views.overview), and every user's storage (quotas.per_user); on a real SQLite database."""

import datetime as dt

from workspace.executions import Execution, Snapshot, UsageSample, get_or_create_workspace, new_execution
from workspace.limits import queue_views, quotas
from workspace.limits.quotas import StorageUsage


def execution(s, owner, name, state, rtype=None, output_bytes=None) -> Execution:
    ex = new_execution(s, get_or_create_workspace(s, owner, name), None, None)
    ex.resource_type = rtype
    path = {"queued": [], "running": ["preparing", "restoring", "running"]}.get(
        state, ["preparing", "restoring", "running", "saving", "stopped"]
    )
    for step in path:
        ex.to(s, step)
    if output_bytes is not None:
        ex.snapshot = Snapshot(key=ex.snapshot_key, backend="copy", bytes=output_bytes, files=2)
    return ex


def test_the_overview_lists_what_waits_runs_or_saves_with_its_place_and_usage(database):
    with database.session() as s:
        running = execution(s, "ada", "a", "running")
        execution(s, "bob", "b", "stopped")
        execution(s, "cat", "c", "queued", rtype="gpu")
        execution(s, "dan", "d", "queued", rtype="gpu")
        t0 = dt.datetime(2026, 12, 1, 10)
        s.add_all(
            [
                UsageSample(execution_id=running.id, at=t0, cpu_percent=10.0),
                UsageSample(execution_id=running.id, at=t0 + dt.timedelta(minutes=1), cpu_percent=20.0),
            ]
        )
    rows = queue_views.overview(database)
    assert [(r["owner"], r["workspace"], r["execution"]["state"], r["queue"]) for r in rows] == [
        ("ada", "a", "running", None),
        ("cat", "c", "queued", (1, 2)),
        ("dan", "d", "queued", (2, 2)),
    ]
    assert rows[0]["usage"]["cpu_percent"] == 20.0 and rows[1]["usage"] is None


def test_storage_per_user_sums_live_outputs_largest_first_with_the_measured_footprint(database):
    with database.session() as s:
        execution(s, "ada", "a", "stopped", output_bytes=10)
        execution(s, "ada", "b", "stopped", output_bytes=5)
        execution(s, "bob", "b", "stopped", output_bytes=100)
        gone = execution(s, "bob", "b", "stopped", output_bytes=1000)
        gone.snapshot.deleted = dt.datetime(2026, 12, 2)
        at = dt.datetime(2026, 12, 3)
        s.add_all(
            [
                StorageUsage(owner="ada", bytes=12, files=3, measured_at=at),
                StorageUsage(owner="cat", bytes=7, files=1, measured_at=at),  # datasets only
            ]
        )
    rows = quotas.per_user(database)
    assert rows == [
        {"owner": "bob", "outputs": 1, "bytes": 100, "files": 2, "footprint": None},
        {
            "owner": "ada",
            "outputs": 2,
            "bytes": 15,
            "files": 4,
            "footprint": {"bytes": 12, "files": 3, "at": "2026-12-03T00:00:00Z"},
        },
        {
            "owner": "cat",
            "outputs": 0,
            "bytes": 0,
            "files": 0,
            "footprint": {"bytes": 7, "files": 1, "at": "2026-12-03T00:00:00Z"},
        },
    ]
    # plain ints on both databases (PostgreSQL's SUM of a BIGINT is a NUMERIC: a Decimal JSON cannot carry)
    assert {type(r[k]) for r in rows for k in ("outputs", "bytes", "files")} == {int}
