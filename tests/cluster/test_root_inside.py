"""Root inside a workspace, nothing outside (#32): a root-allowed type on the user-namespaced node.

node4 (conftest.USERNS_NODE) is an engine started with `userns-remap`
(workspace/setup/userns.py): a container's uid u is the host's offset + u. A
type with `root` runs there only; its workspace's user (uid 1000, as in every
workspace) gets sudo. The student's terminal is played by `docker exec` as uid
1000, and every attack goes through `sudo`, as a student's would. Packages come
from a Debian mirror of the test's own on its stand-in internet (a public
address in a namespace on the cluster's bridge, conftest.host_on_bridge):
iproute2 and what it depends on, downloaded by this machine's apt.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.cluster.conftest import USERNS_NODE, host_on_bridge, running_swarm_hub
from tests.cluster.test_swarm_workspaces import container_of, latest, overlay_address
from tests.unit.test_ownership import owners
from workspace.db import Database
from workspace.executions import find_workspace
from workspace.settings import Settings
from workspace.setup import userns
from workspace.setup.cluster import Cluster

TYPES = [{"name": "cpu"}, {"name": "rooted", "description": "root inside (sudo)", "root": True}]
HOME = "/openbayes/home"


@pytest.fixture(scope="module")
def root_hub(cluster: Cluster, tmp_path_factory):
    with running_swarm_hub(
        cluster, tmp_path_factory.mktemp("root-hub"), WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES)
    ) as hub:
        yield hub


def apt_repository(cache: Path, out: Path, package: str = "iproute2") -> None:
    """A flat Debian repository in `out` (`deb [trusted=yes] URL ./`) of `package` and everything it depends
    on, as this machine's apt downloads them (kept in `cache` for the next run)."""
    cache.mkdir(parents=True, exist_ok=True)
    if not list(cache.glob(f"{package}_*.deb")):
        listing = subprocess.run(
            ["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts"]
            + ["--no-breaks", "--no-replaces", "--no-enhances", package],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        names = sorted({line for line in listing.splitlines() if line and not line.startswith((" ", "<"))})
        got = subprocess.run(["apt-get", "download", *names], cwd=cache, capture_output=True, text=True)
        if got.returncode != 0:  # lists older than the mirror's files: once more after an update
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=True)
            subprocess.run(["apt-get", "download", *names], cwd=cache, capture_output=True, text=True, check=True)
    entries = []
    for deb in sorted(cache.glob("*.deb")):
        shutil.copyfile(deb, out / deb.name)
        control = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True).stdout
        data = deb.read_bytes()
        sha256 = hashlib.sha256(data).hexdigest()
        entries.append(f"{control.rstrip()}\nFilename: ./{deb.name}\nSize: {len(data)}\nSHA256: {sha256}\n")
    (out / "Packages").write_text("\n".join(entries))


@pytest.fixture(scope="module")
def mirror(cluster: Cluster, tmp_path_factory):
    out = tmp_path_factory.mktemp("mirror")
    apt_repository(Settings.from_env().path("cache") / "apt-iproute2", out)
    address = f"11.249.{random.randrange(1, 250)}.20"  # the stand-in internet (tests/security/test_egress.py)
    with host_on_bridge(cluster, [address], out, port=8080):
        yield f"http://{address}:8080"


def latest_snapshot(hub, user: str) -> str:
    with Database(hub.settings.db_url, migrate=False, key_file=hub.settings.secret_key_file).session() as s:
        return find_workspace(s, user, "w").latest.snapshot.key


def run(container, script: str, user: str = "1000") -> tuple[int, str]:
    code, out = container.exec_run(["bash", "-c", script], user=user, environment={"HOME": HOME})
    return code, out.decode(errors="replace")


def ok(container, script: str) -> str:
    code, out = run(container, script)
    assert code == 0, f"exit {code}: {out}"
    return out


def refused(container, script: str) -> str:
    """What a refused command said (the test fails if it succeeded)."""
    code, out = run(container, script)
    assert code != 0, f"{script!r} succeeded: {out}"
    return out


# an errno from a raw system call: 1 is EPERM
SYSCALL = (
    "import ctypes, os, struct, sys; libc = ctypes.CDLL(None, use_errno=True); "
    "args = {'init_module': (175, None, 0, b''), "
    "'open_by_handle_at': (304, os.open('/', os.O_RDONLY), "
    "ctypes.create_string_buffer(struct.pack('Ii8s', 8, 1, struct.pack('II', 2, 0))), 0)}[sys.argv[1]]; "
    "print(libc.syscall(*args), ctypes.get_errno())"
)


