"""The Prometheus metrics (workspace/reports/metrics.py) on real databases (SQLite and PostgreSQL), and who may read
them (workspace/service/metrics_api.py) through a real tornado server with the hub's answer stubbed."""

import os
import random
from types import SimpleNamespace

import pytest
from jupyterhub.services.auth import HubOAuth
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from tornado import web
from tornado.httpclient import AsyncHTTPClient
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from workspace.executions import FINAL, STATES, TRANSITIONS, Execution, get_or_create_workspace, new_execution
from workspace.reports import metrics
from workspace.reports.metrics import HISTOGRAMS, WorkspaceCollector
from workspace.service import metrics_api

PATHS = {
    "queued": [],
    "preparing": ["preparing"],
    "pulling": ["preparing", "pulling"],
    "restoring": ["preparing", "restoring"],
    "running": ["preparing", "restoring", "running"],
    "saving": ["preparing", "restoring", "running", "saving"],
    "save_failed": ["preparing", "restoring", "running", "saving", "save_failed"],
    "stopped": ["preparing", "restoring", "running", "saving", "stopped"],
    "failed": ["preparing", "failed"],
}


def execution(s, owner, state, rtype=None, restore=None, save=None) -> Execution:
    """An execution of a new workspace of `owner`, walked to `state`; restore/save: (seconds, bytes, files)."""
    ex = new_execution(s, get_or_create_workspace(s, owner, f"ws{random.randrange(10**9)}"), None, None)
    ex.resource_type = rtype
    for step in PATHS[state]:
        ex.to(s, step)
    if restore:
        ex.restore_seconds, ex.restore_bytes, ex.restore_files = restore
    if save:
        ex.save_seconds, ex.save_bytes, ex.save_files = save
    return ex


def scrape(collector: WorkspaceCollector) -> dict:
    """{(sample name, sorted labels): value} of one scrape, through the text format and its parser."""
    text = generate_latest(metrics.registry(collector)).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def populated(database):
    with database.session() as s:
        execution(s, "ada", "queued", "gpu")
        execution(s, "bob", "queued", "gpu")
        execution(s, "cat", "queued", "cpu")
        execution(s, "dan", "preparing", "gpu")
        execution(s, "eve", "running", "cpu", restore=(0.04, 2_000_000, 5))
        execution(s, "fay", "saving", "cpu", restore=(3.0, 50_000_000, 1500))
        execution(s, "gil", "save_failed", None, restore=(0.2, 0, 0))
        execution(s, "hal", "stopped", "cpu", restore=(0.07, 10, 1), save=(45.5, 3_000_000_000, 120_000))
        execution(s, "ivy", "stopped", None, restore=(700.0, 2_000_000_000_000, 20_000_000), save=(0.3, 5, 2))
        execution(s, "jon", "failed", "gpu")
    return database


def test_executions_by_state_every_state_with_zeros(populated):
    samples = scrape(WorkspaceCollector(populated))
    expected = dict.fromkeys(STATES, 0) | {
        "queued": 3,
        "preparing": 1,
        "running": 1,
        "saving": 1,
        "save_failed": 1,
        "stopped": 2,
        "failed": 1,
    }
    assert {state: value(samples, "workspace_executions", state=state) for state in STATES} == expected


def test_the_queue_per_resource_type_with_the_configured_types_at_zero(populated):
    samples = scrape(WorkspaceCollector(populated, resource_types=["cpu", "gpu", "a100"]))
    queue = {k[1][0][1]: v for k, v in samples.items() if k[0] == "workspace_queue_length"}
    assert queue == {"gpu": 2, "cpu": 1, "a100": 0}


