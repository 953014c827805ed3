"""The cgroup readers on a real container: a busy loop shows, an idle one does not."""

import time

from workspace.usage import ContainerCgroup, CpuMeter


def test_cpu_and_memory_of_a_real_container(docker_client, image):
    c = docker_client.containers.run(
        image,
        ["bash", "-c", "python3 -c 'x = bytearray(80 << 20); import time; time.sleep(600)' & while :; do :; done"],
        detach=True,
        labels={"workspace.deployment": "wstest-usage"},
    )
    try:
        meter = CpuMeter(ContainerCgroup(c.id))
        meter.sample()
        time.sleep(2)
        busy = meter.sample()
        # a busy loop: most of a core alone, at least a quarter of one while the suite's other workers
        # (hubs, containers, builds) share this machine's two cores with it; never more than the two
        assert busy is not None and 25 < busy < 220, busy
        assert ContainerCgroup(c.id).memory_bytes() > 60 << 20
    finally:
        c.remove(force=True)
    assert ContainerCgroup(c.id).cpu_ns() is None, "a removed container reads as gone"
