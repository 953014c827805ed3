"""The nodes workspaces run on: their names, addresses, home stores, GPUs and whether they take work.

One node on a single Docker host (this machine, its GPUs from the configuration
or NVML); on a Docker Swarm, the swarm's nodes as its manager describes them,
with what the administrator labelled them with:

    workspace.store       the node's home store (a btrfs filesystem; required)
    workspace.gpus        its GPU device IDs, comma-separated ("0,1,2,3"; none: a CPU-only node)
    workspace.gpu-model   their model ("A100"), which a resource type's `gpu_model` asks for
    workspace.store-agent the URL of the node's store agent (workspace/store/agent.py), where the
                          hub cannot reach the store as a mount of its own (separate machines)
    workspace.engine      the node's own Docker engine as the hub reaches it, where images are copied
                          into nodes rather than pulled from a registry (`make cluster-up`'s nodes): a
                          course's pre-warm loads its image there (workspace/prewarm/)
    workspace.nvidia-driver  its NVIDIA driver's version ("535.104.05"), and
    workspace.cuda        the highest CUDA that driver supports ("12.2"): a GPU start of an image whose
                          CUDA runtime needs a newer driver is refused before its restore (images/cuda.py)

Admission places starts by these (workspace/limits/queue.py); the admin page shows
them with their free GPUs.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable

log = logging.getLogger("workspace.nodes")
STORE_LABEL, GPUS_LABEL, MODEL_LABEL = "workspace.store", "workspace.gpus", "workspace.gpu-model"
AGENT_LABEL, ENGINE_LABEL = "workspace.store-agent", "workspace.engine"
DRIVER_LABEL, CUDA_LABEL = "workspace.nvidia-driver", "workspace.cuda"
OFFSET_LABEL = "workspace.id-offset"  # its remapped root's host uid: a store mounted by the hub shifts homes by it
USERNS_LABEL = "workspace.userns"  # "remap": the engine runs with userns-remap (root-allowed types run there)


@dataclass(frozen=True)
class Node:
    name: str  # its hostname: the placement constraint and the executions' `node`
    id: str = ""
    address: str = ""  # where the hub reaches its published ports
    store: str = ""  # its home store
    gpus: list[str] = field(default_factory=list)  # GPU device IDs
    gpu_model: str = ""
    agent: str = ""  # its store agent's URL ("": the store is reached as a mount)
    ready: bool = True  # up (its engine answers the manager)
    active: bool = True  # takes new work (an admin may pause or drain it)
    cpus: float = 0.0  # its cores (0: unknown), which size how many workspaces it brings up at once
    engine: str = ""  # its own Docker engine's URL, where images are loaded into it ("": it pulls them itself)
    driver: str = ""  # its NVIDIA driver's version ("": none known)
    cuda: str = ""  # the highest CUDA its driver supports ("12.2"; "": none known)
    userns: bool = False  # its engine runs containers in a user namespace (userns-remap): root-allowed types
    id_offset: int = 0  # that namespace's host uid of root (homes there belong to id_offset + 1000 while open)

    @property
    def state(self) -> str:
        if not self.ready:
            return "down"
        return "up" if self.active else "paused"

    def takes_work(self) -> bool:
        return self.ready and self.active

    def fits(self, gpu_model: str | None) -> bool:
        """Whether a type asking for GPUs of `gpu_model` (None: any) may run here."""
        return not gpu_model or not self.gpu_model or self.gpu_model.lower() == gpu_model.lower()

    def takes(self, gpu_model: str | None, root: bool) -> bool:
        """Whether a new start of a type asking for GPUs of `gpu_model` (None: any), and for root inside or
        not, may be placed here. A root-allowed type runs only on the nodes whose engine runs containers in a
        user namespace, and the other types never there: those nodes' room is theirs, as a GPU node's is its
        GPU types'."""
        return self.takes_work() and self.fits(gpu_model) and self.userns == root