def test_restore_and_save_histograms_from_the_records(populated):
    s = scrape(WorkspaceCollector(populated))
    # five restores: 0.04, 3.0, 0.2, 0.07, 700 s
    assert value(s, "workspace_restore_duration_seconds_count") == 5
    assert value(s, "workspace_restore_duration_seconds_sum") == pytest.approx(703.31)
    restore = {le: value(s, "workspace_restore_duration_seconds_bucket", le=le) for le in ("0.05", "0.1", "0.25")}
    assert restore == {"0.05": 1, "0.1": 2, "0.25": 3}
    assert value(s, "workspace_restore_duration_seconds_bucket", le="5.0") == 4
    assert value(s, "workspace_restore_duration_seconds_bucket", le="600.0") == 4
    assert value(s, "workspace_restore_duration_seconds_bucket", le="1800.0") == 5
    assert value(s, "workspace_restore_duration_seconds_bucket", le="+Inf") == 5
    # bytes and files per restore
    assert value(s, "workspace_restore_size_bytes_sum") == 2_000_000 + 50_000_000 + 10 + 2_000_000_000_000
    assert value(s, "workspace_restore_size_bytes_bucket", le="1e+06") == 2  # 0 and 10 bytes
    assert value(s, "workspace_restore_size_bytes_bucket", le="1e+12") == 4
    assert value(s, "workspace_restore_size_bytes_bucket", le="+Inf") == 5
    assert value(s, "workspace_restore_files_sum") == 5 + 1500 + 1 + 20_000_000
    assert value(s, "workspace_restore_files_bucket", le="10.0") == 3  # 5, 0, 1 files
    assert value(s, "workspace_restore_files_bucket", le="1e+07") == 4
    # two saves: 45.5 s (3 GB, 120,000 files) and 0.3 s (5 B, 2 files); unfinished saves count when done
    assert value(s, "workspace_save_duration_seconds_count") == 2
    assert value(s, "workspace_save_duration_seconds_sum") == pytest.approx(45.8)
    assert value(s, "workspace_save_duration_seconds_bucket", le="0.25") == 0
    assert value(s, "workspace_save_duration_seconds_bucket", le="0.5") == 1
    assert value(s, "workspace_save_duration_seconds_bucket", le="30.0") == 1
    assert value(s, "workspace_save_duration_seconds_bucket", le="60.0") == 2
    assert value(s, "workspace_save_size_bytes_sum") == 3_000_000_005
    assert value(s, "workspace_save_size_bytes_bucket", le="1e+09") == 1
    assert value(s, "workspace_save_size_bytes_bucket", le="1e+10") == 2
    assert value(s, "workspace_save_files_sum") == 120_002
    assert value(s, "workspace_save_files_bucket", le="100000.0") == 1
    assert value(s, "workspace_save_files_bucket", le="1e+06") == 2


def test_an_empty_database_gives_zeros(database):
    s = scrape(WorkspaceCollector(database, resource_types=["cpu"]))
    assert all(value(s, "workspace_executions", state=state) == 0 for state in STATES)
    assert value(s, "workspace_queue_length", resource_type="cpu") == 0
    for h in HISTOGRAMS:
        assert value(s, f"{h.name}_count") == 0 and value(s, f"{h.name}_sum") == 0
        assert value(s, f"{h.name}_bucket", le="+Inf") == 0


def test_store_use_of_this_node_from_statvfs(database, tmp_path, monkeypatch):
    fake = os.statvfs_result((4096, 4096, 1000, 400, 300, 0, 0, 0, 0, 255))  # bsize, frsize, blocks, bfree, bavail
    seen = []
    monkeypatch.setattr(os, "statvfs", lambda path: seen.append(path) or fake)
    s = scrape(WorkspaceCollector(database, store_root=str(tmp_path), node="node-7"))
    assert seen == [str(tmp_path)]
    assert value(s, "workspace_store_size_bytes", node="node-7") == 1000 * 4096
    assert value(s, "workspace_store_used_bytes", node="node-7") == 600 * 4096
    assert value(s, "workspace_store_available_bytes", node="node-7") == 300 * 4096


def test_store_use_from_the_real_filesystem(database, store):
    s = scrape(WorkspaceCollector(database, store_root=store.root, node="n"))
    st = os.statvfs(store.root)
    assert value(s, "workspace_store_size_bytes", node="n") == st.f_blocks * st.f_frsize
    assert 0 < value(s, "workspace_store_used_bytes", node="n") <= st.f_blocks * st.f_frsize


