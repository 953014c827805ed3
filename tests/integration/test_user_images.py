"""Images users define (#18) against a real hub, engine and build: built in the sandbox with its log followed
live, started as a workspace, shared with a course, counted in the quota, removed; and what a hostile build
script can reach (not the hub, not the host's files)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from workspace.setup import engine

from .hub import ADMIN_PASSWORD, Hub

APT = "cowsay\n"
PIP = "humanize==4.11.0\n"
WORKSPACE = str(Path(sys.executable).parent / "workspace")


def probe_script(hub: Hub, secret_path: str) -> str:
    """A post-build script that tries what a hostile owner would: the hub's API, the host's own ports and the
    cloud's metadata address, and a file of the host; it records what it got and never fails."""
    hub_port = hub.env["WORKSPACE_HUB_PORT"]
    return f"""
for target in {engine.bridge_gateway()}:{hub_port} {engine.bridge_gateway()}:22 169.254.169.254:80; do
  /opt/venv/bin/python - "$target" <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
try:
    socket.create_connection((host, int(port)), timeout=5).close()
    print("probe REACHED", sys.argv[1])
except OSError as e:
    print("probe refused", sys.argv[1], type(e).__name__)
PY
done
cat {secret_path} 2>&1 | sed 's/^/probe host file: /' || true
echo built > /opt/tools-built
"""


