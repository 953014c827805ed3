"""A Docker Swarm of several nodes on this one machine: `make cluster-up`, `make cluster-down`.

    python -m workspace.setup.cluster up [--nodes 3] [--gpus node2=0,1 --gpus node3=0,1,2,3] [--hub ADDR:PORT]
                                         [--userns node4]
    python -m workspace.setup.cluster egress --hub ADDR:PORT [--allowed DEST ...]
    python -m workspace.setup.cluster down [--purge]
    python -m workspace.setup.cluster status

Every node is its own `dockerd` (with its own containerd, data root, exec
root, socket, /etc/docker and hostname) in its own network, UTS and mount
namespace, on the bridge `swbr0` (10.250.0.1/24; node i is 10.250.0.1i);
node1 is the swarm's manager, the others join as workers. Each node has a
home store of its own (a loop-mounted btrfs image), so a test notices data
on the wrong node. Images are copied into the nodes by `docker save | docker
load` (no registry). The GPU IDs given per node become node labels
(`workspace.gpus`), the inventory admission places GPU starts by. A node
named by `--userns` runs its containers in a user namespace (workspace/setup/
userns.py, label `workspace.userns=remap`): root-allowed types run there only.

The pitfalls this handles were found by the recipe in
../shared/reference/swarm-netns (measured there: 3 nodes in 1.6 s without the
image copy): the host drops bridge-to-bridge FORWARD; `ip netns exec` hides
the cgroup v1 mounts (remounted in the node); one engine ID for all nodes
unless each has its own /etc/docker; DNS times out in the nodes; host mounts
must propagate into the nodes (the cluster directory is made rshared first);
no IPVS (services use endpoint mode dnsrr and host-mode ports).

Each node gets the egress rules of a swarm node (workspace/egress.py, as
`python -m workspace.egress node` makes them on a real one) in its network
namespace, once the hub's address is known (`egress --hub`, or `up --hub`);
it is recorded, and every later `up` (a node brought back) makes them again.

Everything it makes is recorded under the cluster directory
(`<data dir>/cluster`), and `down` removes only that.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import docker

from workspace import egress
from workspace.settings import Settings
from workspace.setup import userns
from workspace.setup.steps import SetupError, fail, say, step
from workspace.store import homes

PREFIX = "cluster"
BRIDGE = "swbr0"
NET = "10.250.0"
FORWARD_RULE = [
    "FORWARD",
    "-i",
    BRIDGE,
    "-o",
    BRIDGE,
    "-j",
    "ACCEPT",
    "-m",
    "comment",
    "--comment",
    "workspace-cluster",
]
MAX_NODES = 9  # node i is 10.250.0.1i
AGENT_PORT = 8765  # each node's store agent, on the node's address

# Runs inside a node's mount namespace (after `ip netns exec`), before its dockerd.
NODE_INIT = """\
# 1) `ip netns exec` mounted a /sys of the netns, hiding the host's cgroup v1
#    mounts (dockerd: "Devices cgroup isn't mounted"): mount them again.
if ! grep -q ' /sys/fs/cgroup ' /proc/self/mounts; then
  mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
  while read -r src mp fstype opts _; do
    case "$fstype" in cgroup|cgroup2) mkdir -p "$mp"; mount -t "$fstype" -o "$opts" "$src" "$mp" ;; esac
  done < /proc/1/mounts
