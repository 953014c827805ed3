"""Datasets with real containers: made from an execution's output, shared, mounted read-only."""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import re
import subprocess
import tarfile
import time

import requests

from .hub import ADMIN_PASSWORD, Hub


def api(hub: Hub, method: str, path: str, token: str, **kwargs) -> requests.Response:
    return requests.request(
        method,
        f"{hub.url}/services/workspace/api{path}",
        headers={"Authorization": f"token {token}"},
        timeout=120,
        **kwargs,
    )


def btrfs_used(path) -> int:
    out = subprocess.run(["btrfs", "filesystem", "usage", "-b", str(path)], capture_output=True, text=True).stdout
    data = int(re.search(r"^Data,\S+: Size:\d+, Used:(\d+)", out, re.M).group(1))
    return data


def test_datasets_from_outputs_shared_and_mounted_read_only(hub: Hub):
    prof, student, outsider = "prof", "sam", "oli"
    prof_token = hub.user_token(prof)
    student_token, outsider_token = hub.user_token(student), hub.user_token(outsider)

    # the instructor prepares data in a workspace; its output becomes two datasets
    hub.start_workspace(prof, "prep", prof_token)
    hub.sh(
        prof,
        "prep",
        "mkdir -p mnist labels && head -c 30000000 /dev/urandom > mnist/train.bin && echo cat,dog > labels/names.csv",
    )
    hub.stop_workspace(prof, "prep", prof_token)

    for name in ("mnist", "labels"):
        r = api(hub, "POST", "/datasets", prof_token, json={"name": name, "description": f"{name} data"})
        assert r.status_code == 201, r.text
    store = hub.settings.store_dir
    os.sync()
    before = btrfs_used(store)
    r = api(
        hub,
        "POST",
        "/datasets/prof/mnist/versions",
        prof_token,
        json={"from_execution": {"workspace": "prep", "number": 1, "path": "mnist"}},
    )
    assert r.status_code == 201, r.text
    assert r.json()["version"] == 1 and r.json()["bytes"] == 30_000_000 and r.json()["origin"] == "execution"
    r = api(
        hub,
        "POST",
        "/datasets/prof/labels/versions",
        prof_token,
        json={"from_execution": {"workspace": "prep", "number": 1, "path": "labels"}},
    )
    assert r.status_code == 201, r.text
    os.sync()
    grown = btrfs_used(store) - before
    assert grown < 1_000_000, f"a version made from an output took {grown} bytes of new data blocks"

    # not shared yet: the student's spawn is refused with a sentence naming the dataset
    r = hub.spawn(student, "hw", student_token, {"datasets": ["prof/mnist", "prof/labels"]})
    assert r.status_code == 403, r.text
    assert "You cannot use the dataset prof/mnist" in r.json()["message"]
    assert hub.containers(user=student) == []

    # shared with a JupyterHub group the student is in
    assert hub.api("POST", "/groups/cs101", json={"users": [student]}).status_code in (201, 409)
    for name in ("mnist", "labels"):
        r = api(hub, "POST", f"/datasets/prof/{name}/shares", prof_token, json={"group": "cs101"})
        assert r.status_code == 201, r.text
    listing = api(hub, "GET", "/datasets", student_token).json()
    assert [d["ref"] for d in listing["shared"]] == ["prof/labels", "prof/mnist"], listing

    events = hub.start_workspace(student, "hw", student_token, datasets=["prof/mnist", "prof/labels:1"])
    assert "Dataset prof/mnist:1 will be mounted read-only at /input0" in "\n".join(e["message"] for e in events)
    out = hub.sh(student, "hw", "stat -c %s /input0/train.bin; cat /input1/names.csv")
    assert out == "30000000\ncat,dog\n", out
    (container,) = hub.containers(user=student, server="hw")
    code, written = container.exec_run(["bash", "-c", "echo x > /input0/mine.txt"], user="1000")
    assert code != 0 and b"Read-only file system" in written, written
    (ex,) = hub.executions(student, "hw")
    assert ex["datasets"] == [{"mount": "/input0", "ref": "prof/mnist:1"}, {"mount": "/input1", "ref": "prof/labels:1"}]
    file_browser_shows_the_datasets_read_only(hub, student, "hw", student_token)

    # a mounted version cannot be deleted
    r = api(hub, "DELETE", "/datasets/prof/mnist/versions/1", prof_token)
    assert r.status_code == 409 and "mounted by a running workspace" in r.json()["message"], r.text
    hub.stop_workspace(student, "hw", student_token)

    # the spawn form offers the readable datasets, prefilled with those of the last execution
    form = hub.browser_login(student).get(f"{hub.url}/hub/spawn/{student}/hw", timeout=30).content.decode()
    assert 'name="datasets"' in form and 'value="prof/mnist, prof/labels"' in form, form

    # outsiders still cannot
    r = hub.spawn(outsider, "x", outsider_token, {"datasets": ["prof/labels"]})
    assert r.status_code == 403, r.text
    assert api(hub, "GET", "/datasets/prof/labels", outsider_token).status_code == 404
    r = api(hub, "POST", "/datasets/prof/labels/shares", student_token, json={"user": outsider})
    assert r.status_code == 403 and "Only prof can change" in r.json()["message"], r.text


