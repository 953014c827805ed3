"""cgroup readers on sample v1 and v2 trees, the CPU meter with a movable clock, GPUs via a fake NVML."""

from types import SimpleNamespace

from workspace.usage import ContainerCgroup, CpuMeter, gpu_usage

CID = "abc123"


def v1_tree(root, usage_ns=5_000_000_000, mem=300 << 20, inactive=100 << 20):
    cpu = root / "cpuacct/docker" / CID
    cpu.mkdir(parents=True)
    (cpu / "cpuacct.usage").write_text(f"{usage_ns}\n")
    mem_dir = root / "memory/docker" / CID
    mem_dir.mkdir(parents=True)
    (mem_dir / "memory.usage_in_bytes").write_text(f"{mem}\n")
    (mem_dir / "memory.stat").write_text(f"cache 5\ntotal_inactive_file {inactive}\n")
    return cpu


def v2_tree(root, usage_usec=2_000_000, mem=500 << 20, inactive=200 << 20):
    d = root / f"system.slice/docker-{CID}.scope"
    d.mkdir(parents=True)
    (d / "cpu.stat").write_text(f"usage_usec {usage_usec}\nuser_usec 1\nsystem_usec 1\n")
    (d / "memory.current").write_text(f"{mem}\n")
    (d / "memory.stat").write_text(f"anon 1\ninactive_file {inactive}\n")
    return d


def test_v1(tmp_path):
    v1_tree(tmp_path)
    cg = ContainerCgroup(CID, root=tmp_path)
    assert cg.cpu_ns() == 5_000_000_000
    assert cg.memory_bytes() == 200 << 20


def test_v2(tmp_path):
    v2_tree(tmp_path)
    cg = ContainerCgroup(CID, root=tmp_path)
    assert cg.cpu_ns() == 2_000_000_000
    assert cg.memory_bytes() == 300 << 20


def test_missing_container_reads_none(tmp_path):
    cg = ContainerCgroup("gone", root=tmp_path)
    assert cg.cpu_ns() is None and cg.memory_bytes() is None


def test_cpu_meter_is_percent_of_one_core(tmp_path):
    cpu = v1_tree(tmp_path, usage_ns=0)
    now = [100.0]
    meter = CpuMeter(ContainerCgroup(CID, root=tmp_path), clock=lambda: now[0])
    assert meter.sample() is None  # one reading is no rate
    now[0] += 10
    (cpu / "cpuacct.usage").write_text(f"{15 * 10**9}\n")  # 15 s of CPU in 10 s
    assert meter.sample() == 150.0
    now[0] += 10
    assert meter.sample() == 0.0


class FakeNVML:
    def __init__(self, count=2, fail=None):
        self.count, self.fail, self.shut = count, fail, False

    def nvmlInit(self):
        if self.fail:
            raise RuntimeError(self.fail)

    def nvmlShutdown(self):
        self.shut = True

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=40 + h, memory=0)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=1 << 30, total=80 << 30)

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100"


def test_gpus_through_nvml():
    fake = FakeNVML()
    report = gpu_usage(fake)
    assert report["available"] and [g["utilization_percent"] for g in report["gpus"]] == [40, 41]
    assert report["gpus"][0]["name"] == "NVIDIA H100" and fake.shut


def test_no_gpu_is_said_not_raised():
    assert gpu_usage(FakeNVML(fail="NVML Shared Library Not Found")) == {
        "available": False,
        "reason": "no GPU: NVML Shared Library Not Found",
    }
    assert gpu_usage(FakeNVML(count=0))["reason"] == "no GPU on this machine"
    # the real library, on a machine with or without GPUs: a report, never an exception
    real = gpu_usage()
    assert real["gpus"] if real["available"] else real["reason"].startswith("no GP")


def test_own_cgroup_inside_a_container_v1_and_v2(tmp_path):
    from workspace.usage import OwnCgroup

    v1 = tmp_path / "v1"
    (v1 / "cpuacct").mkdir(parents=True)
    (v1 / "cpuacct/cpuacct.usage").write_text("7000\n")
    (v1 / "memory").mkdir()
    (v1 / "memory/memory.usage_in_bytes").write_text(f"{300 << 20}\n")
    (v1 / "memory/memory.stat").write_text(f"total_inactive_file {100 << 20}\n")
    (v1 / "memory/memory.limit_in_bytes").write_text("9223372036854771712\n")  # no limit
    cg = OwnCgroup(root=v1)
    assert (cg.cpu_ns(), cg.memory_bytes(), cg.memory_limit_bytes()) == (7000, 200 << 20, None)
    (v1 / "memory/memory.limit_in_bytes").write_text(f"{2 << 30}\n")
    assert cg.memory_limit_bytes() == 2 << 30

    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.stat").write_text("usage_usec 3\n")
    (v2 / "memory.current").write_text("1000\n")
    (v2 / "memory.stat").write_text("inactive_file 0\n")
    (v2 / "memory.max").write_text("max\n")
    cg = OwnCgroup(root=v2)
    assert (cg.cpu_ns(), cg.memory_bytes(), cg.memory_limit_bytes()) == (3000, 1000, None)
    (v2 / "memory.max").write_text("4096\n")
    assert cg.memory_limit_bytes() == 4096