fi
# 2) an /etc/docker per node: dockerd keeps its engine ID there
mkdir -p "$NODE_DIR/etc-docker"
mount --bind "$NODE_DIR/etc-docker" /etc/docker
# 3) the host's nameserver is unreachable from a node (5 s per lookup): point at
#    the bridge, where nothing listens on :53, for an instant refusal
echo "nameserver {net}.1" > "$NODE_DIR/resolv.conf"
mount --bind "$NODE_DIR/resolv.conf" /etc/resolv.conf
"""


@dataclass(frozen=True)
class Node:
    index: int
    dir: Path

    @property
    def name(self) -> str:
        return f"node{self.index}"

    @property
    def address(self) -> str:
        return f"{NET}.1{self.index}"

    @property
    def socket(self) -> str:
        return f"unix://{self.dir / 'docker.sock'}"

    @property
    def store(self) -> Path:
        """This node's home store (a btrfs image of its own)."""
        return self.dir / "store"

    @property
    def agent_url(self) -> str:
        """Its store agent (workspace/store/agent.py), which the hub and the other agents call."""
        return f"http://{self.address}:{AGENT_PORT}"

    def agent_pid(self) -> int | None:
        return _running(self.dir / "agent.pid")

    def client(self, timeout: int = 30) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.socket, timeout=timeout)

    def pid(self) -> int | None:
        """Its engine's process, if it runs."""
        return _running(self.dir / "dockerd.pid")


def _running(pid_file: Path) -> int | None:
    """The process a pid file names, if it runs."""
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def run(*cmd: str, check: bool = True, log: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), capture_output=True, text=True)
    if log is not None:
        with open(log, "a") as f:
            f.write(f"$ {shlex.join(cmd)}\n{proc.stdout}{proc.stderr}")
    if check and proc.returncode != 0:
        raise SetupError(f"`{shlex.join(cmd)}` failed: {(proc.stderr or proc.stdout).strip()[-300:]}", log)
    return proc


