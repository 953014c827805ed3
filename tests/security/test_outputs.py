"""The hostile student against outputs' files (#17): paths that climb out, links of every shape, a FIFO and
device nodes in the output, a directory of 100,000 entries, absurd paging, names that are markup, and
another course's instructor. Every attack is a clear 4xx or is contained; no byte of /etc, of the host's
disk or of another user's output comes back."""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
import time
import zipfile

import pytest
import requests

from tests.integration.hub import Hub

PASSWD = b"root:x:0:0"


@pytest.fixture(scope="module")
def hub(start_hub) -> Hub:
    return start_hub(
        WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}, "cs102": {"instructors": ["ta"]}})
    )


def get(hub: Hub, token: str, url: str, /, **params) -> requests.Response:
    """A GET of the service's `path` as written (%2f, %2e and %00 reach the service encoded)."""
    return requests.get(
        f"{hub.url}/services/workspace{url}",
        headers={"Authorization": f"token {token}"},
        params=params,
        timeout=120,
        allow_redirects=False,
    )


@pytest.fixture(scope="module")
def hostile(hub: Hub):
    """eve's output: link chains, links to /etc and /, a FIFO, /dev/zero's and the host disk's device
    numbers, 100,000 files in one directory, names that are markup."""
    token = hub.user_token("eve")
    hub.start_workspace("eve", "h", token)
    hub.sh(
        "eve",
        "h",
        "cd ~ && mkdir -p work && echo mine > work/r.txt && ln -s . t && ln -s t/.. L && ln -s L/.. u "
        "&& ln -s / rootfs && ln -s /etc etc-link && ln -s /etc/passwd work/passwd && ln -s ../../../.. work/up "
        "&& echo x > '<img src=x onerror=alert(1)>.txt' && mkdir big && head -c 64000000 /dev/urandom > big/blob "
        "&& python3 -c \"import os; os.mkdir('many'); [open(f'many/f{i:06d}', 'w').close() for i in range(100000)]\"",
    )
    home = hub.live_home("eve", "h")
    os.mkfifo(home / "work/pipe")
    os.mknod(home / "work/zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero: endless if ever read
    disk = os.stat("/").st_dev  # the host's root filesystem's device: its bytes if ever read
    os.mknod(home / "work/disk", stat.S_IFBLK | 0o666, os.makedev(os.major(disk), os.minor(disk)))
    hub.stop_workspace("eve", "h", token)
    return token


FILES = "/api/workspaces/h/executions/1/files"


def test_paths_that_climb_out_are_refused(hub: Hub, hostile):
    token = hostile
    for path in (
        f"{FILES}/..%2f..%2f..%2f..%2fetc%2fpasswd",
        f"{FILES}/work/..%2f..%2f..",
        f"{FILES}/%2e%2e/%2e%2e/etc/passwd",
        f"{FILES}/work/%2E%2E/%2E%2E",
        f"{FILES}//etc/passwd",
        f"{FILES}/%2fetc%2fpasswd",
        f"{FILES}/work/r.txt%00.png",
        f"{FILES}/%00",
        f"{FILES}/u/snapshots",
        f"{FILES}/u",
        f"{FILES}/L/work",
        f"{FILES}/t/work/r.txt",
        f"{FILES}/rootfs/etc/passwd",
        f"{FILES}/etc-link/passwd",
        f"{FILES}/work/passwd",
        f"{FILES}/work/up/etc/passwd",
        "/workspaces/h/executions/1/files/..%2f..%2f..%2fetc%2fpasswd",  # the page
        "/workspaces/h/executions/1/files/etc-link/passwd",
        "/api/workspaces/..%2f..%2f/executions/1/files",
        "/api/workspaces/h/executions/1%2f..%2f2/files",
        "/api/workspaces/h/executions/99999999999999999999999/files",
    ):
        for params in ({}, {"archive": "tar.gz"}, {"inline": "1"}):
            r = get(hub, token, path, **params)
            assert 400 <= r.status_code < 500, (path, params, r.status_code, r.text[:200])
            assert PASSWD not in r.content, (path, params)
    # the links themselves: listed, and as the path asked for, never followed
    r = get(hub, token, FILES)
    entries = {e["name"]: e for e in r.json()["entries"]}
    assert {n: entries[n].get("target") for n in ("t", "L", "u", "rootfs", "etc-link")} == {
        "t": ".",
        "L": "t/..",
        "u": "L/..",
        "rootfs": "/",
        "etc-link": "/etc",
    }
    for link in ("etc-link", "rootfs", "u", "work/passwd"):
        for params in ({}, {"archive": "zip"}):
            r = get(hub, token, f"{FILES}/{link}", **params)
            assert r.status_code == 400 and "link" in r.json()["message"], (link, r.text)


def test_archives_hold_links_as_links_and_no_device_or_fifo(hub: Hub, hostile):
    token = hostile
    started = time.monotonic()
    r = get(hub, token, f"{FILES}/work", archive="tar.gz")
    assert r.status_code == 200 and time.monotonic() - started < 60
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        kinds = {m.name: m for m in tar.getmembers()}
        assert kinds["work/passwd"].issym() and kinds["work/passwd"].linkname == "/etc/passwd"
        assert kinds["work/up"].issym() and tar.extractfile("work/r.txt").read() == b"mine\n"
    assert set(kinds) == {"work", "work/r.txt", "work/passwd", "work/up"}, set(kinds)  # no pipe, zero, disk
    assert len(r.content) < 10_000, len(r.content)  # not a byte of /dev/zero or the disk
    r = get(hub, token, f"{FILES}/work", archive="zip")
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        assert z.namelist() == ["work/", "work/r.txt"]
        comment = z.comment.decode()
    for name in ("work/passwd", "work/up", "work/pipe", "work/zero", "work/disk"):
        assert name in comment, (name, comment)
    for node, kind in (("pipe", "fifo"), ("zero", "character device"), ("disk", "block device")):
        started = time.monotonic()
        r = get(hub, token, f"{FILES}/work/{node}")
        assert r.status_code == 400 and f"is a {kind}" in r.json()["message"], r.text
        assert time.monotonic() - started < 10  # never opened: a FIFO would hang, /dev/zero never end
    listing = {e["name"]: e["type"] for e in get(hub, token, f"{FILES}/work").json()["entries"]}
    assert listing == {
        "r.txt": "file",
        "passwd": "link",
        "up": "link",
        "pipe": "fifo",
        "zero": "character device",
        "disk": "block device",
    }


def test_the_whole_hostile_output_downloads_without_leaving_it(hub: Hub, hostile):
    r = get(hub, hostile, FILES, archive="tar.gz")
    assert r.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        members = tar.getmembers()
    regular = [m for m in members if m.isreg()]
    assert sum(m.name.startswith("h-1/many/") for m in regular) == 100_000
    assert {m.name for m in members if m.issym()} >= {"h-1/t", "h-1/L", "h-1/u", "h-1/rootfs", "h-1/etc-link"}
    assert not any(m.name.startswith(("h-1/rootfs/", "h-1/etc-link/", "h-1/u/", "h-1/t/")) for m in members)
    assert not any(m.ischr() or m.isblk() or m.isfifo() for m in members)
    # r.txt, the markup-named file, big/blob; the 100,000 are empty
    assert sum(m.size for m in regular if not m.name.startswith("h-1/big/")) < 100


def test_a_directory_of_100k_entries_is_paged_and_absurd_paging_is_refused(hub: Hub, hostile):
    token = hostile
    seen, offset, pages = [], 0, 0
    started = time.monotonic()
    while offset is not None:
        page = get(hub, token, f"{FILES}/many", offset=str(offset), limit="1000").json()
        assert page["total"] == 100_000 and len(page["entries"]) <= 1000
        seen += [e["name"] for e in page["entries"]]
        offset, pages = page["next_offset"], pages + 1
    assert seen == [f"f{i:06d}" for i in range(100_000)] and pages == 100
    assert time.monotonic() - started < 300
    r = get(hub, token, f"{FILES}/many", offset="1000000000", limit="1000")
    assert r.status_code == 200 and r.json()["entries"] == [] and r.json()["next_offset"] is None
    for params in (
        {"offset": "9" * 5000},
        {"offset": "1" + "0" * 30},
        {"offset": "-5"},
        {"limit": "0"},
        {"limit": "1000001"},
        {"limit": "NaN"},
        {"offset": "0x10"},
    ):
        r = get(hub, token, f"{FILES}/many", **params)
        assert r.status_code == 400 and "must be a whole number" in r.json()["message"], (params, r.text[:200])


def test_names_are_shown_as_text_on_the_page(hub: Hub, hostile):
    browser = hub.browser_login("eve")
    r = browser.get(f"{hub.url}/services/workspace/workspaces/h/executions/1/files", timeout=60)
    assert r.status_code == 200, r.text[:300]
    assert "<img src=x onerror" not in r.text and "&lt;img src=x onerror=alert(1)&gt;.txt" in r.text
    r = browser.get(f"{hub.url}/services/workspace/workspaces/h/executions/1/files/etc-link", timeout=60)
    assert r.status_code == 200 and "A link to <code>/etc</code>" in r.text and PASSWD.decode() not in r.text
    r = browser.get(f"{hub.url}/services/workspace/workspaces/h/executions/1/files/etc-link/passwd", timeout=60)
    assert r.status_code == 400 and "leads through a link" in r.text and PASSWD.decode() not in r.text


def test_other_users_and_other_courses_get_nothing(hub: Hub, hostile):
    prof, ta = hub.user_token("prof"), hub.user_token("ta")
    r = hub.service_call("PUT", "/courses/cs101", prof, json={"students": ["eve"]})
    assert r.status_code == 200, r.text
    mallory = hub.user_token("mallory")
    for token, user in ((mallory, "eve"), (ta, "eve"), (mallory, "../eve"), (hostile, "prof")):
        r = get(hub, token, f"{FILES}/work/r.txt", user=user)
        assert r.status_code in (403, 404) and b"mine" not in r.content, (user, r.text)
    # eve's instructor reads it; the other course's instructor and a student cannot collect cs101
    assert get(hub, prof, f"{FILES}/work/r.txt", user="eve").content == b"mine\n"
    for token in (ta, hostile, mallory):
        r = get(hub, token, "/api/courses/cs101/collect", path="work")
        assert r.status_code == 403, r.text
    # (a NUL in a query argument is a space to tornado, stripped: "work\x00" is "work")
    for params in ({"path": "work/../.."}, {"path": "/etc"}, {"path": "../../etc"}, {"workspace": "../h"}):
        r = get(hub, prof, "/api/courses/cs101/collect", **params)
        assert r.status_code == 400, (params, r.text)
    # a link as the path to collect: noted, not followed
    r = get(hub, prof, "/api/courses/cs101/collect", path="etc-link", workspace="h")
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        (row,) = json.loads(tar.extractfile("cs101-etc-link/manifest.json").read())
        assert [m.name for m in tar.getmembers()] == ["cs101-etc-link/manifest.csv", "cs101-etc-link/manifest.json"]
    assert row["status"] == "missing" and "is a link" in row["reason"] and PASSWD not in r.content


def test_stalled_downloads_are_bounded_per_user(hub: Hub, hostile):
    """A student who opens archive downloads and reads none: at most four at once, each holding its
    bounded queue; closing them frees their places."""
    token = hostile
    url = f"{hub.url}/services/workspace{FILES}/big"
    held = []
    try:
        for _ in range(4):
            r = requests.get(url, params={"archive": "zip"}, headers={"Authorization": f"token {token}"}, stream=True)
            assert r.status_code == 200, r.text[:200]
            held.append(r)
        r = get(hub, token, f"{FILES}/work", archive="tar.gz")
        assert r.status_code == 429 and "4 archive downloads under way" in r.json()["message"], r.text[:200]
        assert get(hub, token, f"{FILES}/work/r.txt").content == b"mine\n"  # files and listings still work
    finally:
        for r in held:
            r.close()
    deadline = time.monotonic() + 60
    while get(hub, token, f"{FILES}/work", archive="tar.gz").status_code == 429:
        assert time.monotonic() < deadline, "closed downloads did not free their places"
        time.sleep(0.5)
