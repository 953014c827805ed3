"""A node's NVIDIA driver against an image's CUDA runtime (#32, workspace/images/cuda.py): NVML faked here,
real on a device (tests/device/check_gpu.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from workspace.errors import UserError
from workspace.images import cuda
from workspace.spawner.placement import PlacementMixin
from workspace.store.nodes import Node, parse_swarm


class FakeNvml:
    def __init__(self, driver=b"535.104.05", cuda_code=12020, fail=False):
        self.driver, self.cuda_code, self.fail, self.shut = driver, cuda_code, fail, False

    def nvmlInit(self):
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self.cuda_code

    def nvmlShutdown(self):
        self.shut = True


def test_nvml_says_the_driver_and_the_highest_cuda_it_supports():
    nvml = FakeNvml()
    assert cuda.read_driver(nvml) == cuda.Driver("535.104.05", "12.2") and nvml.shut
    assert cuda.read_driver(FakeNvml(driver="580.65.06", cuda_code=13000)) == cuda.Driver("580.65.06", "13.0")
    assert cuda.read_driver(FakeNvml(fail=True)) is None  # no driver here: nothing is judged


@pytest.mark.parametrize(
    "image_cuda, supported, runs",
    [
        ("12.4.127", "12.2", True),  # minor version compatibility within a major
        ("12.1.105", "12.8", True),
        ("13.0.88", "12.8", False),  # a CUDA 13 runtime needs a 580-series driver
        ("13.0.88", "13.0", True),
        ("11.8.89", "12.2", True),
        (None, "12.2", True),  # an image without CUDA
        ("13.0", None, True),  # a node that says nothing
        ("not a version", "12.2", True),
    ],
)
def test_an_image_runs_where_the_driver_supports_its_cuda_major(image_cuda, supported, runs):
    driver = cuda.Driver("x", supported) if supported else None
    assert cuda.runs_on(image_cuda, driver) is runs


def test_the_refusal_names_the_driver_the_image_needs_and_the_one_the_node_has():
    e = cuda.refusal("workspace-pytorch:latest", "13.0.88", "node2", cuda.Driver("535.104.05", "12.2"))
    assert e.status_code == 409
    text = e.in_locale("en")
    assert "CUDA 13.0.88" in text and "580.65.06 or newer" in text and "node2" in text, text
    assert "535.104.05" in text and "CUDA 12.2" in text, text
    assert "驱动" in e.in_locale("zh_CN")  # said in the student's language too


def test_forms_mark_an_image_that_some_or_all_of_a_types_nodes_cannot_run():
    old, new = cuda.Driver("535", "12.2"), cuda.Driver("580", "13.0")
    assert cuda.too_old("13.0.88", [old, old]) == "all"
    assert cuda.too_old("13.0.88", [old, new]) == "some"
    assert cuda.too_old("13.0.88", [new]) is None
    assert cuda.too_old("12.4", [old]) is None
    assert cuda.too_old(None, [old]) is None and cuda.too_old("13.0", []) is None


def test_a_swarm_nodes_labels_say_its_driver():
    (node,) = parse_swarm(
        [
            {
                "ID": "n2",
                "Description": {"Hostname": "node2"},
                "Spec": {
                    "Labels": {
                        "workspace.store": "/s",
                        "workspace.nvidia-driver": "535.104.05",
                        "workspace.cuda": "12.2",
                    }
                },
                "Status": {"State": "ready"},
            }
        ]
    )
    assert (node.driver, node.cuda) == ("535.104.05", "12.2")


class FakeStart(PlacementMixin):
    """What check_driver reads of a spawner: its GPUs, its image, the nodes and a job's placed ranks."""

    def __init__(self, gpu_ids, node, nodes, image_cuda, ranks=()):
        self.current = SimpleNamespace(gpu_ids=gpu_ids)
        self.node, self._nodes, self._image_cuda, self._ranks = node, nodes, image_cuda, list(ranks)
        self.image = "workspace-pytorch:latest"

    @classmethod
    def describe_images(cls, options, names):
        return [{"name": n, "versions": {"cuda": options._image_cuda} if options._image_cuda else {}} for n in names]

    def image_refs(self):
        return {}

    def cluster_nodes(self):
        return self._nodes

    def _placed_ranks(self, execution_id):
        return self._ranks

    async def run_blocking(self, fn, *args):
        return fn(*args)


