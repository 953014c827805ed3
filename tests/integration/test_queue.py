"""Resource types against real containers: limits, a visible queue when a type is full, GPU device IDs.

The GPUs are a configured inventory of four device IDs handed to containers
as NVIDIA_VISIBLE_DEVICES (`gpu_device_mode=env`): this machine has none,
the allocation and the containers are real.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from .hub import Hub

TYPES = [
    {"name": "small", "description": "1 CPU, 1 GB", "cpu": 1, "memory": "1G", "capacity": 1, "max_runtime": 3600},
    {"name": "gpu2", "gpus": 2, "gpu_model": "A100"},
    {"name": "staff", "groups": ["staff"]},
    {"name": "rooted", "root": True},
]


@pytest.fixture(scope="module")
def queue_hub(start_hub) -> Hub:
    return start_hub(
        WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES), WORKSPACE_GPU_INVENTORY="0,1,2,3", WORKSPACE_GPU_DEVICE_MODE="env"
    )


def env_of(hub: Hub, user: str, ws: str) -> dict:
    (c,) = hub.containers(user=user, server=ws)
    return dict(line.split("=", 1) for line in c.attrs["Config"]["Env"])


def state(hub: Hub, user: str, ws: str) -> str:
    return hub.executions(user, ws)[-1]["state"]


def wait_state(hub: Hub, user: str, ws: str, wanted: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while state(hub, user, ws) != wanted:
        assert time.monotonic() < deadline, (wanted, hub.executions(user, ws)[-1])
        time.sleep(0.3)


class Follow(threading.Thread):
    """Follows a spawn's progress stream in the background."""

    def __init__(self, hub: Hub, user: str, ws: str, token: str):
        super().__init__(daemon=True)
        self.args, self.events = (hub, user, ws, token), []

    def run(self):
        hub, user, ws, token = self.args
        self.events = hub.progress(user, ws, token, timeout=300)


def test_bad_types_are_refused_with_a_sentence(queue_hub: Hub):
    hub, user = queue_hub, "quinn"
    token = hub.user_token(user)
    r = hub.spawn(user, "x", token, {"resource_type": "huge"})
    assert (
        r.status_code == 400
        and r.json()["message"] == "There is no resource type “huge”. Choose one of: small, gpu2, staff, rooted."
    )
    r = hub.spawn(user, "x", token, {"resource_type": "staff"})
    assert r.status_code == 403 and "is for the group(s) staff" in r.json()["message"]
    assert hub.executions(user, "x") == []


def test_a_root_allowed_type_is_refused_where_no_engine_keeps_workspaces_in_a_user_namespace(queue_hub: Hub):
    """#32: one engine here, without `userns-remap`: root inside would be the host's root, so a type with
    `root` never starts on it (tests/cluster/test_root_inside.py starts one on a user-namespaced node). The
    form says so beside the type; the start fails with the sentence, before anything is restored."""
    hub, user = queue_hub, "rooty"
    token = hub.user_token(user)
    types = {t["name"]: t for t in hub.service_api("/resource-types", token).json()["types"]}
    assert types["rooted"]["root"] is True and "no node of this server runs it" in types["rooted"]["free"]
    assert types["small"]["root"] is False
    r = hub.spawn(user, "w", token, {"resource_type": "rooted"})
    if r.status_code in (201, 202):  # the hub answered before the start failed: its progress says why
        events = hub.progress(user, "w", token)
        assert events[-1].get("failed"), events
        said = events[-1].get("message", "")
    else:
        assert r.status_code == 409, r.text
        said = r.json()["message"]
    assert "“rooted” gives root inside the workspace" in said and "user namespace" in said, said
    hub.wait_stopped(user, "w")
    refused = hub.executions(user, "w")[-1]
    assert refused["state"] == "failed" and refused["restore"] is None, refused
    assert not hub.containers(user=user, server="w")


