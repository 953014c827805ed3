"""The hostile student: every attack of issue #13 and its variants, against a real hub and real containers.

Each test asserts that the attack fails with a clear 4xx or is contained,
that nothing outside the attacker's own data changed, and that another
user's workspace keeps working. SECURITY.md lists what is defended and how.
"""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
import time
import uuid
import zipfile

import pytest
import requests

from tests.integration.hub import ADMIN_PASSWORD, Hub
from tests.integration.test_datasets import api

TYPES = [
    {"name": "standard", "cpu": 1, "memory": "1G"},
    {"name": "tiny", "cpu": 0.5, "memory": "256M", "pids": 96, "home_files": 100},
    {"name": "gpu", "gpus": 1, "gpu_model": "A100"},
]
QUOTA = 60_000_000


@pytest.fixture(scope="module")
def hub(start_hub) -> Hub:
    return start_hub(
        WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES),
        WORKSPACE_GPU_INVENTORY="0,1",
        WORKSPACE_GPU_DEVICE_MODE="env",
        WORKSPACE_QUOTA_BYTES=str(QUOTA),
        WORKSPACE_MAX_RUNNING="2",
        WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}, "cs102": {"instructors": ["ta"]}}),
        WORKSPACE_CULL_INTERVAL="1",
        WORKSPACE_USAGE_SAMPLE_INTERVAL="1",
        WORKSPACE_HOME_FILES_INTERVAL="1",
    )


def upload(hub: Hub, token: str, ref: str, filename: str, data: bytes, **extra) -> requests.Response:
    """The upload's completion, or its refusal when it is begun (which the tests expect too)."""
    r = api(hub, "POST", f"/datasets/{ref}/uploads", token, json={"filename": filename, "size": len(data), **extra})
    if r.status_code != 201:
        return r
    upload_id = r.json()["id"]
    r = api(hub, "PUT", f"/datasets/{ref}/uploads/{upload_id}?offset=0", token, data=data)
    assert r.status_code == 200, r.text
    return api(hub, "POST", f"/datasets/{ref}/uploads/{upload_id}/complete", token, json={})


def plant_in_server(hub: Hub, user: str, ws: str, token: str, module: str, code: str, extra: str = "") -> None:
    """What any student can do: a module imported by every Python of the workspace, the Jupyter server
    included (a `.pth` file in their user site-packages, in their home), then a restart."""
    site = hub.sh(user, ws, "python -c 'import site; print(site.getusersitepackages())'").strip()
    hub.sh(
        user,
        ws,
        f"mkdir -p {site} && cat > {site}/{module}.py <<'EOF'\n{code}\nEOF\n"
        f"echo 'import {module}' > {site}/{module}.pth{extra}",
    )
    hub.stop_workspace(user, ws, token)
    hub.start_workspace(user, ws, token)


def host_tree(path) -> set:
    """Names under a host directory (to show nothing appeared there)."""
    return {os.path.join(d, f) for d, dirs, files in os.walk(path) for f in files + dirs}


def alive(hub: Hub, user: str, ws: str, token: str) -> bool:
    r = requests.get(f"{hub.url}/user/{user}/{ws}/api/status", headers={"Authorization": f"token {token}"}, timeout=30)
    return r.status_code == 200


# -- 1. links in a saved output --------------------------------------------------------------------


def test_links_in_an_output_never_lead_out_of_it(hub: Hub):
    token = hub.user_token("mal")
    hub.start_workspace("mal", "links", token)
    hub.sh(
        "mal",
        "links",
        "cd ~ && mkdir -p work && echo mine > work/r.txt && ln -s . t && ln -s t/.. L "
        "&& ln -s L/.. u && ln -s / rootfs && ln -s /etc etc-link && ln -s work/../.. up",
    )
    hub.stop_workspace("mal", "links", token)
    assert api(hub, "POST", "/datasets", token, json={"name": "loot"}).status_code == 201
    store_before = host_tree(hub.settings.store_dir / "datasets")
    for path in (
        "u/live",
        "u/snapshots",
        "u",
        "L",
        "t/..",
        "t/work",
        "rootfs/etc",
        "etc-link",
        "up",
        "../..",
        "work/../..",
        "/etc",
        "u/../../..",
        "work/%2e%2e",
        "work/\x00x",
    ):
        r = api(
            hub,
            "POST",
            "/datasets/mal/loot/versions",
            token,
            json={"from_execution": {"workspace": "links", "number": 1, "path": path}},
        )
        assert r.status_code in (400, 404), (path, r.status_code, r.text)
        message = r.json()["message"]
        assert "GB" not in message and "snapshots" not in message.replace(path, ""), (path, message)
    assert api(hub, "GET", "/datasets/mal/loot", token).json()["versions"] == []
    assert host_tree(hub.settings.store_dir / "datasets") == store_before
    # the real directory still works, and links inside the home are data, never followed by a measurement
    r = api(
        hub,
        "POST",
        "/datasets/mal/loot/versions",
        token,
        json={"from_execution": {"workspace": "links", "number": 1, "path": "work"}},
    )
    assert r.status_code == 201 and r.json()["files"] == 1, r.text
    storage = api(hub, "GET", "/storage", token).json()
    assert storage["usage"]["bytes"] < 1_000_000, storage["usage"]  # `rootfs -> /` was not walked


