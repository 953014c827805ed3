"""Labelling in one's workspace (#36): the labelling image's Label Studio, through the server's proxy, over a
dataset mounted at /input0, its export kept in the home and made a dataset version from the output."""

from __future__ import annotations

import io
import json
import struct
import tarfile
import time
import zlib

import docker
import pytest
import requests

from .hub import Hub
from .test_datasets import api, upload

LABELLING = "workspace-labelling:latest"
CONFIG = (
    '<View><Image name="image" value="$image"/><RectangleLabels name="box" toName="image">'
    '<Label value="cat"/><Label value="dog"/></RectangleLabels></View>'
)


@pytest.fixture(scope="module")
def labelling(docker_client):
    try:
        docker_client.images.get(LABELLING)
    except docker.errors.ImageNotFound:
        pytest.skip(f"{LABELLING} is not built: run `make images` (or `make test`, which builds it)")
    return LABELLING


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A PNG of one colour, made here (no imaging library in the suite)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def images_tar(images: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in images.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def first_open(session: requests.Session, url: str, timeout: float = 300) -> tuple[requests.Response, float]:
    """Open Label Studio's projects page until it answers (its first start makes its database); the
    response and the seconds it took."""
    began, r = time.monotonic(), None
    while time.monotonic() - began < timeout:
        r = session.get(url, timeout=timeout)
        if r.status_code == 200:
            return r, time.monotonic() - began
        time.sleep(1)
    raise AssertionError(f"Label Studio did not answer in {timeout} s: {r and (r.status_code, r.text[:300])}")


def test_label_studio_labels_a_mounted_dataset_and_its_export_becomes_a_dataset_version(hub: Hub, labelling):
    user, ws = "lena", "labels"
    token, other = hub.user_token(user), hub.user_token("lena-other")
    pictures = {"pets/cat.png": png(64, 48, (200, 40, 40)), "pets/dog.png": png(32, 32, (40, 40, 200))}
    assert api(hub, "POST", "/datasets", token, json={"name": "pets"}).status_code == 201
    r = upload(hub, token, "lena/pets", "pets.tar.gz", images_tar(pictures), unpack=True)
    assert r.status_code == 201 and r.json()["files"] == 2, r.text
    hub.start_workspace(user, ws, token, image=labelling, datasets=["lena/pets"])

    base = f"{hub.url}/user/{user}/{ws}/label-studio"
    s = requests.Session()
    s.headers["Authorization"] = f"token {token}"  # the hub's: the proxy takes it, Label Studio never sees it
    page, seconds = first_open(s, f"{base}/projects/")
    print(f"Label Studio's first open: {seconds:.1f} s")
    # its browser app is given its absolute address (it refuses a path) on the origin the browser used
    assert f'hostname: "{base}"' in page.text, page.text[:3000]
    me = s.get(f"{base}/api/current-user/whoami", timeout=60)
    assert me.status_code == 200 and me.json()["username"] == user, me.text

    # the workspace page offers it beside JupyterLab
    browser = hub.browser_login(user)
    workspace_page = browser.get(f"{hub.url}/services/workspace/workspaces/{ws}", timeout=60).text
    assert f'href="/user/{user}/{ws}/label-studio/"' in workspace_page and 'id="open-label-studio"' in workspace_page

    # a project over the dataset where it is mounted: no copy
    project = s.post(f"{base}/api/projects/", json={"title": "Pets", "label_config": CONFIG}, timeout=60)
    assert project.status_code == 201, project.text
    pid = project.json()["id"]
    storage = s.post(
        f"{base}/api/storages/localfiles/",
        json={"project": pid, "path": "/input0/pets", "use_blob_urls": True, "regex_filter": r".*\.png"},
        timeout=60,
    )
    assert storage.status_code == 201, storage.text
    synced = s.post(f"{base}/api/storages/localfiles/{storage.json()['id']}/sync", timeout=120)
    assert synced.status_code == 200 and synced.json()["last_sync_count"] == 2, synced.text
    tasks = s.get(f"{base}/api/tasks/", params={"project": pid}, timeout=60).json()["tasks"]
    cat = next(t for t in tasks if t["data"]["image"].endswith("cat.png"))
    # the image a task shows is the dataset's file, served from /input0 through the proxy
    assert cat["data"]["image"].startswith(f"/user/{user}/{ws}/label-studio/data/local-files/?d="), cat["data"]
    shown = s.get(hub.url + cat["data"]["image"], timeout=60)
    assert shown.status_code == 200 and shown.content == pictures["pets/cat.png"]

    box = {"x": 10, "y": 20, "width": 30, "height": 40, "rotation": 0, "rectanglelabels": ["cat"]}
    annotation = s.post(
        f"{base}/api/tasks/{cat['id']}/annotations/",
        json={
            "result": [
                {
                    "from_name": "box",
                    "to_name": "image",
                    "type": "rectanglelabels",
                    "original_width": 64,
                    "original_height": 48,
                    "value": box,
                }
            ]
        },
        timeout=60,
    )
    assert annotation.status_code == 201, annotation.text
    for kind in ("JSON", "COCO", "YOLO", "VOC"):
        exported = s.get(f"{base}/api/projects/{pid}/export", params={"exportType": kind}, timeout=120)
        assert exported.status_code == 200 and exported.content, (kind, exported.status_code, exported.text[:300])
    kept = hub.sh(user, ws, "cd ~/label-studio-exports && ls */").split()
    assert sorted(name.rsplit("-", 1)[1] for name in kept) == ["COCO.zip", "JSON.json", "VOC.zip", "YOLO.zip"], kept

    # nobody else reaches it, and it listens on the container's loopback only
    denied = requests.get(f"{base}/projects/", headers={"Authorization": f"token {other}"}, timeout=30)
    assert denied.status_code == 403, denied.status_code
    anonymous = requests.get(f"{base}/api/projects/", timeout=30, allow_redirects=False)
    assert anonymous.status_code in (302, 403) and "Pets" not in anonymous.text
    hub.stop_workspace(user, ws, token)

    # the export, saved with the home, becomes a dataset version in one step
    assert api(hub, "POST", "/datasets", token, json={"name": "pets-labels"}).status_code == 201
    r = api(
        hub,
        "POST",
        "/datasets/lena/pets-labels/versions",
        token,
        json={"from_execution": {"workspace": ws, "number": 1, "path": "label-studio-exports"}},
    )
    assert r.status_code == 201 and r.json()["files"] == 4, r.text
    hub.start_workspace(user, "check", token, datasets=["lena/pets-labels"])
    labels = json.loads(hub.sh(user, "check", "cat /input0/*/*-JSON.json"))
    (task,) = labels
    (result,) = task["annotations"][0]["result"]
    assert task["data"]["image"].endswith("cat.png") and result["value"] == box, task
    hub.stop_workspace(user, "check", token)


def test_label_studio_signs_in_only_what_the_proxy_passed_on(hub: Hub, labelling):
    """Attack tests: inside the container, Label Studio's port is no way in (no secret, a guessed one, a
    session made up); it listens on the loopback only; it holds no hub credential."""
    user, ws = "lars", "labels"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token, image=labelling)
    s = requests.Session()
    s.headers["Authorization"] = f"token {token}"
    first_open(s, f"{hub.url}/user/{user}/{ws}/label-studio/projects/")
    probe = (
        "import json, os, psutil, urllib.request\n"
        "mine = psutil.process_iter(['cmdline'])\n"
        "ls = next(p for p in mine if 'label-studio' in ' '.join(p.info['cmdline'] or []))\n"
        "port = next(c.laddr.port for c in ls.net_connections('tcp') if c.status == 'LISTEN')\n"
        "listening = sorted({c.laddr.ip for c in ls.net_connections('tcp') if c.status == 'LISTEN'})\n"
        "def whoami(headers):\n"
        "    req = urllib.request.Request(f'http://127.0.0.1:{port}/api/current-user/whoami', headers=headers)\n"
        "    try:\n"
        "        return urllib.request.urlopen(req).status\n"
        "    except urllib.error.HTTPError as e:\n"
        "        return e.code\n"
        "print(json.dumps({'listening': listening, 'env': ls.environ().get('JUPYTERHUB_API_TOKEN'),\n"
        "    'bare': whoami({}), 'guessed': whoami({'X-Workspace-Proxy-Secret': 'guess'}),\n"
        "    'empty': whoami({'X-Workspace-Proxy-Secret': ''})}))\n"
    )
    out = json.loads(hub.sh(user, ws, f"python - <<'EOF'\n{probe}EOF").strip().splitlines()[-1])
    assert out["listening"] == ["127.0.0.1"], out
    assert not out["env"], "the hub's token of the server reached Label Studio's environment"
    assert (out["bare"], out["guessed"], out["empty"]) == (401, 401, 401), out
    hub.stop_workspace(user, ws, token)