def file_browser_shows_the_datasets_read_only(hub: Hub, user: str, ws: str, token: str) -> None:
    """#32: JupyterLab's file browser (the contents API) lists the mounted datasets beside the home's files,
    reads them, refuses every write there with a sentence, copies from them, and never leaves the mount."""
    contents, auth = f"{hub.url}/user/{user}/{ws}/api/contents", {"Authorization": f"token {token}"}
    top = {c["name"]: c for c in requests.get(contents, headers=auth, timeout=30).json()["content"]}
    assert top["input0"]["type"] == "directory" and top["input0"]["writable"] is False, top
    assert "input1" in top and "input2" not in top, top  # only what is mounted
    inside = requests.get(f"{contents}/input0", headers=auth, timeout=30).json()
    assert [c["name"] for c in inside["content"]] == ["train.bin"], inside
    r = requests.get(f"{contents}/input1/names.csv?content=1&format=text", headers=auth, timeout=30)
    assert r.status_code == 200 and r.json()["content"] == "cat,dog\n", r.text
    for method, path, body in [
        ("PUT", "input0/mine.txt", {"type": "file", "format": "text", "content": "x"}),
        ("DELETE", "input0/train.bin", None),
        ("PATCH", "input1/names.csv", {"path": "names.csv"}),
        ("DELETE", "input1", None),
    ]:
        r = requests.request(method, f"{contents}/{path}", headers=auth, json=body, timeout=30)
        assert r.status_code == 403 and "read-only" in r.json()["message"], (method, path, r.text)
    # attack: never above the mount, whatever the path says
    for path in ("input0/../../etc/passwd", "input0/%2E%2E/%2E%2E/etc/passwd", "input0/..%2F..%2Fetc/passwd"):
        r = requests.get(f"{contents}/{path}?content=1", headers=auth, timeout=30)
        assert r.status_code in (400, 404) and "root:" not in r.text, (path, r.status_code, r.text[:200])
    # a copy into the home is the home's (writable), and is saved with it
    r = requests.post(contents, headers=auth, json={"copy_from": "input1/names.csv"}, timeout=30)
    assert r.status_code == 201 and r.json()["path"] == "names.csv" and r.json()["writable"], r.text
    assert hub.sh(user, ws, "cat ~/names.csv; ls -A ~ | grep -c '^input' || true") == "cat,dog\n0\n"


def test_version_rules(hub: Hub):
    user = "rae"
    token = hub.user_token(user)
    versions_dir = hub.settings.store_dir / "datasets"
    stored_before = set(versions_dir.iterdir()) if versions_dir.exists() else set()
    hub.start_workspace(user, "w", token)
    # 1.2 GB in 10,000 files (sparse: the rule is about sizes), and a link out of the home
    hub.sh(
        user,
        "w",
        "mkdir many && cd many && for i in $(seq 1 10000); do truncate -s 120000 f$i; done; "
        "mkdir ../escape && ln -s /etc/passwd ../escape/pw && echo ok > ../escape/file",
    )
    hub.stop_workspace(user, "w", token)
    assert api(hub, "POST", "/datasets", token, json={"name": "d"}).status_code == 201

    r = api(
        hub,
        "POST",
        "/datasets/rae/d/versions",
        token,
        json={"from_execution": {"workspace": "w", "number": 1, "path": "many"}},
    )
    assert r.status_code == 400, r.text
    msg = r.json()["message"]
    assert "10,000 files averaging 120 kB (1.20 GB in all)" in msg and "HDF5, LMDB, TFRecord" in msg, msg

    r = api(
        hub,
        "POST",
        "/datasets/rae/d/versions",
        token,
        json={"from_execution": {"workspace": "w", "number": 1, "path": "escape"}},
    )
    assert r.status_code == 400 and "pw (a link pointing outside)" in r.json()["message"], r.text
    r = api(
        hub,
        "POST",
        "/datasets/rae/d/versions",
        token,
        json={"from_execution": {"workspace": "w", "number": 1, "path": "../../snapshots"}},
    )
    assert r.status_code == 400, r.text
    r = api(hub, "POST", "/datasets", token, json={"name": "Bad Name"})
    assert r.status_code == 400 and "is not one" in r.json()["message"], r.text
    assert api(hub, "GET", "/datasets/rae/d", token).json()["versions"] == []
    # nothing was left in the store by the refused versions
    assert set(versions_dir.iterdir()) == stored_before