# -- 2. archives -----------------------------------------------------------------------------------


def cve_2025_4517_tar(marker: str) -> bytes:
    """The shape of the published exploit: long names and a chain of links that stay inside by name,
    then a link out through them and a file written through that link."""
    buf = io.BytesIO()
    comp = "d" * 247
    steps = "abcdefghijklmnop"
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        path = ""
        for step in steps:
            d = tarfile.TarInfo(os.path.join(path, comp))
            d.type = tarfile.DIRTYPE
            tar.addfile(d)
            link = tarfile.TarInfo(os.path.join(path, step))
            link.type, link.linkname = tarfile.SYMTYPE, comp
            tar.addfile(link)
            path = os.path.join(path, comp)
        chain = tarfile.TarInfo(os.path.join(*steps, "l" * 254))
        chain.type, chain.linkname = tarfile.SYMTYPE, "../" * len(steps)
        tar.addfile(chain)
        escape = tarfile.TarInfo("escape")
        escape.type, escape.linkname = tarfile.SYMTYPE, os.path.join(*steps, "l" * 254) + "/../../../../../../../tmp"
        tar.addfile(escape)
        payload = f"pwned {marker}".encode()
        f = tarfile.TarInfo(f"escape/{marker}")
        f.size = len(payload)
        tar.addfile(f, io.BytesIO(payload))
    return buf.getvalue()


def simple_tar(entries) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def member(name, kind="file", data=b"x", linkname=""):
    info = tarfile.TarInfo(name)
    if kind == "file":
        info.size = len(data)
        return info, data
    info.type = {"sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}[
        kind
    ]
    info.linkname = linkname
    if kind == "chr":
        info.devmajor, info.devminor = 1, 3
    return info, None