class Cluster:
    """The nodes under `root` (`<data dir>/cluster`)."""

    def __init__(self, root: Path, nodes: int | None = None, cache: Path | None = None):
        self.root = root
        self.cache = cache or root  # where image tars are kept for the next cluster (by image ID)
        self.log = root / "cluster.log"
        count = nodes if nodes is not None else self.recorded().get("nodes", 0)
        self.nodes = [Node(i, root / f"node{i}") for i in range(1, count + 1)]
        self.userns = set(self.recorded().get("userns", []))  # the nodes whose engine remaps users
        self.id_offset = 0  # their remapped root's host uid (`up` asks it)

    # -- what was made ----------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.root / "cluster.json"

    def recorded(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def record(self, **values) -> None:
        state = self.recorded() | values
        self.state_file.write_text(json.dumps(state, indent=1))

    @property
    def manager(self) -> Node:
        return self.nodes[0]

    # -- up ---------------------------------------------------------------------

    def up(
        self,
        image: str,
        gpus: dict[str, list[str]],
        store_size: str = "20G",
        hub=None,
        allowed=None,
        user_namespaced: list[str] | None = None,
    ) -> None:
        """`hub` (address, port), `allowed`: the nodes' egress rules (else those recorded, if any);
        `user_namespaced`: the nodes whose engine remaps users (else those recorded)."""
        if not 1 <= len(self.nodes) <= MAX_NODES:
            raise SetupError(f"A cluster here has 1 to {MAX_NODES} nodes, not {len(self.nodes)}.")
        if os.geteuid() != 0:
            raise SetupError("A cluster of namespaced engines needs root: run `make cluster-up` as root.")
        self.root.mkdir(parents=True, exist_ok=True)
        if user_namespaced is not None:
            unknown = set(user_namespaced) - {n.name for n in self.nodes}
            if unknown:
                raise SetupError(f"--userns names {', '.join(sorted(unknown))}, not a node of this cluster.")
            self.userns = set(user_namespaced)
        self.record(nodes=len(self.nodes), image=image, gpus=gpus, userns=sorted(self.userns))
        # the remapped root's host uid, asked once (an account and /etc/subuid): the engines, agents and labels
        self.id_offset = userns.remap_offset() if self.userns else 0
        if hub is not None:
            self.record(hub=list(hub), allowed=list(allowed or []))
        with step(PREFIX, f"network: bridge {BRIDGE} and {len(self.nodes)} namespaces"):
            self._shared_root()
            self._network()
        with step(PREFIX, "a home store per node (btrfs images)"):
            for node in self.nodes:
                if not homes.is_btrfs(node.store):
                    homes.mount_loop_btrfs(node.dir / "store.btrfs", node.store, size=store_size)
        with step(PREFIX, f"{len(self.nodes)} engines"):
            self._engines()
        with step(PREFIX, "a store agent per node (its home store for the hub, node to node)"):
            self._agents()
        with step(PREFIX, f"image {image} on every node"):
            self.copy_image(image)
        with step(PREFIX, "swarm: node1 manages, the others join; node labels"):
            self._swarm(gpus)
        if self.recorded().get("hub"):
            self.guard_egress()
        say(PREFIX, f"manager: {self.manager.socket}; nodes {', '.join(n.address for n in self.nodes)}")

    def _shared_root(self) -> None:
        # mounts made later below the root (the nodes' stores) must show inside the nodes
        if not any(f" {self.root} " in line and "shared:" in line for line in _mountinfo()):
            run("mount", "--bind", str(self.root), str(self.root), log=self.log)
            run("mount", "--make-rshared", str(self.root), log=self.log)
            self.record(shared_root=True)

    def _network(self) -> None:
        if not any(" /run/netns " in line for line in _mountinfo()):
            self.record(created_run_netns=True)
        if run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
            run("ip", "link", "add", BRIDGE, "type", "bridge", log=self.log)
            run("ip", "addr", "add", f"{NET}.1/24", "dev", BRIDGE, log=self.log)
            run("ip", "link", "set", BRIDGE, "up", log=self.log)
        # the host's FORWARD policy (Docker's) drops frames between the nodes otherwise
        if run("iptables", "-C", *FORWARD_RULE, check=False).returncode != 0:
            run("iptables", "-I", FORWARD_RULE[0], "1", *FORWARD_RULE[1:], log=self.log)
        existing = run("ip", "netns", "list", check=False).stdout.split()
        for node in self.nodes:
            if node.name in existing:
                continue
            run("ip", "netns", "add", node.name, log=self.log)
            veth = f"ws-{node.name}"
            run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", node.name, log=self.log)
            run("ip", "link", "set", veth, "master", BRIDGE, "up", log=self.log)
            run("ip", "-n", node.name, "addr", "add", f"{node.address}/24", "dev", "eth0", log=self.log)
            run("ip", "-n", node.name, "link", "set", "eth0", "up", log=self.log)
            run("ip", "-n", node.name, "link", "set", "lo", "up", log=self.log)
            run("ip", "-n", node.name, "route", "add", "default", "via", f"{NET}.1", log=self.log)

    def _engines(self) -> None:
        init = self.root / "node-init.sh"
        init.write_text(NODE_INIT.replace("{net}", NET))
        for node in self.nodes:
            if node.pid():
                continue
            for sub in ("data", "run"):
                (node.dir / sub).mkdir(parents=True, exist_ok=True)
            daemon_json = node.dir / "daemon.json"
            if not daemon_json.exists():
                daemon_json.write_text("{}")
            i, d = node.index, node.dir
            remap = []
            if node.name in self.userns:
                userns.bounded_data_root(d, self.log, self.id_offset)
                remap = userns.dockerd_args()
            dockerd = [
                "dockerd",
                f"--config-file={daemon_json}",
                f"--data-root={d / 'data'}",
                f"--exec-root={d / 'run'}",
                f"--pidfile={d / 'dockerd.pid'}",
                f"--host={node.socket}",
                "--storage-driver=overlay2",
                f"--bip=10.251.{i}.1/24",
                f"--default-address-pool=base=10.252.{i * 16}.0/20,size=24",
                f"--cgroup-parent=/workspace-cluster-{node.name}",
                f"--swarm-default-advertise-addr={node.address}",
                "--log-level=warn",
                *remap,
            ]
            script = f". {shlex.quote(str(init))}; hostname {node.name}; exec {shlex.join(dockerd)}"
            # DOCKER_SERVICE_PREFER_OFFLINE_IMAGE: a worker does not ask a registry first (20 s timeouts)
            env = os.environ | {"NODE_DIR": str(d), "DOCKER_SERVICE_PREFER_OFFLINE_IMAGE": "1"}
            with open(d / "dockerd.log", "ab") as out:
                subprocess.Popen(
                    ["ip", "netns", "exec", node.name, "unshare", "--uts", "sh", "-c", script],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
        deadline = time.monotonic() + 90
        for node in self.nodes:
            while True:
                try:
                    node.client(timeout=5).version()
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise SetupError(f"The engine of {node.name} did not answer in 90 s.", node.dir / "dockerd.log")
                    time.sleep(0.25)

    @property
    def agent_token_file(self) -> Path:
        """The store agents' shared token (a Docker secret on a real swarm)."""
        return self.root / "agent-token"

    def _agents(self) -> None:
        if not self.agent_token_file.exists():
            self.agent_token_file.write_text(secrets.token_urlsafe(33))
            self.agent_token_file.chmod(0o600)
        for node in self.nodes:
            if node.agent_pid():
                continue
            with open(node.dir / "agent.log", "ab") as out:
                proc = subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        node.name,
                        sys.executable,
                        "-m",
                        "workspace.store.agent",
                        "--root",
                        str(node.store),
                        "--listen",
                        f"{node.address}:{AGENT_PORT}",
                        "--token-file",
                        str(self.agent_token_file),
                        "--id-offset",
                        str(self.id_offset if node.name in self.userns else 0),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    cwd=Path(__file__).resolve().parents[2],
                )
            (node.dir / "agent.pid").write_text(str(proc.pid))
        deadline = time.monotonic() + 30
        for node in self.nodes:
            while not _answers(node.agent_url):
                if time.monotonic() > deadline:
                    raise SetupError(f"The store agent of {node.name} did not answer in 30 s.", node.dir / "agent.log")
                time.sleep(0.1)

    def copy_image(self, image: str, nodes: list[Node] | None = None) -> None:
        """Load `image` (name:tag, as this machine's engine has it) into every node (of `nodes`) that lacks it
        (no registry: `docker save | docker load`, the tar kept in the cache for the next cluster)."""
        host = docker.from_env(timeout=300)
        try:
            image_id = host.images.get(image).id
        except docker.errors.ImageNotFound as e:
            raise SetupError(f"The image {image} is not built here: run `make images` first.") from e
        self.cache.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", image.rsplit(":", 1)[0])
        tar = self.cache / f"image-{name}-{image_id.split(':')[-1][:12]}.tar"
        missing = [n for n in (self.nodes if nodes is None else nodes) if not _has_image(n, image_id)]
        if not missing:
            return
        for old in [*self.cache.glob(f"image-{name}-*.tar"), *self.cache.glob("image-????????????.tar")]:
            if old != tar:  # tars of this image since rebuilt (and of an earlier naming)
                old.unlink(missing_ok=True)
        if not tar.exists():
            partial = tar.with_suffix(".partial")
            run("docker", "save", "-o", str(partial), image, log=self.log)
            partial.rename(tar)
        loads = [
            subprocess.Popen(["docker", "-H", n.socket, "load", "-q", "-i", str(tar)], stdout=subprocess.DEVNULL)
            for n in missing
        ]
        if any(p.wait() != 0 for p in loads):
            raise SetupError(f"Loading {image} into a node failed.", self.log)

    def _swarm(self, gpus: dict[str, list[str]]) -> None:
        manager = self.manager.client()
        if manager.info()["Swarm"]["LocalNodeState"] != "active":
            manager.swarm.init(
                advertise_addr=self.manager.address,
                listen_addr=f"{self.manager.address}:2377",
                default_addr_pool=["10.20.0.0/16"],
            )
        token = manager.swarm.attrs["JoinTokens"]["Worker"]
        for node in self.nodes[1:]:
            client = node.client()
            if client.info()["Swarm"]["LocalNodeState"] != "active":
                client.swarm.join(
                    remote_addrs=[f"{self.manager.address}:2377"],
                    join_token=token,
                    advertise_addr=node.address,
                    listen_addr=f"{node.address}:2377",
                )
        for node in self.nodes:
            self._label(manager, node, gpus)

    def _label(self, manager, node: Node, gpus: dict[str, list[str]], tries: int = 10) -> None:
        """Its labels on the node's swarm record; read again and retried while the record changes under the
        update (a node coming back rejoins meanwhile: "update out of sequence")."""
        for attempt in range(tries):
            swarm_node = next(n for n in manager.nodes.list() if n.attrs["Description"]["Hostname"] == node.name)
            spec = swarm_node.attrs["Spec"]
            labels = dict(
                spec.get("Labels") or {},
                node=node.name,
                **{
                    "workspace.store": str(node.store),
                    "workspace.store-agent": node.agent_url,
                    # no registry here: a course's pre-warm loads its image into the node's engine
                    "workspace.engine": node.socket,
                },
            )
            if gpus.get(node.name):
                labels["workspace.gpus"] = ",".join(gpus[node.name])
            else:
                labels.pop("workspace.gpus", None)
            if node.name in self.userns:
                labels["workspace.userns"] = "remap"  # root-allowed types run here only
                labels["workspace.id-offset"] = str(self.id_offset)  # for a hub that mounts the store
            else:
                labels.pop("workspace.userns", None)
                labels.pop("workspace.id-offset", None)
            try:
                swarm_node.update(dict(spec, Labels=labels))
                return
            except docker.errors.APIError as e:
                if "out of sequence" not in str(e) or attempt == tries - 1:
                    raise
                time.sleep(0.5)

    def guard_egress(self, hub: tuple[str, int] | None = None, allowed: list[str] | None = None) -> None:
        """The egress rules of a swarm node in every node's namespace (idempotent): its workspaces reach
        the hub's API `hub` and `allowed`, not the site's networks; both recorded for the next `up`."""
        if hub is not None:
            self.record(hub=list(hub), allowed=list(allowed or []))
        state = self.recorded()
        with step(PREFIX, f"egress rules on {len(self.nodes)} nodes (docker_gwbridge)"):
            for node in self.nodes:
                prefix = ("ip", "netns", "exec", node.name)
                # the nodes' resolver is the bridge (NODE_INIT), not the host's
                policy = egress.node_policy(tuple(state["hub"]), state.get("allowed", []), [f"{NET}.1"], prefix)
                try:
                    egress.apply(policy, prefix)
                except egress.EgressError as e:
                    raise SetupError(f"The egress rules of {node.name} could not be made: {e}") from e

    # -- down -------------------------------------------------------------------

    def down(self, purge: bool = False) -> None:
        state = self.recorded()
        with step(PREFIX, f"stop {len(self.nodes)} engines and remove the network"):
            for node in self.nodes:
                self._stop_engine(node)
            if run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
                run("ip", "link", "del", BRIDGE, check=False, log=self.log)  # also removes the veths' ends
            while run("iptables", "-D", *FORWARD_RULE, check=False).returncode == 0:
                pass
            mounts = sorted(
                {line.split()[4] for line in _mountinfo() if line.split()[4].startswith(f"{self.root}/")},
                reverse=True,
            )
            for mount in mounts:
                run("umount", "-l", mount, check=False, log=self.log)
            for line in run("losetup", "-a", check=False).stdout.splitlines():
                if f"{self.root}/" in line:
                    run("losetup", "-d", line.split(":")[0], check=False, log=self.log)
            if state.get("shared_root"):
                run("umount", "-l", str(self.root), check=False, log=self.log)
            if state.get("created_run_netns") and not os.listdir("/run/netns"):
                run("umount", "/run/netns", check=False, log=self.log)
            for remapped in userns.runtime_leftovers(self.root):  # beside the root, not below it
                subprocess.run(["rm", "-rf", "--one-file-system", str(remapped)], check=False)
        if purge:
            subprocess.run(["rm", "-rf", "--one-file-system", str(self.root)], check=False)
        else:
            self.record(nodes=0, shared_root=False, created_run_netns=False)

    def _stop_engine(self, node: Node) -> None:
        pid = node.pid()
        if pid:
            try:  # containers first, so that the engine cleans up in its own namespace
                client = node.client(timeout=10)
                if client.info()["Swarm"]["LocalNodeState"] == "active":
                    client.swarm.leave(force=True)
                for c in client.containers.list(all=True):
                    c.remove(force=True)
            except Exception as e:
                say(PREFIX, f"{node.name}: {e}")
            os.kill(pid, 15)
            for _ in range(60):
                if node.pid() is None:
                    break
                time.sleep(0.5)
            else:
                os.kill(pid, 9)
        for leftover in run("ip", "netns", "pids", node.name, check=False).stdout.split():
            try:
                os.kill(int(leftover), 9)
            except (OSError, ValueError):
                pass
        run("ip", "netns", "del", node.name, check=False, log=self.log)
        for cgroup in Path("/sys/fs/cgroup").glob(f"*/workspace-cluster-{node.name}"):
            subprocess.run(["find", str(cgroup), "-depth", "-type", "d", "-delete"], capture_output=True)

    def status(self) -> list[dict]:
        out = []
        for node in self.nodes:
            up = node.pid() is not None
            out.append({"node": node.name, "address": node.address, "engine": "up" if up else "down"})
        return out


def _mountinfo() -> list[str]:
    return Path("/proc/self/mountinfo").read_text().splitlines()


def _answers(url: str) -> bool:
    """Whether something listens at `url`'s address (the agent, once started)."""
    where = urlparse(url)
    try:
        with socket.create_connection((where.hostname, where.port), 1):
            return True
    except OSError:
        return False


def _has_image(node: Node, image_id: str) -> bool:
    try:
        node.client().images.get(image_id)
        return True
    except docker.errors.ImageNotFound:
        return False


def parse_gpus(values: list[str]) -> dict[str, list[str]]:
    """`node2=0,1` -> {"node2": ["0", "1"]} (each node's GPU device IDs)."""
    out = {}
    for value in values:
        name, _, ids = value.partition("=")
        if not name.startswith("node") or not ids:
            raise SetupError(f"--gpus takes NODE=ID,ID (like node2=0,1), not {value!r}.")
        out[name] = [i.strip() for i in ids.split(",") if i.strip()]
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="workspace-cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up", "down", "status", "egress"])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--gpus", action="append", default=[], help="NODE=ID,ID: GPU device IDs of a node")
    parser.add_argument("--purge", action="store_true", help="down: also delete the nodes' data and stores")
    parser.add_argument(
        "--userns", action="append", default=None, help="up: a node whose engine runs containers in a user namespace"
    )
    parser.add_argument("--hub", help="up, egress: ADDR:PORT of the hub's API as the nodes' workspaces call it")
    parser.add_argument("--allowed", action="append", default=[], help="egress: a destination let through")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    root = settings.path("cluster")
    try:
        if args.command == "up":
            hub = egress.parse_hub(args.hub) if args.hub else None
            cluster = Cluster(root, args.nodes, cache=settings.path("cache"))
            cluster.up(
                settings.image, parse_gpus(args.gpus), hub=hub, allowed=args.allowed, user_namespaced=args.userns
            )
        elif args.command == "egress":
            if not args.hub:
                raise SetupError("egress needs --hub ADDR:PORT (the hub's API as workspaces call it).")
            Cluster(root).guard_egress(egress.parse_hub(args.hub), args.allowed)
        elif args.command == "down":
            Cluster(root).down(purge=args.purge)
        else:
            print(json.dumps(Cluster(root).status(), indent=1))
    except ValueError as e:  # --hub or --allowed mistyped
        fail(SetupError(str(e)))
    except SetupError as e:
        fail(e)


if __name__ == "__main__":
    sys.exit(main())
