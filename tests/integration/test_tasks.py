"""Tasks (#17) against a real hub and containers: a command run to completion as an execution.

Each task here is started through the workspace service's API as a student
would (POST /api/workspaces/{name}/tasks with their own token); its record,
output and kept log are then read back.
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from workspace.setup import engine
from workspace.spawner import networks

from .hub import ADMIN_PASSWORD, Hub

TYPES = [
    {"name": "standard", "description": "any number at once"},
    {"name": "single", "description": "one at a time", "capacity": 1},
    {"name": "brief", "description": "5 s at most", "max_runtime": 5},
    {"name": "gpu1", "gpus": 1, "gpu_model": "A100"},
]
LOG_LIMIT = 1 << 20
WORKSPACE = str(Path(sys.executable).parent / "workspace")


@pytest.fixture(scope="module")
def task_hub(start_hub) -> Hub:
    return start_hub(
        WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES),
        WORKSPACE_DEFAULT_RESOURCE_TYPE="standard",
        WORKSPACE_GPU_INVENTORY="0,1",
        WORKSPACE_GPU_DEVICE_MODE="env",
        WORKSPACE_LOG_LIMIT=str(LOG_LIMIT),
        WORKSPACE_WEBHOOK_NETWORKS="127.0.0.1/32",  # the tests' receiver; by default no private address
        # an idle server would be culled within seconds here; a task never is
        WORKSPACE_CULL_INTERVAL="1",
        WORKSPACE_CULL_BROWSER_TIMEOUT="2",
        WORKSPACE_CULL_CPU_WINDOW="2",
        WORKSPACE_CULL_WARN_BEFORE="1",
        WORKSPACE_MAX_RUNNING="5",
    )


def run(hub: Hub, token: str, name: str, command: str, **options) -> dict:
    r = hub.service_call("POST", f"/workspaces/{name}/tasks", token, json={"command": command, **options})
    assert r.status_code == 202, r.text
    record = r.json()["execution"]
    assert record and record["kind"] == "task" and record["command"] == command, r.json()
    return record


def execution(hub: Hub, user: str, name: str, number: int) -> dict:
    return next(e for e in hub.executions(user, name) if e["number"] == number)


def wait_started(hub: Hub, user: str, name: str, number: int, timeout: float = 120) -> dict:
    """The execution once it is past its start (queued, preparing, restoring): running, or what it became."""
    deadline = time.monotonic() + timeout
    while True:
        ex = execution(hub, user, name, number)
        if ex["state"] not in ("queued", "preparing", "pulling", "restoring"):
            return ex
        assert time.monotonic() < deadline, ex
        time.sleep(0.3)


def wait_ended(hub: Hub, user: str, name: str, number: int, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        ex = execution(hub, user, name, number)
        if ex["state"] in ("stopped", "failed"):
            hub.wait_stopped(user, name)
            return ex
        assert time.monotonic() < deadline, ex
        time.sleep(0.3)


def log_of(hub: Hub, token: str, name: str, number: int) -> str:
    r = hub.service_call("GET", f"/workspaces/{name}/executions/{number}/logs", token)
    assert r.status_code == 200, r.text
    return r.text


def lines(log: str) -> list[str]:
    """The log's lines without the engine's times (each line starts with one)."""
    out = []
    for line in log.splitlines():
        stamp, _, text = line.partition(" ")
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", stamp), line
        out.append(text)
    return out


def test_a_task_runs_to_completion_its_output_and_log_are_kept(task_hub: Hub):
    token = task_hub.user_token("tara")
    ex = run(
        task_hub,
        token,
        "train",
        "mkdir -p out && echo 42 > out/result.txt && echo to-stdout && echo to-stderr >&2 && pwd",
    )
    done = wait_ended(task_hub, "tara", "train", ex["number"])
    assert done["stop_reason"] == "completed" and done["exit_code"] == 0 and done["has_output"], done
    assert "successfully" in done["stop_detail"], done
    text = lines(log_of(task_hub, token, "train", ex["number"]))
    assert {"to-stdout", "to-stderr", "/openbayes/home"} <= set(text), text
    assert done["log"]["kept"] > 0, done

    # the next task continues from that output by default, and a failing one still saves
    again = run(task_hub, token, "train", "cat out/result.txt; echo more >> out/result.txt; exit 3")
    failed = wait_ended(task_hub, "tara", "train", again["number"])
    assert failed["exit_code"] == 3 and failed["stop_reason"] == "completed" and failed["has_output"], failed
    assert "exit code 3" in failed["stop_detail"], failed
    assert "42" in lines(log_of(task_hub, token, "train", again["number"]))
    third = run(task_hub, token, "train", "cat out/result.txt", continue_from=again["number"])
    wait_ended(task_hub, "tara", "train", third["number"])
    assert lines(log_of(task_hub, token, "train", third["number"]))[1:3] == ["42", "more"]
    # a task ends by itself, not by stop(): its owner's network goes with it all the same (#30: it stayed)
    name, deadline = networks.name_for(task_hub.deployment, "tara"), time.monotonic() + 20
    while [n for n in engine.client().networks.list(names=[name]) if n.name == name]:
        assert time.monotonic() < deadline, f"the network {name} outlived the owner's last task"
        time.sleep(0.5)


def test_log_follow_delivers_lines_while_the_task_runs_and_cancel_saves(task_hub: Hub):
    token = task_hub.user_token("fred")
    ex = run(task_hub, token, "follow", "echo started > marker; for i in $(seq 1 600); do echo line$i; sleep 1; done")
    seen, states = [], []
    url = f"{task_hub.url}/services/workspace/api/workspaces/follow/executions/{ex['number']}/logs"
    with requests.get(
        url, params={"follow": 1}, headers={"Authorization": f"token {token}"}, stream=True, timeout=120
    ) as r:
        assert r.status_code == 200, r.text
        for line in r.iter_lines(decode_unicode=True):
            seen.append(line)
            if "line2" in line:
                states.append(execution(task_hub, "fred", "follow", ex["number"])["state"])
                r2 = task_hub.service_call("POST", f"/workspaces/follow/executions/{ex['number']}/cancel", token)
                assert r2.status_code == 202, r2.text
    # line2 came while the task ran; the stream ended by itself once it was cancelled
    assert states == ["running"], states
    done = wait_ended(task_hub, "fred", "follow", ex["number"])
    assert done["stop_reason"] == "user" and "cancelled" in done["stop_detail"] and done["has_output"], done
    assert not any("line100" in s for s in seen), seen[-3:]
    check = run(task_hub, token, "follow", "cat marker")
    wait_ended(task_hub, "fred", "follow", check["number"])
    assert "started" in lines(log_of(task_hub, token, "follow", check["number"]))


def test_a_task_waits_in_the_queue_then_runs_and_max_runtime_ends_one(task_hub: Hub):
    t1, t2 = task_hub.user_token("quinn"), task_hub.user_token("uma")
    first = run(task_hub, t1, "q", "sleep 6; echo first-done", resource_type="single")
    second = run(task_hub, t2, "q", "echo second-ran", resource_type="single")
    assert execution(task_hub, "uma", "q", second["number"])["state"] == "queued"
    done2 = wait_ended(task_hub, "uma", "q", second["number"], timeout=180)
    done1 = execution(task_hub, "quinn", "q", first["number"])
    assert done1["state"] == "stopped" and done1["exit_code"] == 0, done1
    assert done2["exit_code"] == 0 and "second-ran" in lines(log_of(task_hub, t2, "q", second["number"]))
    # it started only once the first had ended
    started2 = next(t["at"] for t in done2["transitions"] if t["state"] == "running")
    stopped1 = next(t["at"] for t in done1["transitions"] if t["state"] in ("saving",))
    assert started2 >= stopped1, (done1["transitions"], done2["transitions"])

    # the type's maximum run time ends a task (never idleness: nothing is attached to it)
    brief = run(task_hub, t1, "brief", "echo working > w; sleep 600", resource_type="brief")
    ended = wait_ended(task_hub, "quinn", "brief", brief["number"], timeout=120)
    assert ended["stop_reason"] == "max_runtime" and ended["has_output"], ended


def test_tasks_with_gpus_get_disjoint_devices(task_hub: Hub):
    ta, tb = task_hub.user_token("gina"), task_hub.user_token("gus")  # one GPU task per person at once
    a = run(task_hub, ta, "g", "echo gpu=$NVIDIA_VISIBLE_DEVICES; sleep 4", resource_type="gpu1")
    b = run(task_hub, tb, "g", "echo gpu=$NVIDIA_VISIBLE_DEVICES; sleep 4", resource_type="gpu1")
    ea, eb = wait_ended(task_hub, "gina", "g", a["number"]), wait_ended(task_hub, "gus", "g", b["number"])
    ga = [s for s in lines(log_of(task_hub, ta, "g", a["number"])) if s.startswith("gpu=")]
    gb = [s for s in lines(log_of(task_hub, tb, "g", b["number"])) if s.startswith("gpu=")]
    assert ga and gb and ga != gb and {ga[0], gb[0]} <= {"gpu=0", "gpu=1"}, (ga, gb)
    assert ea["gpu_ids"] and eb["gpu_ids"] and set(ea["gpu_ids"]).isdisjoint(eb["gpu_ids"]), (ea, eb)
    # both held their GPU at once: each started before the other ended
    ran = {
        k: [t["at"] for t in e["transitions"] if t["state"] in ("running", "saving")] for k, e in (("a", ea), ("b", eb))
    }
    assert ran["a"][0] < ran["b"][1] and ran["b"][0] < ran["a"][1], ran


def hub_peak_rss_mb(hub: Hub) -> float:
    status = open(f"/proc/{hub.proc.pid}/status").read()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


def test_a_task_writing_1_gb_keeps_the_limit_and_the_hub_stays_small(task_hub: Hub):
    token = task_hub.user_token("lou")
    before = hub_peak_rss_mb(task_hub)
    ex = run(
        task_hub,
        token,
        "loud",
        (
            'python3 -c \'import sys; b = ("x" * 1023 + "\\n").encode() * 1024\n'
            "for _ in range(1024): sys.stdout.buffer.write(b)'; echo the-end"
        ),
    )
    done = wait_ended(task_hub, "lou", "loud", ex["number"], timeout=600)
    assert done["exit_code"] == 0, done
    log = log_of(task_hub, token, "loud", ex["number"])
    assert LOG_LIMIT - 4096 <= len(log.encode()) <= LOG_LIMIT + 4096, len(log)
    first = log.splitlines()[0]
    assert "were dropped" in first and done["log"]["bytes"] >= 1 << 30, (first, done["log"])
    assert "the-end" in log[-4096:]
    assert hub_peak_rss_mb(task_hub) - before < 64, (before, hub_peak_rss_mb(task_hub))


def test_bad_task_requests_get_a_sentence_and_change_nothing(task_hub: Hub):
    token, other = task_hub.user_token("bea"), task_hub.user_token("mallory")
    for body, status, words in [
        ({}, 400, "command"),
        ({"command": "  "}, 400, "command"),
        ({"command": "x" * 9000}, 400, "at most"),
        ({"command": "a\u0000b"}, 400, "NUL"),
        ({"command": "true", "evil": 1}, 400, "Unknown"),
        ({"command": "true", "resource_type": "nope"}, 400, "nope"),
        ({"command": "true", "continue_from": 99}, 400, "#"),
    ]:
        r = task_hub.service_call("POST", "/workspaces/bad/tasks", token, json=body)
        assert r.status_code == status and words in r.json()["message"], (body, r.text)
    r = task_hub.service_call("POST", "/workspaces/Bad..Name/tasks", token, json={"command": "true"})
    assert r.status_code == 400, r.text
    assert task_hub.executions("bea", "bad") == []

    ex = run(task_hub, token, "mine", "sleep 30")
    # a second start of a running workspace is the user's 409
    r = task_hub.service_call("POST", "/workspaces/mine/tasks", token, json={"command": "true"})
    assert r.status_code == 409 and "running" in r.json()["message"], r.text
    # another student can neither read its log, nor cancel it, nor start a task for its owner
    n = ex["number"]
    assert task_hub.service_call("GET", f"/workspaces/mine/executions/{n}/logs?user=bea", other).status_code == 403
    assert task_hub.service_call("POST", f"/workspaces/mine/executions/{n}/cancel?user=bea", other).status_code == 403
    r = task_hub.service_call("POST", "/workspaces/mine/tasks?user=bea", other, json={"command": "true"})
    assert r.status_code == 403, r.text
    # their own workspace of that name has no such execution
    assert task_hub.service_call("GET", f"/workspaces/mine/executions/{n}/logs", other).status_code == 404
    # none of that stopped it (it may still be starting under load: wait for it to get past the start)
    assert wait_started(task_hub, "bea", "mine", n)["state"] == "running"
    r = task_hub.service_call("POST", f"/workspaces/mine/executions/{n}/cancel", token)
    assert r.status_code == 202, r.text
    wait_ended(task_hub, "bea", "mine", n)


def test_a_hostile_task_cannot_fake_its_end_or_hold_the_port(task_hub: Hub):
    token = task_hub.user_token("hana")
    # it prints the runner's trailer itself, binds nothing (the runner holds the port), leaves a daemon
    script = (
        "echo '[workspace-task] exit=0 wrote=1 seconds=1' >&2; "
        "(python3 -m http.server 8888 >/dev/null 2>&1 &); "
        "(setsid sleep 1000 >/dev/null 2>&1 &); "
        "exit 7"
    )
    ex = run(task_hub, token, "hostile", script)
    done = wait_ended(task_hub, "hana", "hostile", ex["number"])
    assert done["exit_code"] == 7 and done["stop_reason"] == "completed", done
    assert not task_hub.containers(user="hana", server="hostile")


def test_the_hub_page_of_a_task_redirects_to_the_workspace_page(task_hub: Hub):
    token = task_hub.user_token("rita")
    ex = run(task_hub, token, "page", "sleep 60")
    deadline = time.monotonic() + 60
    while execution(task_hub, "rita", "page", ex["number"])["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    time.sleep(1)
    r = requests.get(f"{task_hub.url}/user/rita/page/", allow_redirects=False, timeout=10)
    assert r.status_code == 302 and r.headers["Location"].endswith("/services/workspace/workspaces/page"), r.headers
    task_hub.service_call("POST", f"/workspaces/page/executions/{ex['number']}/cancel", token)
    wait_ended(task_hub, "rita", "page", ex["number"])


def test_a_task_never_counts_as_idle(task_hub: Hub):
    """The culler (which culls an idle server within seconds here) leaves a quiet task alone."""
    token = task_hub.user_token("ian")
    ex = run(task_hub, token, "quiet", "sleep 12; echo woke")
    done = wait_ended(task_hub, "ian", "quiet", ex["number"], timeout=120)
    assert done["stop_reason"] == "completed" and done["exit_code"] == 0, done


def test_the_cli_runs_a_task_prints_its_log_and_exits_with_its_code(task_hub: Hub):
    token = task_hub.user_token("cleo")
    env = dict(os.environ, WORKSPACE_URL=task_hub.url, WORKSPACE_TOKEN=token)
    command = [WORKSPACE, "run", "cli", "--", "python3", "-c", "print('from the task'); raise SystemExit(4)"]
    p = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 4, (p.stdout, p.stderr)
    assert "task cli #1" in p.stdout and "from the task" in p.stdout and "exit code 4" in p.stdout, p.stdout
    p = subprocess.run([WORKSPACE, "logs", "cli"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0 and "from the task" in p.stdout, (p.stdout, p.stderr)
    p = subprocess.run([WORKSPACE, "cancel", "cli#1"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 1 and "not running" in p.stderr, p.stderr
    p = subprocess.run([WORKSPACE, "logs", "cli#x"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 1 and "whole number" in p.stderr, p.stderr


def test_a_finished_task_is_told_in_the_owners_running_workspaces_and_on_the_pages(task_hub: Hub):
    token = task_hub.user_token("nora")
    task_hub.start_workspace("nora", "desk", token)
    # busy, so that this hub's culler (which culls an idle server within seconds) keeps it
    task_hub.sh("nora", "desk", "nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
    ex = run(task_hub, token, "job", "exit 5")
    wait_ended(task_hub, "nora", "job", ex["number"])
    deadline, found = time.monotonic() + 30, []
    while not found:
        assert time.monotonic() < deadline, "no notice of the task's end in the running workspace"
        r = requests.get(
            f"{task_hub.url}/user/nora/desk/api/workspace/notices",
            headers={"Authorization": f"token {token}"},
            timeout=10,
        )
        found = [n for n in r.json()["notices"] if "Task #1 of “job” ended" in n["message"]] if r.ok else []
        time.sleep(0.5)
    assert "exit code 5" in found[0]["message"] and found[0]["level"] == "error", found
    page = task_hub.browser_login("nora").get(f"{task_hub.url}/services/workspace/workspaces", timeout=30)
    assert "finished-tasks" in page.text and "Task #1 of “job” ended" in page.text
    task_hub.stop_workspace("nora", "desk", token)


class Receiver(http.server.BaseHTTPRequestHandler):
    calls: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.calls.append((dict(self.headers), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    Receiver.calls = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://localhost:{server.server_address[1]}/hook"
    server.shutdown()


def test_a_webhook_is_called_signed_when_a_task_ends(task_hub: Hub, receiver):
    token, other = task_hub.user_token("willa"), task_hub.user_token("wes")
    assert task_hub.service_call("GET", "/webhook", token).status_code == 404
    r = task_hub.service_call("PUT", "/webhook", token, json={"url": receiver})
    assert r.status_code == 200, r.text
    secret = r.json()["secret"]
    assert len(secret) == 64 and task_hub.service_call("GET", "/webhook", other).status_code == 404
    ex = run(task_hub, token, "hooked", "exit 2")
    wait_ended(task_hub, "willa", "hooked", ex["number"])
    deadline = time.monotonic() + 30
    while not Receiver.calls:
        assert time.monotonic() < deadline, "the webhook was not called"
        time.sleep(0.3)
    headers, body = Receiver.calls[0]
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Workspace-Signature"] == expected and headers["X-Workspace-Event"] == "task.ended"
    payload = json.loads(body)
    assert (payload["owner"], payload["workspace"], payload["number"], payload["exit_code"]) == (
        "willa",
        "hooked",
        ex["number"],
        2,
    ), payload
    assert "Authorization" not in headers and "token" not in body.decode().lower()
    deadline = time.monotonic() + 10
    while task_hub.service_call("GET", "/webhook", token).json()["last_result"] != "204":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert task_hub.service_call("DELETE", "/webhook", token).status_code == 204
    assert task_hub.service_call("DELETE", "/webhook", token).status_code == 404


def test_a_webhook_never_reaches_the_hubs_own_networks(start_hub, receiver):
    """On a hub that allows no private network (the default), neither a literal address nor a name
    that resolves to one is called."""
    hub = start_hub(WORKSPACE_CULL_INTERVAL="1")
    token = hub.user_token("vic")
    for url, words in [
        ("http://127.0.0.1:8081/hub/api/users", "private network"),
        ("http://169.254.169.254/latest/meta-data", "private network"),
        ("http://[::1]:8000/", "private network"),
        ("file:///etc/passwd", "http"),
        ("gopher://example.org/", "http"),
        ("http://user:pw@example.org/", "password"),
        ("http://exa mple.org/", "URL"),
        ("", "url"),
    ]:
        r = hub.service_call("PUT", "/webhook", token, json={"url": url})
        assert r.status_code == 400 and words in r.json()["message"], (url, r.text)
    assert hub.service_call("GET", "/webhook", token).status_code == 404
    # a name is accepted, but what it resolves to is checked at the call: localhost is not called
    assert hub.service_call("PUT", "/webhook", token, json={"url": receiver}).status_code == 200
    ex = run(hub, token, "nohook", "true")
    wait_ended(hub, "vic", "nohook", ex["number"])
    deadline = time.monotonic() + 30
    while (hub.service_call("GET", "/webhook", token).json()["last_result"] or "") == "":
        assert time.monotonic() < deadline, "the call was not even tried"
        time.sleep(0.3)
    assert "private networks" in hub.service_call("GET", "/webhook", token).json()["last_result"]
    assert Receiver.calls == []


def followers(hub: Hub) -> float:
    """The service's count of log followers open now (its admin-only metric)."""
    admin = hub.user_token(hub.settings.admin_user, ADMIN_PASSWORD)
    r = requests.get(f"{hub.url}/services/workspace/metrics", headers={"Authorization": f"token {admin}"}, timeout=30)
    assert r.status_code == 200, r.text
    found = {f.name: f.samples[0].value for f in text_string_to_metric_families(r.text) if f.samples}
    return found["workspace_log_followers"]