def test_archives_are_unpacked_without_privileges_and_never_write_outside(hub: Hub):
    token = hub.user_token("tara")
    assert api(hub, "POST", "/datasets", token, json={"name": "up"}).status_code == 201
    marker = f"ws-escape-{uuid.uuid4().hex}"
    zip_link = io.BytesIO()
    with zipfile.ZipFile(zip_link, "w") as z:
        info = zipfile.ZipInfo("passwd-link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, "/etc/passwd")
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("zeros.bin", b"\0" * (QUOTA + 10_000_000))
    attacks = {
        "cve.tar": cve_2025_4517_tar(marker),
        "abs.tar": simple_tar([member(f"/tmp/{marker}")]),
        "dotdot.tar": simple_tar([member(f"../../../../../../tmp/{marker}")]),
        "hard.tar": simple_tar([member("h", "hard", linkname="/etc/passwd")]),
        "hard-up.tar": simple_tar([member("h", "hard", linkname="../../../../etc/passwd")]),
        "through.tar": simple_tar([member("l", "sym", linkname="."), member(f"l/l/{marker}")]),
        "dev.tar": simple_tar([member("null", "chr")]),
        "fifo.tar": simple_tar([member("p", "fifo")]),
        "link.zip": zip_link.getvalue(),
        "bomb.zip": bomb.getvalue(),
    }
    for name, data in attacks.items():
        r = upload(hub, token, "tara/up", name, data, unpack=True)
        assert r.status_code == 400, (name, r.status_code, r.text)
        assert not os.path.exists(f"/tmp/{marker}"), name
    assert "quota" in upload(hub, token, "tara/up", "bomb.zip", attacks["bomb.zip"], unpack=True).json()["message"]
    assert api(hub, "GET", "/datasets/tara/up", token).json()["versions"] == []
    assert not list((hub.settings.store_dir / "uploads").iterdir()), "refused uploads are discarded"
    assert not hub.containers(), "no sandbox is left behind"
    # a clean archive still works: its files belong to the unprivileged user, not root
    good = simple_tar([member("d/a.txt", data=b"aa"), member("d/l", "sym", linkname="a.txt")])
    r = upload(hub, token, "tara/up", "good.tar", good, unpack=True)
    assert r.status_code == 201 and r.json()["files"] == 1, r.text
    (unpacked,) = (hub.settings.store_dir / "datasets").glob("*/d/a.txt")
    assert os.stat(unpacked).st_uid == 1000


def test_the_sandbox_holds_even_a_fooled_unpacker(hub: Hub, tmp_path):
    """Were the unpacker fooled, it could do no more than this script tries: all of it fails."""
    from workspace.setup.engine import bridge_gateway
    from workspace.uploads.sandbox import Sandbox

    archive, target = tmp_path / "archive", tmp_path / "out"
    archive.write_bytes(b"original")
    target.mkdir()
    script = f"""
import os, socket
results = {{"uid": os.getuid()}}
for path in ("/etc/pwned", "/in/archive", "/usr/pwned", "/out/../pwned"):
    try:
        open(path, "w").write("x"); results[path] = "WROTE"
    except OSError as e:
        results[path] = type(e).__name__
try:
    socket.create_connection(("{bridge_gateway()}", {hub.settings.hub_port}), timeout=3)
    results["hub"] = "REACHED"
except OSError as e:
    results["hub"] = type(e).__name__
try:
    os.mknod("/out/dev", 0o20666, os.makedev(1, 3)); results["mknod"] = "MADE"
except OSError as e:
    results["mknod"] = type(e).__name__
print(results)
"""
    sandbox = Sandbox(image=hub.settings.image, deployment=hub.deployment)
    code, out = sandbox._run(
        [sandbox.python, "-c", script],
        {str(archive): {"bind": "/in/archive", "mode": "ro"}, str(target): {"bind": "/out", "mode": "rw"}},
        workdir="/out",
    )
    assert code == 0, out
    assert "WROTE" not in out and "REACHED" not in out and "MADE" not in out and "'uid': 1000" in out, out
    assert archive.read_bytes() == b"original" and not (tmp_path / "pwned").exists()


def test_uploads_stay_within_the_quota(hub: Hub):
    token = hub.user_token("quinn")
    assert api(hub, "POST", "/datasets", token, json={"name": "big"}).status_code == 201
    r = api(hub, "POST", "/datasets/quinn/big/uploads", token, json={"filename": "x.bin", "size": QUOTA + 1})
    assert r.status_code == 413 and "quota" in r.json()["message"], r.text
    half = QUOTA // 2 + 1
    ids = []
    r = api(hub, "POST", "/datasets/quinn/big/uploads", token, json={"filename": "a.bin", "size": half})
    assert r.status_code == 201, r.text
    ids.append(r.json()["id"])
    # a second one that fits alone but not beside the first (uploads under way count)
    r = api(hub, "POST", "/datasets/quinn/big/uploads", token, json={"filename": "b.bin", "size": half})
    assert r.status_code == 413 and "under way" in r.json()["message"], r.text
    for i in range(3):
        r = api(hub, "POST", "/datasets/quinn/big/uploads", token, json={"filename": f"s{i}", "size": 10})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    r = api(hub, "POST", "/datasets/quinn/big/uploads", token, json={"filename": "one-too-many", "size": 10})
    assert r.status_code == 429, r.text
    for upload_id in ids:
        assert api(hub, "DELETE", f"/datasets/quinn/big/uploads/{upload_id}", token).status_code == 204
    # abandoned uploads expire
    from workspace.uploads.staging import Upload, expire

    up = Upload.create(hub.settings.store_dir / "uploads", {"user": "quinn", "size": 1})
    assert expire(hub.settings.store_dir / "uploads", 3600, now=time.time() + 7200) == 1 and not up.dir.exists()


# -- 3 and 4. a workspace's server is the student's --------------------------------------------------


SPY = r"""
import os, tornado.httputil
_init = tornado.httputil.HTTPServerRequest.__init__
def _spy(self, *a, **k):
    _init(self, *a, **k)
    auth = self.headers.get("Authorization") if self.headers else None
    if auth:
        with open(os.path.expanduser("~/seen-headers.log"), "a") as f:
            f.write(auth + "\n")
tornado.httputil.HTTPServerRequest.__init__ = _spy
"""

CONFIG_SPY = r"""
import os
open(os.path.expanduser("~/user-config-was-loaded"), "w").write("yes")
"""


def test_a_server_the_student_controls_records_no_hub_credential(hub: Hub):
    token = hub.user_token("eve")
    hub.start_workspace("eve", "spy", token)
    # the server now runs the student's code; their ~/.jupyter config is there too
    plant_in_server(
        hub,
        "eve",
        "spy",
        token,
        "spy",
        SPY,
        extra=f" && mkdir -p ~/.jupyter && cat > ~/.jupyter/jupyter_server_config.py <<'EOF'\n{CONFIG_SPY}\nEOF\n",
    )
    deadline = time.monotonic() + 30
    seen = ""
    while time.monotonic() < deadline and "workspace-report" not in seen:
        time.sleep(1)
        seen = hub.sh("eve", "spy", "cat ~/seen-headers.log 2>/dev/null || true")
    assert "workspace-report" in seen, "the culler did not call the workspace (the spy saw nothing)"
    lines = [line for line in seen.splitlines() if line.strip()]
    assert all(line.startswith("workspace-report ") for line in lines), lines
    key = lines[0].split()[1]
    # the key is the workspace's own: it opens nothing at the hub
    assert (
        requests.get(f"{hub.url}/hub/api/user", headers={"Authorization": f"token {key}"}, timeout=30).status_code
        == 403
    )
    # the home's Jupyter config is not loaded (JupyterHub's disable_user_config)
    assert hub.sh("eve", "spy", "ls ~/user-config-was-loaded 2>/dev/null || echo absent").strip() == "absent"
    # the token JupyterHub gives the server reaches only eve's own things
    env = dict(line.split("=", 1) for line in hub.containers(user="eve", server="spy")[0].attrs["Config"]["Env"])
    assert hub.admin_token not in env.values()
    model = requests.get(
        f"{hub.url}/hub/api/user", timeout=30, headers={"Authorization": f"token {env['JUPYTERHUB_API_TOKEN']}"}
    ).json()
    assert model["name"] == "eve" and model.get("scopes"), model
    assert all("=eve" in s for s in model["scopes"]), model["scopes"]  # every scope filtered to eve
    hub.stop_workspace("eve", "spy", token)


HOSTILE_REPORT = r"""
import tornado.web
_finish = tornado.web.RequestHandler.finish
def finish(self, chunk=None):
    if self.request.path.endswith("/api/workspace/activity"):
        self._write_buffer = []  # a 3 MB JSON string instead of the report
        self.set_header("Content-Type", "application/json")
        chunk = '"' + "x" * 3_000_000 + '"'
    return _finish(self, chunk)
tornado.web.RequestHandler.finish = finish
"""


def test_a_hostile_report_does_not_stop_culling_for_anyone_else(hub: Hub):
    token, other = hub.user_token("hal"), hub.user_token("olga")
    hub.start_workspace("hal", "bad", token)
    plant_in_server(hub, "hal", "bad", token, "hostile", HOSTILE_REPORT)
    hub.start_workspace("olga", "good", other)
    deadline, samples = time.monotonic() + 30, {}
    while time.monotonic() < deadline and not all(samples.get(u) for u in ("hal", "olga")):
        time.sleep(1)
        for user, ws, tok in (("hal", "bad", token), ("olga", "good", other)):
            number = hub.executions(user, ws)[-1]["number"]
            r = api(hub, "GET", f"/workspaces/{ws}/executions/{number}/usage", tok)
            samples[user] = r.json()["samples"] if r.status_code == 200 else []
    # the culler goes on sampling both: the hostile one judged on the host's CPU reading
    assert samples.get("olga") and samples.get("hal"), samples
    assert "no activity report" in hub.log_tail(400) or "malformed" in hub.log_tail(400)
    hub.stop_workspace("hal", "bad", token)
    hub.stop_workspace("olga", "good", other)


# -- 6. limits and isolation -------------------------------------------------------------------------


def container_ip(hub: Hub, user: str, ws: str) -> str:
    (c,) = hub.containers(user=user, server=ws)
    c.reload()
    return next(iter(c.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]


def test_a_workspace_is_contained(hub: Hub):
    mal, vic = hub.user_token("mallory"), hub.user_token("victor")
    hub.start_workspace("mallory", "a", mal, resource_type="tiny")
    hub.start_workspace("mallory", "b", mal)
    hub.start_workspace("victor", "v", vic)

    status = hub.sh("mallory", "a", "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
    assert "CapEff:\t0000000000000000" in status and "NoNewPrivs:\t1" in status, status

    # other owners' workspaces are out of reach; one's own are not
    probe = (
        'python -c "import socket,sys\ntry:\n socket.create_connection((sys.argv[1], 8888), timeout=3)'
        "\n print('reached')\nexcept OSError as e:\n print('blocked', e)\" "
    )
    assert "blocked" in hub.sh("mallory", "a", probe + container_ip(hub, "victor", "v"))
    assert "reached" in hub.sh("mallory", "a", probe + container_ip(hub, "mallory", "b"))

    # a third running workspace is refused (WORKSPACE_MAX_RUNNING=2), with a sentence
    r = hub.spawn("mallory", "c", mal)
    assert r.status_code == 403 and "stop one" in r.json()["message"], r.text

    # a fork bomb meets the process limit; a memory hog is killed; the neighbour is untouched
    bomb = (
        'python -c "import os,time\nmade=failed=0\nend=time.time()+8\nwhile time.time()<end:\n try:\n'
        "  pid=os.fork()\n  if pid==0:\n   os.close(1); os.close(2); time.sleep(8); os._exit(0)\n  made+=1\n"
        " except OSError:\n"
        '  failed+=1; time.sleep(0.01)\nprint(made, failed)" || true'
    )
    made, failed = map(int, hub.sh("mallory", "a", bomb).split()[-2:])
    assert made < 96 and failed > 0, (made, failed)
    (container,) = hub.containers(user="mallory", server="a")
    code, _ = container.exec_run(["python", "-c", "a = bytearray(600 << 20)"], user="1000")
    assert code != 0
    assert alive(hub, "victor", "v", vic)

    # the live homes cannot be read by other host accounts
    assert stat.S_IMODE(os.stat(hub.settings.store_dir / "live").st_mode) & 0o077 == 0
    for ws in ("a", "b"):
        hub.stop_workspace("mallory", ws, mal)
    hub.stop_workspace("victor", "v", vic)


def test_a_home_over_its_file_limit_is_warned_and_starts_again_only_in_cleanup_mode(hub: Hub):
    """Neither store limits a home's file count: the culler counts (up to the limit) and warns, the
    next start is refused with the way out; nothing saved is cut."""
    token = hub.user_token("fern")
    hub.start_workspace("fern", "many", token, resource_type="tiny")  # at most 100 files
    hub.sh("fern", "many", "mkdir -p ~/small && cd ~/small && for i in $(seq 150); do : > f$i; done")
    deadline, notices = time.monotonic() + 30, []
    while time.monotonic() < deadline and not any(n["id"] == "home-files" for n in notices):
        time.sleep(1)
        r = requests.get(
            f"{hub.url}/user/fern/many/api/workspace/notices", timeout=10, headers={"Authorization": f"token {token}"}
        )
        notices = r.json()["notices"] if r.status_code == 200 else []
    (notice,) = [n for n in notices if n["id"] == "home-files"]
    assert "more than 100 files" in notice["message"], notice
    hub.stop_workspace("fern", "many", token)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not hub.executions("fern", "many")[-1]["snapshot_files"]:
        time.sleep(0.5)
    assert hub.executions("fern", "many")[-1]["snapshot_files"] >= 150  # saved whole
    r = hub.spawn("fern", "many", token, {"resource_type": "tiny"})
    assert r.status_code == 403 and "cleanup mode" in r.json()["message"], r.text
    assert len(hub.executions("fern", "many")) == 1, "a refused start records nothing"
    hub.start_workspace("fern", "many", token, cleanup=True)  # the way out
    assert hub.sh("fern", "many", "ls ~/small | wc -l").strip() == "150"
    hub.stop_workspace("fern", "many", token)


def test_one_student_cannot_hold_every_gpu(hub: Hub):
    token = hub.user_token("gabe")
    hub.start_workspace("gabe", "g1", token, resource_type="gpu")
    r = hub.spawn("gabe", "g2", token, {"resource_type": "gpu"})
    assert r.status_code == 403 and "most one person may" in r.json()["message"], r.text
    other = hub.user_token("gina")
    hub.start_workspace("gina", "g", other, resource_type="gpu")  # the second GPU is for someone else
    hub.stop_workspace("gabe", "g1", token)
    hub.stop_workspace("gina", "g", other)


# -- 5. courses ----------------------------------------------------------------------------------------


def test_a_roster_names_only_students_and_instructors_read_only_students(hub: Hub):
    prof, ta = hub.user_token("prof"), hub.user_token("ta")
    admin_name = hub.settings.admin_user
    admin = hub.user_token(admin_name, ADMIN_PASSWORD)
    for roster, who in ((["stu1", admin_name], "an administrator"), (["stu1", "ta"], "an instructor")):
        r = hub.service_call("PUT", "/courses/cs101", prof, json={"students": roster})
        assert r.status_code == 403 and who in r.json()["message"], r.text
        assert hub.api("GET", "/groups/cs101").status_code == 404, "a refused set-up changes nothing"
    r = hub.service_call("PUT", "/courses/cs101", prof, json={"students": ["stu1"]})
    assert r.status_code == 200, r.text
    # an administrator puts an admin and another instructor into the group: prof still cannot read them
    assert hub.api("POST", "/groups/cs101/users", json={"users": [admin_name, "ta"]}).status_code == 200
    for other in (admin_name, "ta"):
        r = hub.service_api("/workspaces", prof, user=other)
        assert r.status_code == 403, (other, r.text)
    assert hub.service_api("/workspaces", prof, user="stu1").status_code == 200
    assert hub.service_api("/workspaces", admin, user="ta").status_code == 200
    # nor can the other course's instructor read cs101's students
    assert hub.service_api("/workspaces", ta, user="stu1").status_code == 403


# -- every path parameter ---------------------------------------------------------------------------------


def test_dotdot_and_odd_names_in_every_path_parameter(hub: Hub):
    token = hub.user_token("dot")
    assert api(hub, "POST", "/datasets", token, json={"name": "mine"}).status_code == 201
    victim = hub.user_token("vera")
    assert api(hub, "POST", "/datasets", victim, json={"name": "private"}).status_code == 201
    paths = [
        "/workspaces/..%2f..%2fetc/executions",
        "/workspaces/%2e%2e/executions/1",
        "/datasets/dot/..%2fvera",
        "/datasets/vera/private",
        "/datasets/dot/mine/uploads/..%2f..%2f..",
        "/datasets/dot/mine/versions/..%2f1",
        "/datasets/dot/mine/shares/user/..%2f..",
        "/workspaces/%00/executions",
        "/datasets/%2e%2e/%2e%2e",
    ]
    for path in paths:
        for method in ("GET", "POST", "DELETE", "PUT"):
            r = requests.request(
                method,
                f"{hub.url}/services/workspace/api{path}",
                timeout=30,
                headers={"Authorization": f"token {token}"},
                json={},
            )
            assert 400 <= r.status_code < 500, (method, path, r.status_code, r.text[:200])
            assert '"versions"' not in r.text, (method, path, r.text[:200])  # never another's dataset
    r = hub.spawn("dot", "%2e%2e", token)
    assert 400 <= r.status_code < 500, r.text


def test_a_number_of_thousands_of_digits_is_a_404_on_every_route(hub: Hub):
    """Python refuses to parse an int of over 4,300 digits: each `\\d+` of a route answers 404, never 500."""
    token = hub.user_token("digits")
    huge = "9" * 5000
    for method, path in [
        ("GET", f"/workspaces/ws/executions/{huge}"),
        ("GET", f"/workspaces/ws/executions/{huge}/usage"),
        ("GET", f"/workspaces/ws/executions/{huge}/logs"),
        ("POST", f"/workspaces/ws/executions/{huge}/cancel"),
        ("GET", f"/workspaces/ws/executions/{huge}/files"),
        ("DELETE", f"/workspaces/ws/executions/{huge}/output"),
        ("DELETE", f"/datasets/digits/d/versions/{huge}"),
    ]:
        r = hub.service_call(method, path, token)
        assert r.status_code == 404, (method, path[:60], r.status_code, r.text[:200])
