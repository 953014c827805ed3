"""The data directory is the hub's alone (#28): another account of the host reads no home, key or log.

Found on a fresh `make up`: `data/store.btrfs` (every home) and `data/workspace.sqlite` with its -wal and
-shm (every owner's SSH private key, the workspaces' host keys, the webhook secrets, in plain text) were
0644, and so were the execution logs; with a key read from the database, the `nobody` account logged
into a student's container. Here a deployment laid out as `make up` lays it out (a btrfs image mounted
at data/store), left as open as that, is started, used (a workspace started and stopped with a save, its
owner's SSH key pair made, a webhook set, a task's log kept), then walked; and `nobody` tries to read it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.integration import conftest as integration
from tests.integration.hub import Hub
from tests.integration.test_tasks import run, wait_ended
from workspace.store.homes import mount_loop_btrfs

NOBODY = 65534
# the store's directories of users' trees: each tree keeps the modes its owner (uid 1000 in a container)
# gave it, which its container needs (a home is mounted as it is); these directories above them are
# root's and 0700, so no host account reaches a tree through them (checked below)
USER_TREES = ("live", "snapshots", "datasets", "uploads")


@pytest.fixture(scope="module")
def deployment(image):
    if os.geteuid() != 0 or shutil.which("mkfs.btrfs") is None or shutil.which("setpriv") is None:
        pytest.skip("a btrfs home store and another account need root, btrfs-progs and setpriv")
    # not under pytest's own temporary directory, which is 0700: the parents must let `nobody` through,
    # or the attack below would fail for a reason that is not the hub's
    parent = Path(tempfile.mkdtemp(prefix="wsdata-", dir="/tmp"))
    parent.chmod(0o755)
    data = parent / "data"
    data.mkdir(mode=0o755)
    # as `make up` made it before #28: an image and a store anyone reads, a log anyone reads
    mount_loop_btrfs(data / "store.btrfs", data / "store", size="4G")
    (data / "store.btrfs").chmod(0o644)
    (data / "store").chmod(0o755)
    (data / "logs").mkdir(mode=0o755)
    (data / "logs" / "old.log").write_text("a log of an older deployment\n")
    (data / "logs" / "old.log").chmod(0o644)
    (parent / "canary").write_text("readable\n")
    (parent / "canary").chmod(0o644)
    hub = Hub(data, store_dir=data / "store").start()
    integration._running_hubs.append(hub)
    yield hub
    hub.stop()
    integration._running_hubs.remove(hub)
    subprocess.run(["umount", "-l", str(data / "store")], check=False)
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture(scope="module")
def workload(deployment: Hub) -> dict:
    """What a day of use leaves in data/: a save, an owner's key pair and host key, a webhook, a task's log."""
    hub = deployment
    token = hub.user_token("ada")
    hub.start_workspace("ada", "thesis", token)
    private_key = hub.sh("ada", "thesis", "cat /run/workspace/ssh/id_workspace; echo secret-work > notes.txt")
    assert "PRIVATE KEY" in private_key
    hub.stop_workspace("ada", "thesis", token)
    r = hub.service_call("PUT", "/webhook", token, json={"url": "https://example.org/hooks/workspace"})
    assert r.status_code == 200, r.text
    task = run(hub, token, "train", "echo a-line-of-the-task-log")
    assert wait_ended(hub, "ada", "train", task["number"])["exit_code"] == 0
    deadline = time.monotonic() + 30
    while not list((hub.data_dir / "execution-logs").glob("*.log")):
        assert time.monotonic() < deadline, "the task's log was not kept"
        time.sleep(0.3)
    return {"private_key": private_key, "webhook_secret": r.json()["secret"]}


def open_to_others(data: Path) -> list[str]:
    """Every path under `data` whose mode lets another account in (group or other bits), with its mode."""
    found = []

    def check(path: Path) -> os.stat_result:
        st = path.lstat()
        if stat.S_IMODE(st.st_mode) & 0o077 and not stat.S_ISLNK(st.st_mode):
            found.append(f"{oct(stat.S_IMODE(st.st_mode))} {path.relative_to(data.parent)}")
        return st

    for here, dirs, files in os.walk(data):
        here = Path(here)
        if here == data / "store":
            for sub in USER_TREES:
                if sub in dirs:
                    st = check(here / sub)
                    assert st.st_uid == 0, f"{here / sub} is not root's"
            dirs[:] = [d for d in dirs if d not in USER_TREES]
        for name in dirs + files:
            check(here / name)
    check(data)
    return found


def test_after_a_workload_nothing_in_the_data_directory_is_open_to_another_account(deployment, workload):
    assert (deployment.data_dir / "execution-logs").is_dir() and (deployment.data_dir / "workspace.sqlite").is_file()
    assert open_to_others(deployment.data_dir) == []


def test_the_database_holds_no_private_key_or_webhook_secret_in_plain_text(deployment, workload):
    body = [line for line in workload["private_key"].splitlines() if line and "PRIVATE KEY" not in line]
    assert body, workload["private_key"]
    stored = b"".join(p.read_bytes() for p in deployment.data_dir.glob("workspace.sqlite*"))
    assert stored, "no database file"
    for line in body:
        assert line.encode() not in stored, "a line of the owner's private key is in the database"
    assert workload["webhook_secret"].encode() not in stored, "the webhook secret is in the database"
    key_file = deployment.settings.secret_key_file
    assert key_file.is_file() and stat.S_IMODE(key_file.stat().st_mode) == 0o600


def as_nobody(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *command],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_another_account_reads_neither_the_store_image_nor_the_database(deployment, workload):
    data = deployment.data_dir
    canary = as_nobody("cat", str(data.parent / "canary"))
    assert canary.returncode == 0, f"nobody cannot run or reach the parent at all: {canary.stderr}"
    for target in (
        data / "store.btrfs",
        data / "workspace.sqlite",
        data / "workspace.sqlite-wal",
        data / "jupyterhub.sqlite",
        data / "logs" / "jupyterhub.log",
        data / "logs" / "old.log",
        deployment.settings.secret_key_file,
    ):
        r = as_nobody("head", "-c", "16", str(target))
        assert r.returncode != 0 and "Permission denied" in r.stderr, f"nobody read {target}: {r.stdout!r}"
    r = as_nobody("find", str(data), "-name", "notes.txt")
    assert "notes.txt" not in r.stdout, "nobody found a student's file in the store"