def test_a_full_type_queues_the_next_start_visibly(queue_hub: Hub):
    hub = queue_hub
    ta, tb = hub.user_token("ann"), hub.user_token("ben")
    hub.start_workspace("ann", "one", ta, resource_type="small")
    (c,) = hub.containers(user="ann", server="one")
    hc = c.attrs["HostConfig"]
    assert hc["Memory"] == 1 << 30 and hc["CpuQuota"] / hc["CpuPeriod"] == 1, hc
    assert hub.executions("ann", "one")[-1]["resource_type"] == "small"

    r = hub.spawn("ben", "two", tb, {"resource_type": "small"})
    assert r.status_code == 202, r.text
    follow = Follow(hub, "ben", "two", tb)
    follow.start()
    wait_state(hub, "ben", "two", "queued")
    # one waiting start per user and type
    r = hub.spawn("ben", "three", tb, {"resource_type": "small"})
    assert r.status_code == 409 and "You already wait for a “small” with workspace “two”" in r.json()["message"], r.text
    time.sleep(3)
    assert state(hub, "ben", "two") == "queued"  # still waiting: the queue does not time out the start

    hub.stop_workspace("ann", "one", ta)
    follow.join(120)
    messages = [e["message"] for e in follow.events]
    assert any("Waiting for a free “small” (1 may run at once): position 1 of 1" in m for m in messages), messages
    assert any("Admitted as “small”" in m for m in messages) and follow.events[-1].get("ready"), messages
    assert any(e.get("queue_position") == 1 for e in follow.events)
    hub.stop_workspace("ben", "two", tb)


def test_gpus_are_disjoint_the_third_waits_and_gets_the_freed_ones(queue_hub: Hub):
    hub = queue_hub
    tokens = {u: hub.user_token(u) for u in ("gia", "gus2", "gwen")}
    hub.start_workspace("gia", "g", tokens["gia"], resource_type="gpu2")
    hub.start_workspace("gus2", "g", tokens["gus2"], resource_type="gpu2")
    first = env_of(hub, "gia", "g")["NVIDIA_VISIBLE_DEVICES"].split(",")
    second = env_of(hub, "gus2", "g")["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert len(first) == len(second) == 2 and set(first).isdisjoint(second), (first, second)
    assert hub.executions("gia", "g")[-1]["gpu_ids"] == first

    r = hub.spawn("gwen", "g", tokens["gwen"], {"resource_type": "gpu2"})
    assert r.status_code == 202, r.text
    follow = Follow(hub, "gwen", "g", tokens["gwen"])
    follow.start()
    wait_state(hub, "gwen", "g", "queued")
    hub.stop_workspace("gia", "g", tokens["gia"])
    follow.join(120)
    assert follow.events[-1].get("ready"), follow.events
    assert env_of(hub, "gwen", "g")["NVIDIA_VISIBLE_DEVICES"].split(",") == first
    hub.stop_workspace("gus2", "g", tokens["gus2"])
    hub.stop_workspace("gwen", "g", tokens["gwen"])


def test_leaving_the_queue_records_nothing_ran(queue_hub: Hub):
    hub = queue_hub
    ta, tb = hub.user_token("ada2"), hub.user_token("bo")
    hub.start_workspace("ada2", "busy", ta, resource_type="small")
    r = hub.spawn("bo", "wait", tb, {"resource_type": "small"})
    assert r.status_code == 202, r.text
    wait_state(hub, "bo", "wait", "queued")
    hub.stop_workspace("bo", "wait", tb)
    (ex,) = hub.executions("bo", "wait")
    assert ex["state"] == "stopped" and "Left the queue" in ex["stop_detail"], ex
    hub.stop_workspace("ada2", "busy", ta)


def test_a_hub_restart_loses_no_allocation_and_allocates_nothing_twice(start_hub):
    hub = start_hub(
        WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES),
        WORKSPACE_GPU_INVENTORY="0,1,2,3",
        WORKSPACE_GPU_DEVICE_MODE="env",
        WORKSPACE_SAVE_RETRY_INTERVAL="2",
    )
    tokens = {u: hub.user_token(u) for u in ("ra", "rb", "rc")}
    hub.start_workspace("ra", "g", tokens["ra"], resource_type="gpu2")
    hub.start_workspace("rb", "g", tokens["rb"], resource_type="gpu2")
    r = hub.spawn("rc", "g", tokens["rc"], {"resource_type": "gpu2"})
    assert r.status_code == 202, r.text
    wait_state(hub, "rc", "g", "queued")

    hub.proc.terminate()
    hub.proc.wait(30)
    hub.start()
    # the running ones kept their GPUs; the waiting start ended with a sentence (nothing ran)
    ra = hub.executions("ra", "g")[-1]
    rb = hub.executions("rb", "g")[-1]
    assert ra["state"] == rb["state"] == "running" and set(ra["gpu_ids"]).isdisjoint(rb["gpu_ids"])
    deadline = time.monotonic() + 60
    while hub.executions("rc", "g")[0]["state"] == "queued":
        assert time.monotonic() < deadline, hub.executions("rc", "g")
        time.sleep(1)
    first = hub.executions("rc", "g")[0]
    assert first["state"] == "stopped" and (
        "hub restarted" in first["stop_detail"] or "Left the queue" in first["stop_detail"]
    ), first
    if len(hub.executions("rc", "g")) == 1:
        r = hub.spawn("rc", "g", tokens["rc"], {"resource_type": "gpu2"})  # the student tries again
        assert r.status_code == 202, r.text
    # the new start waits (all four GPUs are held) and gets ra's when ra stops
    wait_state(hub, "rc", "g", "queued")
    hub.stop_workspace("ra", "g", tokens["ra"])
    hub.progress("rc", "g", tokens["rc"])
    rc = hub.executions("rc", "g")[-1]
    assert rc["state"] == "running" and sorted(rc["gpu_ids"]) == sorted(ra["gpu_ids"]), rc
    for u in ("rb", "rc"):
        hub.stop_workspace(u, "g", tokens[u])


