"""The culler's cycle against a fake hub API, fake workspaces and fake cgroup files, with a movable clock.

(The real thing, with containers and a hub, is tests/integration/test_culler.py.)
"""

import asyncio
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from fakehub import FakeHub  # noqa: E402

from workspace.config import from_environment  # noqa: E402
from workspace.executions import Execution, UsageSample  # noqa: E402


def run_cycles(hub: FakeHub, culler, clock: list, cycles: int, step: float = 60, busy: str | None = None):
    for _ in range(cycles):
        clock[0] += step
        if busy:
            hub.cpu_ns[busy] += int(step * 0.5e9)  # half a core
            hub.write_cgroups()
        asyncio.get_event_loop().run_until_complete(culler.cycle())


@pytest.fixture(params=[False, True], ids=["one-origin", "subdomains"])
def setup(tmp_path, request):
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    hub = FakeHub(3, tmp_path, subdomains=request.param)
    hub.start()
    culler = hub.culler()
    clock = [time.time()]
    culler.clock = lambda: clock[0]
    yield hub, culler, clock
    loop.close()


def test_a_cycle_warns_withdraws_and_culls_and_records_why(setup):
    hub, culler, clock = setup
    idle, attached, busy = hub.users
    hub.reports[attached]["kernel_connections"] = 1
    run_cycles(hub, culler, clock, 26, busy=busy)  # 26 min: the idle one is warned
    assert list(hub.notices[idle]) == ["cull-idle"] and "will be stopped" in hub.notices[idle]["cull-idle"]["message"]
    assert hub.notices[attached] == {} and hub.notices[busy] == {} and hub.deleted == []

    # the student comes back: the warning is withdrawn, the timeout starts again
    hub.reports[idle]["terminal_connections"] = 1
    run_cycles(hub, culler, clock, 1, busy=busy)
    assert hub.notices[idle] == {}
    hub.reports[idle]["terminal_connections"] = 0
    run_cycles(hub, culler, clock, 29, busy=busy)
    assert hub.deleted == []
    run_cycles(hub, culler, clock, 2, busy=busy)
    assert hub.deleted == [idle]  # 30 min after the tab closed

    with hub.db.session() as s:
        by_owner = {ex.workspace.owner: ex for ex in s.scalars(select(Execution))}
        assert by_owner[idle].stop_reason == "idle"
        assert by_owner[idle].stop_detail.startswith("no browser for 30 min; CPU 0.0 % average over 30 min")
        assert by_owner[busy].stop_reason is None
        samples = list(s.scalars(select(UsageSample).where(UsageSample.execution_id == by_owner[busy].id)))
    assert len(samples) >= 50 and samples[-1].cpu_percent == pytest.approx(50, abs=1)
    assert samples[-1].memory_bytes == 100 << 20


def test_a_refused_stop_leaves_no_stop_reason(setup, monkeypatch):
    hub, culler, clock = setup
    for u in hub.users[1:]:
        hub.reports[u]["kernel_connections"] = 1

    stop_timeouts = []

    async def refuse(method, path, body=None, paginated=False, timeout=None, _real=culler.hub):
        if method == "DELETE":
            stop_timeouts.append(timeout)
            raise OSError("hub unreachable")
        return await _real(method, path, body, paginated)

    monkeypatch.setattr(culler, "hub", refuse)
    run_cycles(hub, culler, clock, 32)
    with hub.db.session() as s:
        assert {ex.stop_reason for ex in s.scalars(select(Execution))} == {None}
    # a stop is waited for past the hub's slow_stop_timeout (10 s): a slow one is no refusal (#28)
    assert stop_timeouts and min(stop_timeouts) > 10, stop_timeouts


def test_environment_settings_and_bad_values():
    assert from_environment({"WORKSPACE_CULL_BROWSER_TIMEOUT": "60", "WORKSPACE_CULL_INTERVAL": "5"}) == {
        "IdlePolicy": {"browser_timeout": 60.0},
        "Culler": {"interval": 5.0},
    }
    with pytest.raises(SystemExit, match="WORKSPACE_CULL_CPU_WINDOW must be a number"):
        from_environment({"WORKSPACE_CULL_CPU_WINDOW": "30min"})