def test_root_inside_installs_packages_and_reaches_nothing_outside(cluster: Cluster, root_hub, mirror):
    hub, user, other = root_hub, "rootada", "rootbob"
    token = hub.user_token(user)
    hub.start_workspace(user, "w", token, resource_type="rooted")
    node, container = container_of(cluster, hub, user, "w")
    assert node.name == USERNS_NODE
    offset = userns.remap_offset()
    # the student is uid 1000 with sudo; root there is the host's `offset`, an account that owns nothing
    assert ok(container, "id -u").strip() == "1000"
    assert ok(container, "sudo -n id -u").strip() == "0"
    assert ok(container, "cat /proc/self/uid_map").split() == ["0", str(offset), "65536"]
    init = psutil.Process(container.attrs["State"]["Pid"])
    uids = {p.uids().real for p in [init, *init.children(recursive=True)]}
    assert uids and uids <= {offset, offset + 1000}, uids

    # apt-get install, from the site's mirror
    installed = ok(
        container,
        f"set -e; echo 'deb [trusted=yes] {mirror}/ ./' | sudo tee /etc/apt/sources.list >/dev/null; "
        "sudo rm -f /etc/apt/sources.list.d/*; sudo apt-get update -q; "
        "sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iproute2; ip -o addr show",
    )
    assert "eth0" in installed and "inet " in installed, installed

    # as root there: no way to the host, the kernel or another tenant
    assert "not permitted" in refused(container, "sudo ip addr add 10.99.0.5/24 dev eth0").lower()
    refused(container, "sudo mount -t tmpfs none /mnt")
    refused(container, "sudo mknod /tmp/disk b 8 0")
    refused(container, "sudo hostname someone-else")
    refused(container, "echo '|/tmp/x' | sudo tee /proc/sys/kernel/core_pattern")
    refused(container, "echo b | sudo tee /proc/sysrq-trigger")
    refused(container, "echo 1 | sudo tee /sys/fs/cgroup/cpu/cpu.shares")
    for call in ("init_module", "open_by_handle_at"):  # loading a module; reading a host file by its handle
        said = ok(container, f'sudo python3 -c "{SYSCALL}" {call}').split()
        assert said == ["-1", "1"], (call, said)
    # what it writes outside the home fills the node's own data root (userns.DATA_SIZE), never the host's disk
    said = refused(container, "sudo fallocate -l 20G /filler; s=$?; sudo rm -f /filler; exit $s")
    assert "no space left" in said.lower(), said
    # another owner's workspace, on another node: not reached, with root
    hub.start_workspace(other, "w", hub.user_token(other), resource_type="cpu")
    address = overlay_address(cluster, hub, other, "w")
    probe = f"import socket; socket.create_connection(({address!r}, 8888), timeout=3)"
    refused(container, f'sudo python3 -c "{probe}"')
    _, bob = container_of(cluster, hub, other, "w")
    assert "sudo" in refused(bob, "sudo -n true")  # an ordinary type: no rule, no root
    hub.stop_workspace(other, "w")

    # root's files in the home: the remapped owner while it runs, the owner's (1000) in the saved output
    ok(
        container,
        "set -e; sudo touch ~/by-root; sudo mkdir ~/root-dir; sudo install -m 4755 /bin/true ~/suid; touch ~/mine",
    )
    (live,) = [m["Source"] for m in container.attrs["Mounts"] if m["Destination"] == HOME]
    assert owners(live) == {(offset + 1000, offset + 1000), (offset, offset)}
    hub.stop_workspace(user, "w")
    first = latest(hub, user, "w")
    assert (first["state"], first["output_node"]) == ("stopped", USERNS_NODE), first
    saved = node.store / "snapshots" / latest_snapshot(hub, user)
    assert owners(saved) == {(1000, 1000)}
    assert oct((saved / "suid").stat().st_mode & 0o7777) == "0o755"

    # continued as root-allowed: the workspace's user owns them; as an ordinary type elsewhere, the same
    hub.start_workspace(user, "w", token, resource_type="rooted")
    _, container = container_of(cluster, hub, user, "w")
    assert ok(container, "echo more >> ~/by-root && stat -c %u:%g ~/by-root ~/root-dir").split() == ["1000:1000"] * 2
    hub.stop_workspace(user, "w")
    hub.start_workspace(user, "w", token, resource_type="cpu")
    node, container = container_of(cluster, hub, user, "w")
    assert node.name != USERNS_NODE
    assert ok(container, "echo again >> ~/by-root && rmdir ~/root-dir && cat ~/by-root").split() == ["more", "again"]
    refused(container, "sudo -n true")
    hub.stop_workspace(user, "w")