def parse_swarm(listing: list[dict]) -> list[Node]:
    """The nodes of a swarm manager's `GET /nodes` answer."""
    nodes = []
    for attrs in listing:
        spec, status = attrs.get("Spec", {}), attrs.get("Status", {})
        labels = spec.get("Labels") or {}
        nodes.append(
            Node(
                name=attrs["Description"]["Hostname"],
                id=attrs["ID"],
                address=status.get("Addr", ""),
                store=labels.get(STORE_LABEL, ""),
                gpus=[g.strip() for g in labels.get(GPUS_LABEL, "").split(",") if g.strip()],
                gpu_model=labels.get(MODEL_LABEL, ""),
                agent=labels.get(AGENT_LABEL, ""),
                ready=status.get("State") == "ready",
                active=spec.get("Availability", "active") == "active",
                cpus=(attrs["Description"].get("Resources") or {}).get("NanoCPUs", 0) / 1e9,
                engine=labels.get(ENGINE_LABEL, ""),
                driver=labels.get(DRIVER_LABEL, ""),
                cuda=labels.get(CUDA_LABEL, ""),
                userns=labels.get(USERNS_LABEL) == "remap",
                id_offset=_offset(labels.get(OFFSET_LABEL, "")),
            )
        )
    return nodes


def _offset(label: str) -> int:
    """A node's `workspace.id-offset` (0: none, or not a number)."""
    return int(label) if label.isdigit() else 0


def inventories(nodes: list[Node], gpu_model: str | None = None, root: bool = False) -> dict[str, list[str]]:
    """{node: GPU IDs} of the nodes that take work (and have a store, on a swarm) for a type asking for
    `gpu_model` (and `root`, Node.takes): what admission places starts on."""
    return {n.name: list(n.gpus) for n in nodes if n.takes(gpu_model, root)}


class NodeStores:
    """The home store of every node, for the processes that act on homes outside a start: the service
    (retried saves, replication, deletions) and the culler (home measures). `list_nodes()` is the spawner
    class's `engine_nodes`; a node without a store of its own (a single host) uses `central`.

    On this machine every node's store is a host mount; on separate machines these are the calls a
    store agent on each node would answer (docs/swarm.md).
    """

    def __init__(
        self, central, list_nodes: Callable[[], list[Node]], agent_token: str = "", clean: bool = False, **store_kwargs
    ):
        self.central = central
        self._list = list_nodes
        self.agent_token = agent_token  # the store agents' token, where nodes have agents
        # only the process that saves (the hub) cleans a mounted store's partial saves, once
        self.clean, self.store_kwargs = clean, store_kwargs
        self._roots: dict[str, str] = {}  # node -> store, kept while a node is down
        self._agents: dict[str, str] = {}  # node -> its store agent's URL
        self._offsets: dict[str, int] = {}  # node -> its engine's remapped root (a store mounted here shifts by it)
        self._stores: dict[tuple[str, str], object] = {}
        self._lock = threading.Lock()

    def nodes(self) -> list[Node]:
        """The engine's nodes now (none when it does not answer: the caller tries again later)."""
        try:
            nodes = self._list()
        except Exception as e:
            log.warning("Could not list the nodes: %s", e)
            return []
        self._roots.update({n.name: n.store for n in nodes if n.store})
        self._agents.update({n.name: n.agent for n in nodes if n.agent})
        self._offsets.update({n.name: n.id_offset for n in nodes if n.store})
        return nodes

    def of(self, node: str | None):
        """The store of `node`'s executions."""
        if not node:
            return self.central
        if node not in self._roots:
            self.nodes()
        root = self._roots.get(node)
        if not root:
            return self.central
        return self.store(root, self._agents.get(node, ""), self._offsets.get(node, 0))

    def store(self, root: str, agent: str = "", id_offset: int = 0):
        """The store at `root` (on its node), through `agent` when it has one (which knows its node's
        `id_offset` itself), else mounted here with it (set up once)."""
        with self._lock:
            if (root, agent) not in self._stores:
                if agent:
                    from workspace.store.agent_store import AgentStore

                    if not self.agent_token:
                        raise RuntimeError(f"{agent} is a store agent, but no agent token is configured")
                    self._stores[(root, agent)] = AgentStore(agent, root, self.agent_token)
                else:
                    from workspace.store.homes import store_for

                    kwargs = dict(self.store_kwargs, id_offset=id_offset)
                    self._stores[(root, agent)] = store_for(root, self.clean, "btrfs", **kwargs)
            return self._stores[(root, agent)]

    def known(self, node: str) -> bool:
        """Whether `node`'s store is known (it has one, and was seen)."""
        return node in self._roots

    def own(self) -> list[tuple[str, object]]:
        """(node, store) of the nodes that have a store of their own."""
        names = [n.name for n in self.nodes() if n.store] or list(self._roots)
        return [(name, self.of(name)) for name in names]
