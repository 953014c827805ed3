"""A course pre-warmed before a lecture on a real three-node swarm (#30): a real hub and service, the nodes'
stores reached through their agents, the image loaded into a node's own engine.

Three students saved their homes on node1 (so node1 holds all three, and the store of record a copy of
each). The pre-warm gives each a node of their own (spread by load: node1, node2, node3), sends the two
homes the other nodes lack and loads the image into node3, whose engine had lost it; then the three start
at once, each on the node their home was brought to, none receiving anything.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import docker
import pytest
import requests
import sqlalchemy as sa

from tests.cluster.conftest import running_swarm_hub
from tests.cluster.test_swarm_workspaces import latest, messages, only_on, sh  # noqa: F401  (only_on: a fixture)
from tests.integration.hub import ADMIN_PASSWORD, Hub
from workspace.db import Database
from workspace.executions import find_workspace
from workspace.setup.cluster import Cluster

STUDENTS = ("pwa", "pwb", "pwc")
PLANNED = {"pwa": "node1", "pwb": "node2", "pwc": "node3"}  # in the students' order, round the nodes


@pytest.fixture(scope="module")
def course_hub(cluster: Cluster, tmp_path_factory):
    with running_swarm_hub(
        cluster,
        tmp_path_factory.mktemp("prewarm-hub"),
        WORKSPACE_RESOURCE_TYPES=json.dumps([{"name": "cpu", "description": "CPU only"}]),
        WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}}),
    ) as hub:
        yield hub


def snapshot_key(hub: Hub, user: str) -> str:
    with Database(hub.settings.db_url, migrate=False, key_file=hub.settings.secret_key_file).session() as s:
        return find_workspace(s, user, "lab1").latest.snapshot.key


def noted(hub: Hub) -> dict[str, str]:
    """The pre-warm's record: {student: node}."""
    engine = sa.create_engine(hub.settings.db_url)
    try:
        with engine.connect() as c:
            return dict(c.execute(sa.text("SELECT owner, node FROM prewarmed_homes")).all())
    finally:
        engine.dispose()


def on_node(cluster: Cluster, node: str, key: str) -> bool:
    """Whether `node`'s own store holds snapshot `key` (looked at on the host: the hub never does)."""
    (found,) = [n for n in cluster.nodes if n.name == node]
    return (found.store / "snapshots" / key).is_dir()


def test_a_course_pre_warmed_starts_on_its_nodes_with_nothing_sent(cluster, course_hub, only_on, image):  # noqa: F811
    hub = course_hub
    prof = hub.user_token("prof")
    r = hub.service_call(
        "PUT", "/courses/cs101", prof, json={"students": list(STUDENTS), "workspace": "lab1", "resource_type": "cpu"}
    )
    assert r.status_code == 200, r.text
    tokens = {u: hub.user_token(u) for u in STUDENTS}
    # each student's work, saved on node1 and copied to the store of record
    only_on("node1")
    for user in STUDENTS:
        hub.start_workspace(user, "lab1", tokens[user])
        sh(cluster, hub, user, "lab1", f"echo {user} > ~/mine.txt && head -c 3000000 /dev/urandom > ~/data.bin")
        hub.stop_workspace(user, "lab1")
    deadline = time.monotonic() + 60
    while not all(latest(hub, u, "lab1")["replicated"] for u in STUDENTS) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert all(latest(hub, u, "lab1")["replicated"] for u in STUDENTS)
    keys = {u: snapshot_key(hub, u) for u in STUDENTS}
    only_on("node1", "node2", "node3")
    # node3's engine lost the image (as a node added to a site without a registry lacks it)
    image_id = cluster.manager.client().images.get(image).id
    node3 = cluster.nodes[2].client()
    node3.images.remove(image_id, force=True)
    with pytest.raises(docker.errors.ImageNotFound):
        node3.images.get(image_id)
    try:
        lecture(cluster, hub, prof, tokens, keys, image_id)
    finally:  # whatever happened, node3 has the image again for the next tests
        cluster.up(cluster.recorded()["image"], cluster.recorded()["gpus"], store_size="2G")