def test_log_followers_end_with_their_client_and_one_user_has_few(task_hub: Hub):
    # a task that says one line, then nothing for ten minutes: a follower gets no line that would show it
    # that its client has gone, so only the client's going can end it
    token = task_hub.user_token("quinn")
    ex = run(task_hub, token, "quiet", "echo started; sleep 600")
    url = f"{task_hub.url}/services/workspace/api/workspaces/quiet/executions/{ex['number']}/logs"
    headers = {"Authorization": f"token {token}"}
    assert followers(task_hub) == 0
    opened = []
    for _ in range(4):
        r = requests.get(url, params={"follow": 1}, headers=headers, stream=True, timeout=120)
        assert r.status_code == 200, r.text
        lines_of = r.iter_lines(decode_unicode=True)  # kept: a generator let go of may close its connection
        assert "started" in next(lines_of)
        opened.append((r, lines_of))
    assert followers(task_hub) == 4
    # a fifth of the same user's: refused with a sentence, and nothing left open
    r = requests.get(url, params={"follow": 1}, headers=headers, timeout=30)
    assert r.status_code == 429, r.text
    assert "following 4 logs at once already" in r.json()["message"]
    # the log without follow is no follower: still answered
    assert "started" in log_of(task_hub, token, "quiet", ex["number"])
    for r, _ in opened:
        r.close()
    deadline = time.monotonic() + 15
    while followers(task_hub) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert followers(task_hub) == 0, "followers outlived their clients"
    # their places are free again
    with requests.get(url, params={"follow": 1}, headers=headers, stream=True, timeout=120) as r:
        assert r.status_code == 200, r.text
    r = task_hub.service_call("POST", f"/workspaces/quiet/executions/{ex['number']}/cancel", token)
    assert r.status_code == 202, r.text
    wait_ended(task_hub, "quinn", "quiet", ex["number"])