def test_a_store_that_cannot_be_read_leaves_out_only_its_figures(populated, tmp_path):
    s = scrape(WorkspaceCollector(populated, store_root=str(tmp_path / "gone"), node="n"))
    assert not any(name.startswith("workspace_store_") for name, _ in s)
    assert value(s, "workspace_executions", state="queued") == 3


def test_no_label_names_a_user_or_a_workspace(populated):
    collector = WorkspaceCollector(populated, store_root="/", resource_types=["cpu", "gpu"], node="n")
    text = generate_latest(metrics.registry(collector)).decode()
    labels = {
        name for family in text_string_to_metric_families(text) for sample in family.samples for name in sample.labels
    }
    assert labels == {"state", "resource_type", "node", "le"}
    with populated.session() as s:
        names = {e.workspace.owner for e in s.query(Execution)} | {e.workspace.name for e in s.query(Execution)}
    assert names and not any(f'"{n}"' in text for n in names)
    assert all(family.name.startswith("workspace_") for family in text_string_to_metric_families(text))


def _random_step(db, rng: random.Random) -> None:
    """Create an execution or move one along, recording statistics as the lifecycle does."""
    with db.session() as s:
        open_ = s.query(Execution).filter(Execution.state.not_in(FINAL)).all()
        if not open_ or rng.random() < 0.3:
            ex = execution(s, f"u{rng.randrange(5)}", "queued", rng.choice(["cpu", "gpu"]))
            return
        ex = rng.choice(open_)
        nxt = rng.choice(sorted(TRANSITIONS[ex.state] - {ex.state}))
        if ex.state == "restoring" and nxt in ("running", "saving") and ex.restore_seconds is None:
            ex.restore_seconds, ex.restore_bytes, ex.restore_files = (
                round(rng.uniform(0, 100), 3),
                rng.randrange(10**10),
                rng.randrange(10**6),
            )
        if nxt == "stopped" and ex.state == "saving":
            ex.save_seconds, ex.save_bytes, ex.save_files = (
                round(rng.uniform(0, 900), 3),
                rng.randrange(10**11),
                rng.randrange(10**7),
            )
        ex.to(s, nxt)


def test_what_a_long_lived_collector_keeps_equals_a_fresh_count_and_counters_never_go_down(database):
    rng = random.Random(15)
    kept = WorkspaceCollector(database, resource_types=["cpu", "gpu"])  # reads only new and unfinished records
    refreshing = WorkspaceCollector(database, resource_types=["cpu", "gpu"], refresh_every=0)  # aggregates every time
    previous = None
    for _ in range(250):
        _random_step(database, rng)
        now = scrape(kept)
        assert now == scrape(WorkspaceCollector(database, resource_types=["cpu", "gpu"])) == scrape(refreshing)
        if previous is not None:
            for key, v in now.items():
                if key[0].endswith(("_bucket", "_count", "_sum")):
                    assert v >= previous[key], key
        previous = now
    # the walk went everywhere: states, queues and both histograms have something
    assert value(now, "workspace_executions", state="stopped") > 0
    assert value(now, "workspace_save_duration_seconds_count") > 0


def test_an_execution_that_ends_during_the_full_pass_is_counted_once(database, monkeypatch):
    with database.session() as s:
        ex_id = execution(s, "ada", "saving", restore=(1.0, 10, 1)).id
    aggregate = metrics.Tally.aggregate.__func__

    def save_ends_meanwhile(cls, session, *where):
        with database.session() as other:  # the hub finishes the save between the collector's reads
            ex = other.get(Execution, ex_id)
            ex.save_seconds, ex.save_bytes, ex.save_files = 2.0, 20, 2
            ex.to(other, "stopped")
        return aggregate(cls, session, *where)

    monkeypatch.setattr(metrics.Tally, "aggregate", classmethod(save_ends_meanwhile))
    collector = WorkspaceCollector(database)
    first = scrape(collector)
    monkeypatch.undo()
    assert value(first, "workspace_executions", state="stopped") == 1
    assert value(first, "workspace_restore_duration_seconds_count") == 1
    assert value(first, "workspace_save_duration_seconds_count") == 1
    assert scrape(collector) == first == scrape(WorkspaceCollector(database))