def wait_image(hub: Hub, token: str, name: str, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        r = hub.service_call("GET", f"/images/{name}", token)
        assert r.status_code == 200, r.text
        if r.json()["state"] not in ("queued", "building"):
            return r.json()
        assert time.monotonic() < deadline, r.json()
        time.sleep(0.5)


def test_a_users_image_builds_in_a_sandbox_and_starts(hub: Hub, tmp_path):
    alice, bob = f"imga{uuid.uuid4().hex[:6]}", f"imgb{uuid.uuid4().hex[:6]}"
    ta, tb = hub.user_token(alice), hub.user_token(bob)
    course = f"imgcourse{uuid.uuid4().hex[:6]}"
    assert hub.api("POST", f"/groups/{course}", json={"users": [bob]}).status_code == 201
    secret = tmp_path / "host-secret.txt"
    secret.write_text("the host's secret\n")

    # bad input: a sentence, nothing recorded
    r = hub.service_call("POST", "/images", ta, json={"name": "tools", "from": "workspace-base:latest", "apt": "x;rm"})
    assert r.status_code == 400 and "Debian package" in r.json()["message"], r.text
    r = hub.service_call(
        "POST",
        "/images",
        ta,
        json={"name": "tools", "from": "workspace-base:latest", "apt": APT, "visibility": f"group:{course}"},
    )
    assert r.status_code == 403 and "belong to or teach" in r.json()["message"], r.text
    r = hub.service_call("POST", "/images", ta, json={"name": "tools", "from": "ubuntu:latest", "apt": APT})
    assert r.status_code == 400 and "you may use" in r.json()["message"], r.text
    assert [i for i in hub.service_call("GET", "/images", ta).json() if i["kind"] == "user"] == []

    started = time.monotonic()
    r = hub.service_call(
        "POST",
        "/images",
        ta,
        json={
            "name": "tools",
            "from": "workspace-base:latest",
            "apt": APT,
            "pip": PIP,
            "script": probe_script(hub, secret),
        },
    )
    assert r.status_code == 202, r.text
    image = r.json()
    name = image["name"]
    assert name == f"{alice}/tools" and image["state"] in ("queued", "building")

    # the log, followed while the build runs
    seen_while_building = False
    text = ""
    with requests.get(
        f"{hub.url}{image['log_url']}", headers={"Authorization": f"token {ta}"}, stream=True, timeout=600
    ) as log:
        assert log.status_code == 200, log.text
        for chunk in log.iter_content(chunk_size=None):
            text += chunk.decode(errors="replace")
            if not seen_while_building and "[image] step 1/3: apt-get install 1 package(s): cowsay" in text:
                state = hub.service_call("GET", f"/images/{name}", ta).json()
                seen_while_building = state["state"] == "building"
                assert state["progress"] is None or state["progress"].startswith("step "), state
    assert seen_while_building, text[-3000:]
    record = wait_image(hub, ta, name)
    seconds = time.monotonic() - started
    assert record["state"] == "ready", (record, text[-3000:])
    assert "[image] step 2/3: pip install 1 requirement(s)" in text and "[image] versions {" in text
    assert record["versions"]["python"].startswith("3.") and record["bytes"] > 0, record
    print(
        f"\nuser image {name}: built in {seconds:.1f} s ({record['build_seconds']} s in the builder), "
        f"{record['bytes'] / 1e6:.1f} MB over its base"
    )

    # the hostile part of the script reached nothing of the site and found no host file
    probes = [line for line in text.splitlines() if " probe " in line]
    assert len([p for p in probes if "probe refused" in p]) == 3, probes
    assert not any("REACHED" in p for p in probes), probes
    assert any("No such file" in p for p in probes) and "the host's secret" not in text, probes

    # private: bob can neither see it, read its log, delete it nor start it
    assert hub.service_call("GET", f"/images/{name}", tb).status_code == 404
    assert hub.service_call("GET", f"/images/{name}/log", tb).status_code == 404
    assert hub.service_call("DELETE", f"/images/{name}", tb).status_code == 404
    assert name not in [i["name"] for i in hub.service_call("GET", "/images", tb).json()]
    r = hub.spawn(bob, "stolen", tb, {"image": name})
    if r.status_code in (201, 202):
        events = hub.progress(bob, "stolen", tb)
        assert events[-1].get("failed") and "There is no image" in events[-1]["message"], events
        hub.wait_stopped(bob, "stolen")
    else:  # refused before anything was recorded, as if there were no such image (#28)
        assert r.status_code == 404 and "There is no image" in r.json()["message"], r.text

    # a workspace of alice's from it has both packages (and what the script made)
    hub.start_workspace(alice, "tw", ta, image=name)
    out = hub.sh(
        alice,
        "tw",
        "/usr/games/cowsay moo; python -c 'import humanize; print(humanize.__version__)'; "
        "cat /opt/tools-built; id -u; ls /tmp/workspace-build 2>&1 || true",
    )
    assert "moo" in out and "4.11.0" in out and "built" in out and "1000" in out, out
    assert "No such file" in out, "the build's input (with the CA bundle) is not left in the image"
    hub.stop_workspace(alice, "tw", ta)

    # its layer counts against alice's quota
    storage = hub.service_call("GET", "/storage", ta).json()
    (item,) = [i for i in storage["items"] if i["kind"] == "image"]
    assert item["bytes"] == record["bytes"] and storage["usage"]["bytes"] >= record["bytes"], storage

    # public: bob sees it, and once an administrator approved this build (#28, test_image_approvals.py) the
    # spawn form offers it to him, saying who built it; he may not change it or read its log
    r = hub.service_call("PATCH", f"/images/{name}", ta, json={"visibility": "public"})
    assert r.status_code == 200 and r.json()["visibility"] == "public"
    browser = hub.browser_login(bob)
    form = browser.get(f"{hub.url}/hub/spawn/{bob}/shared", timeout=30)
    assert name not in form.text, form.text[-2000:]
    admin = hub.user_token(hub.settings.admin_user, password=ADMIN_PASSWORD)
    assert hub.service_call("POST", f"/images/{name}/approve", admin, json={}).status_code == 200
    form = browser.get(f"{hub.url}/hub/spawn/{bob}/shared", timeout=30)
    assert name in form.text and f"built by {alice}, approved by" in form.text, form.text[-2000:]
    assert hub.service_call("GET", f"/images/{name}/log", tb).status_code == 403
    assert hub.service_call("PATCH", f"/images/{name}", tb, json={"visibility": "private"}).status_code == 403

    # a rebuild that fails (from the command line, its log printed as it comes) keeps the image that worked
    (tmp_path / "broken.sh").write_text("echo broken; exit 3\n")
    env = dict(os.environ, WORKSPACE_URL=hub.url, WORKSPACE_TOKEN=ta)
    env.pop("JUPYTERHUB_API_TOKEN", None)
    build = [
        WORKSPACE,
        "image",
        "build",
        "tools",
        "--from",
        "workspace-base:latest",
        "--script",
        str(tmp_path / "broken.sh"),
    ]
    p = subprocess.run(build, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "[image] step 1/1: the post-build script" in p.stdout and "broken" in p.stdout, p.stdout
    assert f"{name}: The build failed (exit code 3)" in p.stdout, p.stdout
    failed = hub.service_call("GET", f"/images/{name}", ta).json()
    assert failed["state"] == "failed" and failed["available"] and failed["build"] == 2, failed
    # the stored sentence is said in each reader's language
    chinese = requests.get(
        f"{hub.url}/services/workspace/api/images/{name}",
        headers={"Authorization": f"token {ta}", "Accept-Language": "zh-CN"},
        timeout=30,
    ).json()["error"]
    assert "3" in chinese and "exit code" not in chinese and chinese != failed["error"], chinese
    listing = subprocess.run([WORKSPACE, "image", "ls"], capture_output=True, text=True, env=env, timeout=60)
    assert any(line.startswith(name) and " failed " in line for line in listing.stdout.splitlines()), listing.stdout

    # an administrator may remove anyone's; the engine's image goes with it
    (built,) = engine.client().images.list(filters={"label": f"workspace.user-image={name}"})
    ref = built.tags[0]
    assert ref.startswith(f"{hub.deployment}-user-"), built.tags
    assert hub.service_call("DELETE", f"/images/{name}", admin).status_code == 204
    assert hub.service_call("GET", f"/images/{name}", ta).status_code == 404
    with pytest.raises(Exception):
        engine.client().images.get(ref)


DOCKERFILE = """\
# every instruction the builder takes (#32)
FROM workspace-base:latest
ARG GREETING=hello
ENV COURSE=cs101 DATA_DIR=/opt/course
LABEL org.example.course="cs101"
WORKDIR /opt/course
COPY notes.txt .
COPY --chown=1000:1000 lib/ /opt/course/lib/
ADD data.tar.gz /opt/course/data
COPY probe.sh /tmp/probe.sh
RUN echo "$GREETING $COURSE" > greeting.txt && pwd > where.txt && bash /tmp/probe.sh
RUN ["sh", "-c", "id -u > /opt/course/root-id.txt"]
USER 1000
RUN id -u > /opt/course/lib/user-id.txt
EXPOSE 8080
CMD ["python3", "-m", "http.server"]
"""


def context_archive(files: dict[str, bytes]) -> str:
    """A build context as the CLI sends it: a tar archive, in base64."""
    import base64
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def test_a_dockerfile_builds_in_the_sandbox_and_starts_as_a_workspace(hub: Hub, docker_client, tmp_path):
    import base64
    import io
    import tarfile

    user = f"dfile{uuid.uuid4().hex[:6]}"
    token = hub.user_token(user)
    secret = tmp_path / "host-secret.txt"
    secret.write_text("the host's secret\n")
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        info = tarfile.TarInfo("scores.csv")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"1,2\n"))
    files = {
        "notes.txt": b"read me\n",
        "lib/helper.py": b"X = 1\n",
        "data.tar.gz": data.getvalue(),
        "probe.sh": probe_script(hub, secret).encode(),
    }
    # what the builder cannot do is refused naming its line; a hostile context is refused; nothing recorded
    r = hub.service_call(
        "POST", "/images", token, json={"name": "df", "dockerfile": "FROM workspace-base:latest\nVOLUME /data\n"}
    )
    assert r.status_code == 400 and "Line 2 of the Dockerfile: VOLUME is not supported" in r.json()["message"], r.text
    link = io.BytesIO()
    with tarfile.open(fileobj=link, mode="w") as tar:
        info = tarfile.TarInfo("notes.txt")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/shadow"
        tar.addfile(info)
    r = hub.service_call(
        "POST",
        "/images",
        token,
        json={"name": "df", "dockerfile": DOCKERFILE, "context": base64.b64encode(link.getvalue()).decode()},
    )
    assert r.status_code == 400 and "is a link or a device" in r.json()["message"], r.text
    assert [i for i in hub.service_call("GET", "/images", token).json() if i["kind"] == "user"] == []

    r = hub.service_call(
        "POST", "/images", token, json={"name": "df", "dockerfile": DOCKERFILE, "context": context_archive(files)}
    )
    assert r.status_code == 202, r.text
    name = r.json()["name"]
    record = wait_image(hub, token, name)
    log = hub.service_call("GET", f"/images/{name}/log", token).text
    assert record["state"] == "ready", (record, log[-3000:])
    assert record["dockerfile"] == DOCKERFILE and "[image] step 5/7: RUN (line 11)" in log, log[-3000:]
    # the hostile RUN reached nothing of the site and found no host file
    probes = [line for line in log.splitlines() if " probe " in line]
    assert len([p for p in probes if "probe refused" in p]) == 3 and not any("REACHED" in p for p in probes), probes
    assert "the host's secret" not in log
    # its labels, and the base's user and command kept: it starts as a workspace
    (image,) = docker_client.images.list(filters={"label": f"workspace.user-image={name}"})
    labels = image.labels
    assert labels["org.example.course"] == "cs101" and labels["workspace.dockerfile.cmd"].startswith('["python3"')
    assert image.attrs["Config"]["User"] in ("1000", "jovyan", "1000:1000"), image.attrs["Config"]["User"]
    hub.start_workspace(user, "w", token, image=name)
    out = hub.sh(
        user,
        "w",
        "cd /opt/course && cat greeting.txt where.txt notes.txt data/scores.csv root-id.txt lib/user-id.txt; "
        "stat -c %u lib/helper.py; echo $COURSE $DATA_DIR; id -u; ls ~ | grep -c course || true",
    )
    assert out.split("\n") == [
        "hello cs101",
        "/opt/course",
        "read me",
        "1,2",
        "0",
        "1000",
        "1000",
        "cs101 /opt/course",
        "1000",  # the server runs as the image's user, not the Dockerfile's
        "0",
        "",
    ], out
    hub.stop_workspace(user, "w", token)
    # the context was kept for the build only
    assert not list((hub.data_dir / "execution-logs" / "images" / "contexts").glob("*.tar"))

    # the CLI: a Dockerfile and its folder as the context
    folder = tmp_path / "cli"
    folder.mkdir()
    (folder / "Dockerfile").write_text("FROM workspace-base:latest\nCOPY hello.txt /opt/hello.txt\n")
    (folder / "hello.txt").write_text("hi from the CLI\n")
    env = dict(os.environ, WORKSPACE_URL=hub.url, WORKSPACE_TOKEN=token)
    p = subprocess.run(
        [WORKSPACE, "image", "build", "cli", "--dockerfile", str(folder / "Dockerfile")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0 and "[image] step 1/1: COPY (line 2)" in p.stdout, (p.stdout[-2000:], p.stderr)
    p = subprocess.run([WORKSPACE, "image", "build", "cli2"], capture_output=True, text=True, env=env)
    assert p.returncode != 0 and "--dockerfile" in p.stderr, p.stderr
