"""A deployment on the real swarm (#33): its two replicas on two nodes (each fetching the saved output it
serves from the store of record), requests through the proxy and the router answered by both, one node
lost while a client keeps asking, and the service going on: no request fails, and the lost replica is
replaced on a node that is up."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest
import requests

from tests.cluster.conftest import running_swarm_hub
from tests.integration.hub import Hub
from workspace.db import Database
from workspace.deployments.records import Deployment
from workspace.setup.cluster import Cluster

APP = r"""
import http.server, os, socket
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = (open("/openbayes/output/answer.txt").read().strip() + " " + socket.gethostname()).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()
"""


@pytest.fixture(scope="module")
def swarm_hub(cluster: Cluster, tmp_path_factory):
    with running_swarm_hub(cluster, tmp_path_factory.mktemp("swarm-deploy-hub")) as hub:
        yield hub


def replicas(hub: Hub) -> list[tuple[str, str | None, str]]:
    """(server, node, state) of the deployment's replicas, from the records."""
    with Database(hub.settings.db_url, migrate=False, key_file=hub.settings.secret_key_file).session() as s:
        dep = s.query(Deployment).filter_by(owner="sam", name="answer").one()
        return [(r.server, r.node, r.state) for r in dep.replica_records]


def wait_ready(hub: Hub, count: int, timeout: float = 240) -> list[tuple[str, str | None, str]]:
    deadline = time.monotonic() + timeout
    while True:
        now = replicas(hub)
        ready = [r for r in now if r[2] == "ready"]
        if len(ready) == count and len(now) == count:
            return ready
        assert time.monotonic() < deadline, (now, hub.log_tail(60))
        time.sleep(1)


def test_two_replicas_on_two_nodes_and_a_lost_node_costs_no_request(cluster: Cluster, swarm_hub: Hub):
    hub = swarm_hub
    token = hub.user_token("sam")
    command = f"echo 42 > answer.txt; cat > app.py <<'PY'\n{APP}\nPY"
    r = hub.service_call("POST", "/workspaces/app/tasks", token, json={"command": command})
    assert r.status_code == 202, r.text
    number = r.json()["execution"]["number"]
    deadline = time.monotonic() + 180
    while next(e for e in hub.executions("sam", "app") if e["number"] == number)["state"] != "stopped":
        assert time.monotonic() < deadline, hub.log_tail(40)
        time.sleep(1)
    body = {"name": "answer", "from": f"app#{number}", "image": hub.settings.image, "replicas": 2}
    body.update(command="python3 /openbayes/output/app.py", port=8080, access="public")
    r = hub.service_call("POST", "/deployments", token, json=body)
    assert r.status_code == 201, r.text
    ready = wait_ready(hub, 2)
    nodes = {node for _, node, _ in ready}
    assert len(nodes) == 2, ready  # spread: one replica a node

    url = f"{hub.url}/serve/sam/answer/"
    answers: list[tuple[int, str]] = []
    stop = threading.Event()

    def ask():
        with requests.Session() as s:
            while not stop.is_set():
                try:
                    r = s.get(url, timeout=30)
                    answers.append((r.status_code, r.text))
                except requests.RequestException as e:
                    answers.append((0, str(e)))
                time.sleep(0.05)

    client = threading.Thread(target=ask)
    client.start()
    # a worker (the manager's loss is the swarm's, not a node's: nothing could be placed anew)
    lost = next(n for n in cluster.nodes if n.name in nodes and n.name != cluster.manager.name)
    try:
        time.sleep(2)
        # the machine dies: its engine, its store agent and the replica's processes at once
        pids = subprocess.run(["ip", "netns", "pids", lost.name], capture_output=True, text=True).stdout.split()
        for pid in pids:
            os.kill(int(pid), signal.SIGKILL)
        killed = time.monotonic()
        # a new replica replaces the lost one, on a node that is up
        deadline = killed + 240
        while True:
            now = replicas(hub)
            ready = [r for r in now if r[2] == "ready"]
            if len(ready) == 2 and lost.name not in {node for _, node, _ in ready}:
                break
            assert time.monotonic() < deadline, (now, hub.log_tail(60))
            time.sleep(1)
        print(f"replaced in {time.monotonic() - killed:.1f} s")
        time.sleep(2)
    finally:
        stop.set()
        client.join()
        cluster.up(cluster.recorded()["image"], cluster.recorded()["gpus"], store_size="2G")  # the node again
    failed = [a for a in answers if a[0] != 200]
    assert len(answers) > 50 and not failed, (len(answers), failed[:5])
    assert all(text.startswith("42 ") for _, text in answers)
    assert hub.service_call("DELETE", "/deployments/answer", token).status_code == 204