def upload(hub: Hub, token: str, ref: str, filename: str, data: bytes, **extra) -> requests.Response:
    """Create an upload, send it in one PUT, complete it; return the completion's response."""
    r = api(hub, "POST", f"/datasets/{ref}/uploads", token, json={"filename": filename, "size": len(data), **extra})
    assert r.status_code == 201, r.text
    upload_id = r.json()["id"]
    r = api(hub, "PUT", f"/datasets/{ref}/uploads/{upload_id}?offset=0", token, data=data)
    assert r.status_code == 200 and r.json()["offset"] == len(data), r.text
    return api(hub, "POST", f"/datasets/{ref}/uploads/{upload_id}/complete", token, json={})


def begun_put(hub: Hub, path: str, token: str, length: int) -> http.client.HTTPConnection:
    """A PUT of `length` bytes to `path` (under the proxy's root) whose body the caller sends, or not."""
    conn = http.client.HTTPConnection("127.0.0.1", hub.settings.port, timeout=30)
    conn.putrequest("PUT", path)
    conn.putheader("Authorization", f"token {token}")
    conn.putheader("Content-Length", str(length))
    conn.endheaders()
    return conn


def test_resumable_upload_with_checksum(hub: Hub):
    user = "uma"
    token = hub.user_token(user)
    assert api(hub, "POST", "/datasets", token, json={"name": "weights"}).status_code == 201
    payload = os.urandom(40_000_000)
    digest = hashlib.sha256(payload).hexdigest()
    r = api(
        hub,
        "POST",
        "/datasets/uma/weights/uploads",
        token,
        json={"filename": "model.bin", "size": len(payload), "sha256": digest},
    )
    assert r.status_code == 201, r.text
    upload_id = r.json()["id"]
    path = f"/services/workspace/api/datasets/uma/weights/uploads/{upload_id}"

    # the connection drops after 10 MB of a 40 MB chunk
    conn = begun_put(hub, f"{path}?offset=0", token, len(payload))
    conn.send(payload[:10_000_000])
    conn.close()
    offset = -1
    for _ in range(50):  # the server notices the drop and keeps what arrived
        time.sleep(0.2)
        now = api(hub, "GET", f"/datasets/uma/weights/uploads/{upload_id}", token).json()["offset"]
        if now == offset:
            break
        offset = now
    assert 0 < offset <= 10_000_000, offset

    # a chunk from the wrong place is refused, saying where to resume
    r = api(hub, "PUT", f"/datasets/uma/weights/uploads/{upload_id}?offset=0", token, data=payload[:10])
    assert r.status_code == 409 and f"resume from byte {offset:,}" in r.json()["message"], r.text
    r = api(hub, "POST", f"/datasets/uma/weights/uploads/{upload_id}/complete", token, json={})
    assert r.status_code == 409, r.text

    r = api(hub, "PUT", f"/datasets/uma/weights/uploads/{upload_id}?offset={offset}", token, data=payload[offset:])
    assert r.status_code == 200 and r.json()["offset"] == len(payload), r.text
    r = api(hub, "POST", f"/datasets/uma/weights/uploads/{upload_id}/complete", token, json={})
    assert r.status_code == 201, r.text
    assert (r.json()["version"], r.json()["bytes"], r.json()["files"], r.json()["origin"]) == (
        1,
        40_000_000,
        1,
        "upload",
    )

    hub.start_workspace(user, "w", token, datasets=["uma/weights"])
    assert hub.sh(user, "w", "sha256sum /input0/model.bin").split()[0] == digest
    hub.stop_workspace(user, "w", token)

    # a damaged upload is refused and discarded
    r = upload(hub, token, "uma/weights", "other.bin", b"abc", sha256="0" * 64)
    assert r.status_code == 400 and "arrived damaged" in r.json()["message"], r.text


def chunks(hub: Hub, token: str, upload_id: str, payload: bytes, size: int, start: int = 0):
    """una/parts's upload `upload_id`: `payload` from `start` on in chunks of `size`, then completed."""
    for at in range(start, len(payload), size):
        path = f"/datasets/una/parts/uploads/{upload_id}"
        r = api(hub, "PUT", f"{path}?offset={at}", token, data=payload[at : at + size])
        assert r.status_code == 200, r.text
    return api(hub, "POST", f"/datasets/una/parts/uploads/{upload_id}/complete", token, json={})