def test_a_scrape_reads_only_new_and_unfinished_records(populated, monkeypatch):
    collector = WorkspaceCollector(populated)
    scrape(collector)  # the first scrape aggregates everything
    with populated.session() as s:
        ended = {e.id for e in s.query(Execution).filter(Execution.state.in_(FINAL))}
        unfinished = {e.id for e in s.query(Execution).filter(Execution.state.not_in(FINAL))}
    assert collector._open == unfinished and collector._high == max(ended | unfinished)
    read = []
    add = metrics.Tally.add
    monkeypatch.setattr(metrics.Tally, "add", lambda self, row: read.append(row.id) or add(self, row))
    monkeypatch.setattr(metrics.Tally, "aggregate", None)  # no full pass again within the hour
    scrape(collector)
    assert set(read) == unfinished and not set(read) & ended


# -- the endpoint ------------------------------------------------------------------------------

TOKENS = {
    "prometheus": {"kind": "service", "name": "prometheus", "scopes": ["read:metrics"]},
    "admin": {
        "kind": "user",
        "name": "root",
        "admin": True,
        "scopes": ["read:metrics", "access:services", "admin:users"],
    },
    "student": {"kind": "user", "name": "ada", "scopes": ["access:services!service=workspace", "self"]},
    "other-service": {"kind": "service", "name": "backup", "scopes": ["read:users"]},
}


@pytest.fixture
async def serve(populated, store, monkeypatch):
    """Start the endpoint; the hub's answer to "whose token is this" comes from TOKENS."""
    auth = HubOAuth(
        api_token="service-token",
        api_url="http://127.0.0.1:9/hub/api",
        access_scopes={"access:services!service=workspace"},
        oauth_client_id="service-workspace",
    )

    def user_for(handler, sync=True):
        header = handler.request.headers.get("Authorization", "")
        return dict(TOKENS[header[6:]]) if header.startswith("token ") and header[6:] in TOKENS else None

    monkeypatch.setattr(auth, "get_user", user_for)
    monkeypatch.setattr(metrics_api.MetricsHandler, "_hub_auth", auth)
    servers = []

    async def start(authenticate: bool = True) -> str:
        app = web.Application(
            metrics_api.handlers("/services/workspace/", authenticate),
            workspace_db=populated,
            workspace_store=store,
            resource_types=[SimpleNamespace(name="cpu"), SimpleNamespace(name="gpu")],
        )
        sock, port = bind_unused_port()
        server = HTTPServer(app)
        server.add_sockets([sock])
        servers.append(server)
        return f"http://127.0.0.1:{port}/services/workspace/metrics"

    yield start
    for server in servers:
        server.stop()


async def get(url, token=None, **kwargs):
    headers = {"Authorization": f"token {token}"} if token else {}
    return await AsyncHTTPClient().fetch(url, headers=headers, raise_error=False, follow_redirects=False, **kwargs)


@pytest.mark.parametrize("token", ["prometheus", "admin"])
async def test_a_token_with_read_metrics_scrapes(serve, token):
    r = await get(await serve(), token)
    assert r.code == 200, r.body
    assert r.headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(r.body.decode())}
    assert {"workspace_executions", "workspace_queue_length", "workspace_store_used_bytes"} <= set(families)
    queued = [s for s in families["workspace_executions"].samples if s.labels == {"state": "queued"}]
    assert queued[0].value == 3


@pytest.mark.parametrize("token", [None, "student", "other-service", "forged"])
async def test_without_read_metrics_it_is_403_and_no_figure(serve, token):
    url = await serve()
    for target in (url, url + "?user=ada", url + "?name=ws1"):
        r = await get(target, token)
        assert r.code == 403, (token, r.code)
        body = r.body.decode()
        assert "read:metrics" in body and "workspace_" not in body and "ada" not in body


async def test_authenticate_prometheus_false_opens_it(serve):
    r = await get(await serve(authenticate=False))
    assert r.code == 200 and b"workspace_executions" in r.body