NODES = [
    Node("node2", gpus=["0", "1"], driver="535.104.05", cuda="12.2"),
    Node("node3", gpus=["0", "1"], driver="580.65.06", cuda="13.0"),
    Node("node4", gpus=["0"]),  # says nothing of its driver
]
PLAN = SimpleNamespace(execution_id=7)


def test_a_gpu_start_on_an_old_driver_is_refused_and_others_are_not():
    with pytest.raises(UserError) as refused:
        asyncio.run(FakeStart(["0"], "node2", NODES, "13.0.88").check_driver(PLAN))
    assert refused.value.status_code == 409 and "node2" in refused.value.in_locale("en")
    asyncio.run(FakeStart(["0"], "node3", NODES, "13.0.88").check_driver(PLAN))  # a new enough driver
    asyncio.run(FakeStart(["0"], "node4", NODES, "13.0.88").check_driver(PLAN))  # nothing known: not judged
    asyncio.run(FakeStart(["0"], "node2", NODES, "12.4.127").check_driver(PLAN))  # CUDA 12 on a 12.2 driver
    asyncio.run(FakeStart([], "node2", NODES, "13.0.88").check_driver(PLAN))  # no GPU: CUDA is not used


def test_a_job_is_refused_when_any_ranks_node_has_an_old_driver():
    job = FakeStart(["0"], "node3", NODES, "13.0.88", ranks=[(1, "node2", ["1"])])
    with pytest.raises(UserError) as refused:
        asyncio.run(job.check_driver(PLAN))
    assert "node2" in refused.value.in_locale("en")


def test_the_single_hosts_node_carries_the_configured_driver():
    options = SimpleNamespace(gpu_inventory=["0"], gpu_driver={"version": "535.104.05", "cuda": "12.2"})
    (node,) = PlacementMixin.engine_nodes(options)
    assert (node.gpus, node.driver, node.cuda) == (["0"], "535.104.05", "12.2")
    (cpu_only,) = PlacementMixin.engine_nodes(SimpleNamespace(gpu_inventory=[], gpu_driver={}))
    assert (cpu_only.driver, cpu_only.cuda) == ("", "")


def test_the_forms_mark_an_image_a_gpu_types_nodes_cannot_run():
    from workspace.images import catalog
    from workspace.limits.resource_types import ResourceType

    types = [
        ResourceType.from_config({"name": "cpu"}),
        ResourceType.from_config({"name": "gpu1", "gpus": 1}),
        ResourceType.from_config({"name": "a100", "gpus": 1, "gpu_model": "A100"}),
    ]
    nodes = [Node("old", gpus=["0"], gpu_model="T4", driver="535.104.05", cuda="12.2")]
    drivers = cuda.drivers_by_type(types, nodes)
    assert drivers == {"gpu1": [cuda.Driver("535.104.05", "12.2")], "a100": []}  # no A100 node says its driver

    def describe(names):
        versions = {"workspace-pytorch:latest": {"cuda": "13.0.88"}, "workspace-base:latest": {}}
        return [{"name": n, "available": True, "size": None, "versions": versions[n]} for n in names]

    labels = catalog.labels(describe, ["workspace-base:latest", "workspace-pytorch:latest"], {}, "en", drivers)
    assert labels["workspace-base:latest"] == "workspace-base:latest"
    assert labels["workspace-pytorch:latest"].endswith("· not with “gpu1”: CUDA 13.0.88 needs NVIDIA driver 580.65.06")
    nodes.append(Node("new", gpus=["0"], driver="580.65.06", cuda="13.0"))
    some = cuda.form_mark("13.0.88", cuda.drivers_by_type(types, nodes), "en")
    assert some == "with “gpu1” only on some nodes: CUDA 13.0.88 needs NVIDIA driver 580.65.06"
    assert "580.65.06" in cuda.form_mark("13.0.88", drivers, "zh_CN")
