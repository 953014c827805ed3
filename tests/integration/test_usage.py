"""The cgroup readers on a real container: a busy loop shows, an idle one does not."""

import time

import psutil

from workspace.usage import ContainerCgroup, CpuMeter


def processes_of(container) -> list[int]:
    """The host PIDs of a container's processes (the engine's `top`)."""
    top = container.top()
    column = top["Titles"].index("PID")
    return [int(row[column]) for row in top["Processes"]]


def cpu_seconds(pids: list[int]) -> float:
    """The CPU time (user and system) the processes `pids` used so far, as the kernel counts it."""
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def test_cpu_and_memory_of_a_real_container(docker_client, image):
    c = docker_client.containers.run(
        image,
        ["bash", "-c", "python3 -c 'x = bytearray(80 << 20); import time; time.sleep(600)' & while :; do :; done"],
        detach=True,
        labels={"workspace.deployment": "wstest-usage"},
    )
    try:
        meter = CpuMeter(ContainerCgroup(c.id))
        time.sleep(0.5)  # its processes started
        pids = processes_of(c)
        meter.sample()
        before, started = cpu_seconds(pids), time.monotonic()
        time.sleep(2)
        busy = meter.sample()
        used = (cpu_seconds(pids) - before) / (time.monotonic() - started) * 100
        # the cgroup's reading agrees with what the kernel says its processes used (under load the busy loop
        # gets less than a core: the suite's other workers share this machine's two cores with it)
        assert busy is not None and used > 3 and abs(busy - used) < max(8, 0.25 * used), (busy, used)
        assert busy < 220, busy  # never more than the two cores
        assert ContainerCgroup(c.id).memory_bytes() > 60 << 20
    finally:
        c.remove(force=True)
    assert ContainerCgroup(c.id).cpu_ns() is None, "a removed container reads as gone"