def test_outputs_waiting_for_the_store_of_record_and_the_lag(database):
    import datetime as dt

    from workspace.db import utcnow
    from workspace.executions import Snapshot

    with database.session() as s:
        now = utcnow()
        s.add(Snapshot(key="sent", backend="btrfs", created=now - dt.timedelta(hours=2), replicated_at=now))
        s.add(Snapshot(key="late", backend="btrfs", created=now - dt.timedelta(minutes=30)))
        s.add(Snapshot(key="new", backend="btrfs", created=now - dt.timedelta(minutes=1)))
        s.add(Snapshot(key="gone", backend="btrfs", created=now - dt.timedelta(days=1), deleted=now))
        s.add(Snapshot(key="copied", backend="copy", created=now - dt.timedelta(days=1)))  # no btrfs: not sent
    samples = scrape(WorkspaceCollector(database, replication=True))
    assert value(samples, "workspace_outputs_unreplicated") == 2
    assert 29 * 60 < value(samples, "workspace_replication_lag_seconds") < 31 * 60
    # without a store of record, no such figures at all
    assert not any(name.startswith("workspace_replication") for name, _ in scrape(WorkspaceCollector(database)))


def test_sends_to_the_store_of_record_as_a_histogram(database):
    from workspace.db import utcnow
    from workspace.executions import Snapshot

    with database.session() as s:
        for key, seconds in (("a", 0.2), ("b", 3.0), ("c", 400.0)):
            s.add(Snapshot(key=key, backend="btrfs", replicated_at=utcnow(), replica_seconds=seconds))
        s.add(Snapshot(key="waiting", backend="btrfs"))  # not sent: not in the histogram
    samples = scrape(WorkspaceCollector(database, replication=True))
    assert value(samples, "workspace_replication_duration_seconds_count") == 3
    assert value(samples, "workspace_replication_duration_seconds_sum") == pytest.approx(403.2)
    assert value(samples, "workspace_replication_duration_seconds_bucket", le="0.25") == 1
    assert value(samples, "workspace_replication_duration_seconds_bucket", le="5.0") == 2
    assert value(samples, "workspace_replication_duration_seconds_bucket", le="+Inf") == 3


def test_each_node_its_executions_its_free_gpus_and_its_store(database, tmp_path, monkeypatch):
    from workspace.store.nodes import Node

    fake = os.statvfs_result((4096, 4096, 1000, 400, 300, 0, 0, 0, 0, 255))
    seen = []
    monkeypatch.setattr(os, "statvfs", lambda path: seen.append(path) or fake)
    with database.session() as s:
        ex = execution(s, "ada", "running")
        ex.node, ex.gpu_ids = "node2", ["1"]
        execution(s, "bob", "stopped").node = "node2"  # ended: holds nothing
    nodes = [
        Node("node1", store="/stores/1"),
        Node("node2", store="/stores/2", gpus=["0", "1"]),
        Node("node3", store="/stores/3", gpus=["0"], ready=False),
    ]
    samples = scrape(WorkspaceCollector(database, store_root="/central", node="hub", engine_nodes=lambda: nodes))
    assert seen == ["/central", "/stores/1", "/stores/2", "/stores/3"]
    assert value(samples, "workspace_store_used_bytes", node="node2") == 600 * 4096
    assert [value(samples, "workspace_node_up", node=n) for n in ("node1", "node2", "node3")] == [1, 1, 0]
    assert value(samples, "workspace_node_executions", node="node2") == 1
    assert value(samples, "workspace_node_gpus", node="node2") == 2
    assert value(samples, "workspace_node_gpus_free", node="node2") == 1

    # an engine that does not answer costs the node figures of this scrape, not the scrape
    def down():
        raise OSError("manager unreachable")

    samples = scrape(WorkspaceCollector(database, engine_nodes=down))
    assert not any(name.startswith("workspace_node_") for name, _ in samples)
    assert value(samples, "workspace_executions", state="running") == 1


def test_the_service_counts_the_logs_followed_now(database):
    from workspace.service.streams import Followers

    followers = Followers(limit=4)
    collector = WorkspaceCollector(database, followers=followers)
    with followers.held("ada"), followers.held("bob"):
        assert value(scrape(collector), "workspace_log_followers") == 2
    assert value(scrape(collector), "workspace_log_followers") == 0
    assert ("workspace_log_followers", ()) not in scrape(WorkspaceCollector(database))  # not the hub's