def test_a_gpu_start_whose_cuda_needs_a_newer_driver_is_refused_before_its_restore(start_hub, docker_client):
    """#32: the node's driver (configured here as NVML would say it: this machine has no GPU) against the
    image's CUDA runtime (its `workspace.versions` label, as the builder writes it)."""
    made = docker_client.containers.create("workspace-base:latest")
    versions = json.dumps({"python": "3.11.2", "cuda": "13.0.88"})
    try:
        made.commit(
            repository="wstest-cuda13", tag="latest", changes=[f"LABEL workspace.versions={json.dumps(versions)}"]
        )
    finally:
        made.remove()
    try:
        hub = start_hub(
            WORKSPACE_RESOURCE_TYPES=json.dumps([{"name": "cpu"}, {"name": "gpu1", "gpus": 1}]),
            WORKSPACE_GPU_INVENTORY="0,1",
            WORKSPACE_GPU_DEVICE_MODE="env",
            WORKSPACE_GPU_DRIVER=json.dumps({"version": "535.104.05", "cuda": "12.2"}),
            WORKSPACE_IMAGES="workspace-base:latest,wstest-cuda13:latest",
        )
        token = hub.user_token("cudi")
        hub.start_workspace("cudi", "w", token, resource_type="cpu")  # a first output, to restore later
        hub.stop_workspace("cudi", "w", token)
        r = hub.spawn("cudi", "w", token, {"resource_type": "gpu1", "image": "wstest-cuda13:latest"})
        if r.status_code in (201, 202):  # the hub answered before the start failed: its progress says why
            events = hub.progress("cudi", "w", token)
            assert events[-1].get("failed"), events
            said = events[-1].get("message", "")
        else:  # it failed within the hub's wait: the answer is the sentence
            assert r.status_code == 409, r.text
            said = r.json()["message"]
        assert "needs NVIDIA driver 580.65.06 or newer" in said, said
        assert "535.104.05" in said and "CUDA 12.2" in said, said
        hub.wait_stopped("cudi", "w")
        refused = hub.executions("cudi", "w")[-1]
        assert refused["state"] == "failed" and refused["restore"] is None, refused  # nothing was restored
        assert "restoring" not in [t["state"] for t in refused["transitions"]], refused["transitions"]
        assert not hub.containers(user="cudi", server="w")
        # the same image without a GPU does not use CUDA: it starts
        hub.start_workspace("cudi", "w", token, resource_type="cpu", image="wstest-cuda13:latest")
        hub.stop_workspace("cudi", "w", token)
    finally:
        docker_client.images.remove("wstest-cuda13:latest", force=True)