def test_no_hub_token_reaches_a_workspace_and_a_hostile_report_affects_only_its_own(setup):
    """A workspace answers garbage, a huge body, negative counts, a browser time far in the future."""
    hub, culler, clock = setup
    garbage, future, fine = hub.users
    hub.reports[garbage] = ["not", "a", "report"]
    hub.reports[future] = {
        "kernel_connections": -5,
        "terminal_connections": "x" * 10,
        "last_browser_request": "2999-01-01T00:00:00Z",
    }
    run_cycles(hub, culler, clock, 26)
    # all three were judged: each is warned on the host's evidence (CPU idle), the bad reports ignored
    assert all(list(hub.notices[u]) == ["cull-idle"] for u in hub.users), hub.notices
    run_cycles(hub, culler, clock, 6)
    assert sorted(hub.deleted) == sorted(hub.users)
    assert hub.workspace_auth and all(a.startswith("workspace-report ") for a in hub.workspace_auth)
    assert not any("fake" in a for a in hub.workspace_auth)  # the culler's hub token


def test_clean_report_bounds_every_field():
    from workspace.culler.report import clean_report

    now = 1_000_000.0
    assert clean_report(None, now) is None and clean_report([], now) is None
    assert clean_report({"kernel_connections": True, "terminal_connections": 0}, now) is None
    r = clean_report(
        {
            "kernel_connections": 10**12,
            "terminal_connections": 1,
            "last_browser_request": "x" * 100,
            "usage": {
                "cpu_percent": -3,
                "memory_bytes": "lots",
                "gpu": {"gpus": [{"utilization_percent": 1e9}, "junk"] * 100},
            },
        },
        now,
    )
    assert r["browser_connections"] == 10_001 and r["last_browser"] is None and r["cpu_percent"] == 0
    assert r["memory_bytes"] is None and len(r["gpus"]) == 32 and r["gpus"][0]["utilization_percent"] == 100
    future = clean_report(
        {"kernel_connections": 0, "terminal_connections": 0, "last_browser_request": "2999-01-01T00:00:00Z"}, now
    )
    assert future["last_browser"] == now
    # an open SSH session counts as a browser; an image without the field reports none; junk is bounded
    ssh = clean_report({"kernel_connections": 0, "terminal_connections": 0, "ssh_connections": 2}, now)
    assert ssh["browser_connections"] == 2
    junk = clean_report({"kernel_connections": 0, "terminal_connections": 0, "ssh_connections": "many"}, now)
    assert junk["browser_connections"] == 0


def test_a_start_is_told_the_maximum_run_time_the_culler_will_enforce(tmp_path):
    """The hub's configuration, then the culler's own file (#28): the start's sentence and the culler agree."""
    from traitlets.config import Config

    from workspace.limits.resource_types import ResourceType
    from workspace.limits.runtime import runtime_notice, site_policy

    own = tmp_path / "culler_config.py"
    own.write_text('c.IdlePolicy.overrides = {"kind:task": {"max_runtime": 7200}}\n')
    config = Config({"IdlePolicy": {"max_runtime": 3600.0}, "Culler": {"config_file": str(own)}})
    assert site_policy(config).limits("bob").max_runtime == 3600
    assert site_policy(config).limits("bob", kind="task").max_runtime == 7200
    assert "after 2 h at the latest" in runtime_notice(config, "bob", set(), None, True, "en")
    debug = ResourceType.from_config({"name": "debug", "max_runtime": 600})
    assert "after 10 min at the latest" in runtime_notice(config, "bob", set(), debug, False, "en")
    assert runtime_notice(Config({"IdlePolicy": {"max_runtime": 0.0}}), "bob", set(), None, False, "en") is None
    assert config.IdlePolicy.get("overrides") is None  # the hub's own configuration is left as it was


def test_a_home_on_a_store_that_keeps_no_count_is_walked_once_per_files_interval(setup):
    """Every home has a limit now (the quota's rest, #28): on the copy store, whose measure is a walk of every
    file, a walk at every usage sample would read every running home each minute; btrfs counts the bytes."""
    from types import SimpleNamespace

    from workspace.culler.app import Tracked

    hub, culler, clock = setup
    culler.files_interval = 600

    class Store:
        def __init__(self, kind):
            self.kind, self.walks = kind, 0

        def home_usage(self, live_key):
            self.walks += 1
            return 1000 * self.walks

    for kind, expected in (("copy", [1000, 1000, 1000, 2000]), ("btrfs", [1000, 2000, 3000, 4000])):
        store = Store(kind)
        culler.store_of = lambda server, store=store: store
        server = SimpleNamespace(
            execution_id=99, live_key="k", home_limit=10**9, locale="en", label="x", number=1, url=None
        )
        culler.tracked[99] = Tracked(watch=None, meter=None)
        seen = []
        for step in (0, 60, 500, 100):  # the last is past 600 s since the first walk
            clock[0] += step
            sample = UsageSample()
            asyncio.get_event_loop().run_until_complete(culler._measure_bytes(server, sample))
            seen.append(sample.home_bytes)
        assert seen == expected, (kind, seen)
