"""A student's first workspace, end to end, through the proxy of a real hub."""

import asyncio
import json
import os
import re
import time

import pytest
import requests
import websockets

from .hub import Hub


def spawn_ready(hub: Hub, user: str, server: str, token: str) -> list[dict]:
    r = hub.spawn(user, server, token)
    assert r.status_code in (201, 202), r.text
    events = hub.progress(user, server, token)
    assert events[-1].get("ready"), events
    return events


def test_named_server_lifecycle(hub: Hub):
    user, server = "ada", "thesis"
    token = hub.user_token(user)

    started = time.monotonic()
    events = spawn_ready(hub, user, server, token)
    print(f"spawn to ready: {time.monotonic() - started:.1f} s")
    messages = [e["message"] for e in events]
    # one event per phase the spawner ran, in order, before "ready"
    phases = [
        "Execution #1 starts with an empty home",
        "Checking image",
        "Created an empty home",
        "Creating the container",
        "Starting container",
    ]
    positions = [next(i for i, m in enumerate(messages) if m.startswith(p)) for p in phases]
    assert positions == sorted(positions), messages
    progress = [e["progress"] for e in events if "progress" in e]
    assert progress == sorted(progress), events

    # replayable: a second reader (a page reload) gets the same stream from the start
    # (the server is ready now, so JupyterHub answers with the ready event alone)
    again = hub.progress(user, server, token)
    assert again[-1].get("ready")

    base = f"{hub.url}/user/{user}/{server}"
    auth = {"Authorization": f"token {token}"}
    status = requests.get(f"{base}/api/status", headers=auth, timeout=30)
    assert status.status_code == 200, status.text
    assert "started" in status.json()

    # a file written through the contents API lands in this workspace's home on the host
    r = requests.put(
        f"{base}/api/contents/notes.txt",
        headers=auth,
        timeout=30,
        json={"type": "file", "format": "text", "content": "hello from the browser\n"},
    )
    assert r.status_code in (200, 201), r.text
    on_host = hub.live_home(user, server) / "notes.txt"
    assert on_host.read_text() == "hello from the browser\n"
    assert on_host.stat().st_uid == 1000

    # the container runs with the home as HOME and the environment of DESIGN.md
    (container,) = hub.containers(user=user, server=server)
    env = dict(line.split("=", 1) for line in container.attrs["Config"]["Env"])
    assert env["HOME"] == "/openbayes/home"
    assert env["PYTHONUSERBASE"] == "/openbayes/home/.local"
    assert env["SHELL"] == "/bin/bash"
    assert env["TORCH_HOME"].startswith("/openbayes/home/")
    assert env["CONDA_ENVS_PATH"].startswith("/openbayes/home/")

    # a terminal opens bash
    r = requests.post(f"{base}/api/terminals", headers=auth, timeout=30)
    assert r.status_code == 200, r.text
    term = r.json()["name"]
    output = asyncio.run(terminal_run(base, term, token, "echo SHELL=$SHELL ZERO=$0 END-$((6*7))", "END-42"))
    # the typed line echoes back with `$SHELL`; only the evaluated line has the value
    assert "SHELL=/bin/bash ZERO=/bin/bash END-42" in output, output

    # stop: the server goes away and no container is left
    r = hub.api("DELETE", f"/users/{user}/servers/{server}", token=token)
    assert r.status_code in (202, 204), r.text
    hub.wait_stopped(user, server)
    assert hub.containers(user=user, server=server) == []
    # the home was saved as the execution's output, then the live copy released
    (ex,) = hub.executions(user, server)
    assert ex["state"] == "stopped" and ex["stop_reason"] == "user" and ex["has_output"], ex
    assert not on_host.exists()