def test_an_upload_in_chunks_is_checked_by_the_hash_kept_and_takes_one_chunk_at_a_time(hub: Hub):
    """#34: the SHA-256 is kept while the chunks arrive (no second read of the file); a second chunk of the
    same upload while one is being received is refused (409), as two writers would mix their bytes."""
    token = hub.user_token("una")
    assert api(hub, "POST", "/datasets", token, json={"name": "parts"}).status_code == 201
    payload = os.urandom(9_000_000)
    body = {"filename": "parts.bin", "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    r = api(hub, "POST", "/datasets/una/parts/uploads", token, json=body)
    assert r.status_code == 201, r.text
    upload_id = r.json()["id"]
    path = f"/services/workspace/api/datasets/una/parts/uploads/{upload_id}"
    # a first chunk held open half-sent ...
    held = begun_put(hub, f"{path}?offset=0", token, 3_000_000)
    held.send(payload[:1_000_000])
    time.sleep(1)
    # ... and a second chunk of the same upload meanwhile: refused, nothing written by it
    r = api(hub, "PUT", f"/datasets/una/parts/uploads/{upload_id}?offset=0", token, data=b"x" * 3_000_000)
    assert r.status_code == 409 and "Another chunk" in r.json()["message"], r.text
    held.send(payload[1_000_000:3_000_000])
    answer = held.getresponse()
    assert answer.status == 200 and json.loads(answer.read())["offset"] == 3_000_000
    held.close()
    r = chunks(hub, token, upload_id, payload, 3_000_000, start=3_000_000)
    assert r.status_code == 201 and r.json()["bytes"] == len(payload), r.text
    # the same in chunks, declared with another checksum: refused as damaged
    r = api(hub, "POST", "/datasets/una/parts/uploads", token, json={**body, "sha256": "0" * 64})
    r = chunks(hub, token, r.json()["id"], payload, 4_500_000)
    assert r.status_code == 400 and "arrived damaged" in r.json()["message"], r.text


def tar_bytes(entries) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, kind, value in entries:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(value)
                tar.addfile(info, io.BytesIO(value))
            else:
                info.type, info.linkname = tarfile.SYMTYPE, value
                tar.addfile(info)
    return buf.getvalue()


def test_archives_are_unpacked_safely(hub: Hub, tmp_path):
    token = hub.user_token("vic")
    assert api(hub, "POST", "/datasets", token, json={"name": "images"}).status_code == 201
    good = tar_bytes([("train/a.txt", "file", b"a"), ("train/b.txt", "file", b"bb"), ("latest", "link", "train")])
    r = upload(hub, token, "vic/images", "images.tar.gz", good, unpack=True)
    assert r.status_code == 201 and r.json()["files"] == 2 and r.json()["bytes"] == 3, r.text

    store = hub.settings.store_dir
    for name, archive in [
        ("escape.tar.gz", tar_bytes([("../../../escaped.txt", "file", b"x")])),
        ("absolute.tar.gz", tar_bytes([("/tmp/escaped.txt", "file", b"x")])),
        ("link.tar.gz", tar_bytes([("etc", "link", "/etc"), ("up", "link", "../../x")])),
    ]:
        r = upload(hub, token, "vic/images", name, archive, unpack=True)
        assert r.status_code == 400 and "is refused" in r.json()["message"], (name, r.text)
    assert not (store.parent / "escaped.txt").exists() and not os.path.exists("/tmp/escaped.txt")
    versions = api(hub, "GET", "/datasets/vic/images", token).json()["versions"]
    assert [v["version"] for v in versions] == [1]
    assert not list((store / "uploads").iterdir()), "refused uploads are discarded"


def test_admins_import_host_directories(hub: Hub, tmp_path):
    source = tmp_path / "shared-data"
    (source / "sub").mkdir(parents=True)
    (source / "sub/x.csv").write_text("1,2\n")
    admin = hub.user_token(hub.settings.admin_user, password=ADMIN_PASSWORD)
    student = hub.user_token("yan")
    assert api(hub, "POST", "/datasets", admin, json={"name": "ref", "visibility": "public"}).status_code == 201
    assert api(hub, "POST", "/datasets", student, json={"name": "mine"}).status_code == 201
    r = api(hub, "POST", "/datasets/yan/mine/versions", student, json={"from_path": str(source)})
    assert r.status_code == 403 and "Only administrators" in r.json()["message"], r.text
    owner = hub.settings.admin_user
    r = api(hub, "POST", f"/datasets/{owner}/ref/versions", admin, json={"from_path": str(source)})
    assert r.status_code == 201 and r.json()["origin"] == "host" and r.json()["files"] == 1, r.text
    r = api(hub, "POST", f"/datasets/{owner}/ref/versions", admin, json={"from_path": str(tmp_path / "none")})
    assert r.status_code == 400 and "does not exist" in r.json()["message"], r.text
    listing = api(hub, "GET", "/datasets", student).json()
    assert f"{owner}/ref" in [d["ref"] for d in listing["public"]]
