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

from workspace.culler import env_config  # noqa: E402
from workspace.executions import Execution, UsageSample  # noqa: E402


def run_cycles(hub: FakeHub, culler, clock: list, cycles: int, step: float = 60, busy: str | None = None):
    for _ in range(cycles):
        clock[0] += step
        if busy:
            hub.cpu_ns[busy] += int(step * 0.5e9)  # half a core
            hub.write_cgroups()
        asyncio.get_event_loop().run_until_complete(culler.cycle())


@pytest.fixture
def setup(tmp_path):
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    hub = FakeHub(3, tmp_path)
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

    async def refuse(method, path, body=None, paginated=False, _real=culler.hub):
        if method == "DELETE":
            raise OSError("hub unreachable")
        return await _real(method, path, body, paginated)

    monkeypatch.setattr(culler, "hub", refuse)
    run_cycles(hub, culler, clock, 32)
    with hub.db.session() as s:
        assert {ex.stop_reason for ex in s.scalars(select(Execution))} == {None}


def test_environment_settings_and_bad_values():
    assert env_config({"WORKSPACE_CULL_BROWSER_TIMEOUT": "60", "WORKSPACE_CULL_INTERVAL": "5"}) == {
        "IdlePolicy": {"browser_timeout": 60.0}, "Culler": {"interval": 5.0}}
    with pytest.raises(SystemExit, match="WORKSPACE_CULL_CPU_WINDOW must be a number"):
        env_config({"WORKSPACE_CULL_CPU_WINDOW": "30min"})