async def terminal_run(base: str, term: str, token: str, command: str, until: str, timeout: float = 30) -> str:
    """Type `command` in a terminal over its websocket (terminado protocol); return the output."""
    url = base.replace("http://", "ws://") + f"/terminals/websocket/{term}"
    out = []
    async with websockets.connect(url, additional_headers={"Authorization": f"token {token}"}) as ws:
        await ws.send(json.dumps(["stdin", command + "\r"]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = json.loads(await asyncio.wait_for(ws.recv(), deadline - time.monotonic()))
            except asyncio.TimeoutError:
                break
            if msg[0] == "stdout":
                out.append(msg[1])
                # `until` must be text the typed command does not contain (its echo)
                if until in "".join(out):
                    break
    return "".join(out).replace("\r", "")


def test_installs_land_in_the_home(hub: Hub):
    """pip --user and the terminal PATH point into the persistent home."""
    user, server = "grace", "pip"
    token = hub.user_token(user)
    spawn_ready(hub, user, server, token)
    base = f"{hub.url}/user/{user}/{server}"
    term = requests.post(f"{base}/api/terminals", headers={"Authorization": f"token {token}"}, timeout=30).json()[
        "name"
    ]
    script = (
        "python -c 'import site; print(\"USERSITE=\" + site.getusersitepackages())'; "
        "echo PATH=$PATH; complete -p -D 2>/dev/null | grep -q _completion_loader && echo COMPLETION=o''n; echo DO''NE"
    )
    output = asyncio.run(terminal_run(base, term, token, script, "DONE"))
    assert "USERSITE=/openbayes/home/.local/lib/python3" in output, output
    assert "/openbayes/home/.local/bin" in output, output
    assert "COMPLETION=on" in output, output
    hub.api("DELETE", f"/users/{user}/servers/{server}", token=token)
    hub.wait_stopped(user, server)


def test_users_cannot_touch_each_others_workspaces(hub: Hub):
    owner, other = "lin", "max"
    owner_token, other_token = hub.user_token(owner), hub.user_token(other)
    # JupyterHub answers 404 to hide what another user has
    assert hub.spawn(owner, "private", other_token).status_code in (403, 404)
    assert hub.api("GET", f"/users/{owner}", token=other_token).status_code in (403, 404)
    assert hub.containers(user=owner) == []

    spawn_ready(hub, owner, "private", owner_token)
    r = requests.get(
        f"{hub.url}/user/{owner}/private/api/contents",
        headers={"Authorization": f"token {other_token}"},
        timeout=30,
        allow_redirects=False,
    )
    assert r.status_code in (302, 403, 404), r.status_code
    hub.api("DELETE", f"/users/{owner}/servers/private", token=owner_token)
    hub.wait_stopped(owner, "private")


def test_missing_image_is_a_sentence_not_a_traceback(start_hub):
    hub = start_hub(WORKSPACE_IMAGE="workspace-base:does-not-exist")
    token = hub.user_token("zoe")
    r = hub.spawn("zoe", "w1", token)
    sentence = "The image workspace-base:does-not-exist is not installed on this server."
    if r.status_code >= 400:  # failed within the spawn request
        message = r.json()["message"]
    else:
        events = hub.progress("zoe", "w1", token)
        assert events[-1].get("failed"), events
        message = events[-1]["message"]
    assert sentence in message and "Traceback" not in message, message
    assert hub.containers(user="zoe") == []

    # asked in Chinese: the progress page's line (html_message, which it shows as it is) is all Chinese,
    # without the hub's English "Spawn failed:"
    r = requests.post(
        f"{hub.url}/hub/api/users/zoe/servers/w2",
        headers={"Authorization": f"token {token}", "Accept-Language": "zh-CN"},
        json={"user_options": {}, "display_name": "w2"},
        timeout=60,
    )
    if r.status_code in (201, 202):
        events = hub.progress("zoe", "w2", token)
        assert events[-1].get("failed"), events
        line = events[-1].get("html_message", "")
        assert re.search(r"[\u4e00-\u9fff]", line) and "does-not-exist" in line, events[-1]
        assert "Spawn failed" not in line and "not installed" not in line, line
    else:  # failed within the spawn request: its answer is the sentence
        assert r.status_code >= 400 and re.search(r"[\u4e00-\u9fff]", r.json()["message"]), r.text
    (ex,) = hub.executions("zoe", "w1")
    assert ex["state"] == "failed" and sentence in ex["error"], ex
    assert not ex["has_output"]


def test_wrong_password_gets_no_token(hub: Hub):
    hub.create_user("eve")
    r = requests.post(
        f"{hub.url}/hub/api/users/eve/tokens",
        json={"auth": {"username": "eve", "password": "not-the-password"}},
        timeout=30,
    )
    assert r.status_code == 403


@pytest.mark.skipif(os.geteuid() != 0, reason="binds ports on the Docker bridge like `make up`")
def test_up_refuses_a_port_in_use(hub: Hub, tmp_path):
    """`make up` against a port that is taken stops with one sentence."""
    from workspace.settings import Settings
    from workspace.setup import deploy
    from workspace.setup.steps import SetupError

    settings = Settings.from_env({"WORKSPACE_DATA_DIR": str(tmp_path), "WORKSPACE_PORT": hub.env["WORKSPACE_PORT"]})
    (tmp_path / "logs").mkdir()
    with pytest.raises(SetupError) as err:
        deploy.start_hub(settings)
    assert f"Port {hub.env['WORKSPACE_PORT']} on 127.0.0.1 is already in use" in str(err.value)
    assert "WORKSPACE_PORT=<port> make up" in str(err.value)


async def kernel_run(base: str, kernel: str, token: str, code: str, timeout: float = 60) -> str:
    """Run `code` in a kernel over its websocket (the Jupyter protocol's JSON); its printed output."""
    url = base.replace("http://", "ws://") + f"/api/kernels/{kernel}/channels"
    msg_id = f"run-{time.monotonic_ns()}"
    request = {
        "header": {
            "msg_id": msg_id,
            "msg_type": "execute_request",
            "username": "test",
            "session": "s",
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "content": {
            "code": code,
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
        },
        "channel": "shell",
        "buffers": [],
    }
    out = []
    async with websockets.connect(url, additional_headers={"Authorization": f"token {token}"}) as ws:
        await ws.send(json.dumps(request))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(await asyncio.wait_for(ws.recv(), deadline - time.monotonic()))
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == "stream":
                out.append(msg["content"]["text"])
            elif kind == "error":
                out.append("\n".join(msg["content"]["traceback"]))
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                break
    return "".join(out)


def test_a_venv_in_the_home_is_a_kernel_by_itself_and_stays_one(hub: Hub):
    """#32: `python -m venv ~/envs/NAME` makes a launcher kernel "Python (NAME)" that runs the venv's Python
    with the venv's packages first (it need not install ipykernel), and is there again after a restart."""
    user, server = "vera", "envs"
    token = hub.user_token(user)
    auth = {"Authorization": f"token {token}"}
    spawn_ready(hub, user, server, token)
    hub.sh(user, server, "python -m venv ~/envs/nlp && echo 'X = 42' > ~/envs/nlp/lib/python3.11/site-packages/mark.py")
    base = f"{hub.url}/user/{user}/{server}"
    for attempt in ("first", "after a restart"):
        specs = requests.get(f"{base}/api/kernelspecs", headers=auth, timeout=30).json()["kernelspecs"]
        assert specs["venv-nlp"]["spec"]["display_name"] == "Python (nlp)", (attempt, list(specs))
        assert "python3" in specs  # the image's own kernel stays
        r = requests.post(f"{base}/api/kernels", headers=auth, json={"name": "venv-nlp"}, timeout=60)
        assert r.status_code == 201, r.text
        code = "import sys, mark, ipykernel; print(sys.prefix, mark.X, ipykernel.__file__.startswith(sys.prefix))"
        said = asyncio.run(kernel_run(base, r.json()["id"], token, code))
        # the venv's Python and packages; ipykernel from the image's environment, after them
        assert said.split() == ["/openbayes/home/envs/nlp", "42", "False"], said
        requests.delete(f"{base}/api/kernels/{r.json()['id']}", headers=auth, timeout=30)
        hub.stop_workspace(user, server, token)  # its home saved, venv and all
        if attempt == "first":
            spawn_ready(hub, user, server, token)