def lecture(cluster: Cluster, hub: Hub, prof: str, tokens: dict[str, str], keys: dict[str, str], image_id: str):
    api = "/courses/cs101/prewarm"
    # GETs only read: the instructor's browser follows a link to the API and to the page; nothing starts
    browser = hub.browser_login("prof")
    assert browser.get(f"{hub.url}/services/workspace/api{api}", timeout=30).json()["state"] == "none"
    assert browser.get(f"{hub.url}/services/workspace/course?prewarm=1&start=1", timeout=30).status_code == 200
    # a cookie without the XSRF token, and a student: refused
    assert browser.post(f"{hub.url}/services/workspace/api{api}", timeout=30).status_code == 403
    assert hub.service_call("POST", api, tokens["pwa"]).status_code == 403
    assert hub.service_api(api, prof).json()["state"] == "none" and noted(hub) == {}
    assert not on_node(cluster, "node2", keys["pwb"])

    r = hub.service_call("POST", api, prof)
    assert r.status_code == 202, r.text
    started = r.json()
    assert started["state"] == "running" and started["homes"]["total"] == 3, started
    assert {s["name"]: s["node"] for s in started["students"]} == PLANNED
    again = hub.service_call("POST", api, prof)  # the image alone takes a while: it runs still
    assert again.status_code == 409 and "under way already" in again.json()["message"], again.text
    seen, deadline = [], time.monotonic() + 600
    while True:
        status = hub.service_api(api, prof).json()
        seen.append(status["state"])
        if status["state"] != "running" or time.monotonic() > deadline:
            break
        time.sleep(1)
    print(json.dumps({k: status[k] for k in ("homes", "bytes", "images", "nodes", "message")}, indent=1))
    assert status["state"] == "done" and "running" in seen, status
    assert status["homes"] == {"total": 3, "done": 3, "failed": 0, "empty": 0, "running": 0}, status
    states = {s["name"]: (s["node"], s["state"]) for s in status["students"]}
    # node1 held pwa's home already; the others' came from the store of record
    assert states == {"pwa": ("node1", "there"), "pwb": ("node2", "sent"), "pwc": ("node3", "sent")}, states
    assert status["bytes"] >= 2 * 3_000_000, status
    assert {n["name"]: n["image"] for n in status["nodes"]} == {
        "node1": "present",
        "node2": "present",
        "node3": "copied",
    }, status["nodes"]
    assert status["images"]["bytes"] > 50_000_000 and status["message"].startswith("Pre-warmed in "), status
    for user, node in PLANNED.items():
        assert on_node(cluster, node, keys[user]), (user, node)
    assert noted(hub) == PLANNED
    assert cluster.nodes[2].client().images.get(image_id).id == image_id  # the very image starts refer to

    # the lecture: all three at once, each placed where their home is, nothing sent at their start (each
    # start's progress followed from its request on: a stream opened once it is ready has its last event only)
    with ThreadPoolExecutor(len(STUDENTS)) as pool:
        following = {}
        for user in STUDENTS:
            r = hub.spawn(user, "lab1", tokens[user])
            assert r.status_code in (201, 202), r.text
            following[user] = pool.submit(hub.progress, user, "lab1", tokens[user])
        for user, events in following.items():
            events = events.result()
            assert events[-1].get("ready"), events
            text = messages(events)
            assert "Execution #2 continues from #1" in text and "Sending" not in text, text
    placed = {u: latest(hub, u, "lab1")["node"] for u in STUDENTS}
    assert placed == PLANNED, placed  # spread over the three nodes, as planned
    for user in STUDENTS:
        assert sh(cluster, hub, user, "lab1", "cat ~/mine.txt").strip() == user
        hub.stop_workspace(user, "lab1")
    admin = hub.user_token(hub.settings.admin_user, ADMIN_PASSWORD)
    page = requests.get(f"{hub.url}/services/workspace/course", headers={"Authorization": f"token {admin}"}, timeout=30)
    assert page.status_code == 200 and "Pre-warm the course" in page.text
    assert 'data-api="/services/workspace/api/courses/cs101/prewarm"' in page.text
