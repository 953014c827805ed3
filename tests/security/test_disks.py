"""#28: every disk a student writes is bounded by default. Before, a running home had no limit without a
type's `home_size` (51 GiB written against a 50 GiB quota), the container's `/tmp` and writable layer had
none, and neither had a build: one student filled the host's disk.

Against a real hub, engine, btrfs store and build container."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.integration.hub import Hub
from workspace import i18n
from workspace.db import database
from workspace.images.builds import ImageBuilder

QUOTA = 100 << 20
TYPES = [{"name": "small", "description": "1 CPU, 512 MB", "cpu": 1, "memory": "512M"}]


@pytest.fixture(scope="module")
def hub(start_hub) -> Hub:
    return start_hub(WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES), WORKSPACE_QUOTA_BYTES=str(QUOTA))


def dd(hub: Hub, user: str, ws: str, path: str, megabytes: int) -> str:
    """dd's own words writing `megabytes` to `path` in the workspace, and the size written."""
    return hub.sh(user, ws, f"dd if=/dev/zero of={path} bs=1M count={megabytes} 2>&1; sync; stat -c 'size=%s' {path}")


def size_of(out: str) -> int:
    return int(out.rsplit("size=", 1)[1].split()[0])


def test_a_home_grows_no_further_than_the_quota_and_is_saved(hub: Hub):
    user, other = f"disk{uuid.uuid4().hex[:6]}", f"disko{uuid.uuid4().hex[:6]}"
    token, other_token = hub.user_token(user), hub.user_token(other)
    events = hub.start_workspace(user, "big", token, resource_type="small")
    out = dd(hub, user, "big", "$HOME/fill", 400)
    assert "Disk quota exceeded" in out, out
    assert size_of(out) <= QUOTA + (1 << 20), out
    line = next((e["message"] for e in events if "Home size limit" in e["message"]), "")
    assert "Disk quota exceeded" in line and "storage quota" in line, line
    # another student writes on while this home is full
    hub.start_workspace(other, "lab", other_token, resource_type="small")
    out = dd(hub, other, "lab", "$HOME/data", 50)
    assert "copied" in out and size_of(out) == 50 << 20, out
    hub.stop_workspace(other, "lab", other_token)
    # the full home is still saved whole at stop
    hub.stop_workspace(user, "big", token)
    ex = hub.executions(user, "big")[-1]
    assert ex["state"] == "stopped" and ex["has_output"], ex
    hub.start_workspace(user, "big", token, resource_type="small")
    assert size_of(hub.sh(user, "big", "stat -c 'size=%s' $HOME/fill")) > 90 << 20
    hub.stop_workspace(user, "big", token)


def test_tmp_is_a_sized_tmpfs_and_the_rest_of_the_root_is_read_only(hub: Hub):
    user = f"tmp{uuid.uuid4().hex[:6]}"
    token = hub.user_token(user)
    hub.start_workspace(user, "ws", token, resource_type="small")
    # 512 MB of memory: the scratch tmpfs mounts (1 GB + 256 MB + 16 MB configured) take at most half of it
    # together, as a tmpfs is the container's memory
    for path in ("/tmp/fill", "/var/tmp/fill"):
        out = dd(hub, user, "ws", path, 400)
        assert "No space left on device" in out and size_of(out) <= 210 << 20, out
        hub.sh(user, "ws", f"rm {path}")
    sizes = [
        int(n) for n in hub.sh(user, "ws", "df -B1 --output=size /tmp /var/tmp /run/workspace | tail -n +2").split()
    ]
    assert len(sizes) == 3 and sum(sizes) <= (256 << 20) + 3 * 4096, sizes
    out = hub.sh(user, "ws", "touch /opt/venv/x /etc/x /x /var/x 2>&1; stat -c '%u %a' /run/workspace")
    assert out.count("Read-only file system") == 4, out
    assert out.strip().endswith("1000 700"), out
    # the image's own things still work: the server answered (the start), sshd wrote its files, pip --user
    assert "host_key" in hub.sh(user, "ws", "ls /run/workspace/ssh")
    out = hub.sh(user, "ws", "python3 -m pip install --user --no-index --no-deps /nonexistent 2>&1 | tail -1")
    assert "Read-only" not in out, out
    hub.stop_workspace(user, "ws", token)


def test_a_build_that_writes_forever_is_stopped_with_a_sentence(image, tmp_path):
    """The post-build script writes 1.5 GB (a bounded stand-in for "forever", so that the test, run against a
    tree without the limit, fails on the time limit instead of filling the disk)."""
    builder = ImageBuilder(
        disk="200M", disk_interval=0.5, timeout=90, log_root=str(tmp_path), deployment=f"disk{uuid.uuid4().hex[:6]}"
    )
    db = database(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "secrets" / "workspace.key")
    job = {
        "id": 1,
        "build": 1,
        "owner": "mallory",
        "name": "mallory/filler",
        "base_ref": image,
        "apt": [],
        "pip": "",
        "script": "dd if=/dev/zero of=/var/fill bs=1M count=1500; sleep 300\n",
    }
    result = builder.build(job, db)
    assert not result["ok"], result
    assert i18n.said("en", result["error"]).startswith("The build wrote more than 200M to its disk and was stopped"), (
        result
    )
