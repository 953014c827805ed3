"""The Kubernetes objects of an execution, as plain dicts (the design is docs/kubernetes.md).

Pure functions: no cluster, no client library, no kubespawner. Given what
`WorkspaceMixin.start()` knows once an execution is planned and admitted
(owner, workspace, execution number and store keys, resource type, limits,
dataset mount plan), `execution_manifests()` returns:

- the home: a PersistentVolumeClaim restored from the parent's
  VolumeSnapshot (CSI) or empty, and the VolumeSnapshot that saves it at stop;
- the dataset versions: read-only volumes, either one ReadOnlyMany claim per
  slot cloned from the version's VolumeSnapshot, or read-only `subPath`s of
  one shared claim;
- the pod: resources (cpu, memory, `nvidia.com/gpu` through the NVIDIA device
  plugin), node affinity for a GPU model (and the node the queue admitted it
  on), labels, security settings; and the same as KubeSpawner traits;
- the owner's NetworkPolicy: a user's workspaces reach each other and the hub;
- for a deployment's replica (#33): what it serves as a read-only clone at /openbayes/output, its app's
  port on the pod and a NetworkPolicy that lets the hub's pod (the router) reach that port; its home is
  never saved.

Names are DNS-1123 labels (RFC 1035 too: they start with a letter, so they
serve for Services as well; made in kubernetes_names.py). Store keys are safe already and used as they
are, so an object is found from its record; names made from user and server
names, which may be anything, are a readable slug plus a hash of the exact
name, so two names never share an object. Label values are made the same
way; the exact names are annotations.

Nothing here talks to a cluster: tests/unit/test_kubernetes_manifests.py
validates every manifest against the `kubernetes` client's API models.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from workspace.egress import BLOCKED, parse_allowed
from workspace.limits.resource_types import ResourceType
from workspace.spawner import privileges, scratch
from workspace.spawner.kubernetes_names import (  # noqa: F401 (all of them are this module's names too)
    DNS_LABEL,
    HASH_LENGTH,
    LABEL_VALUE,
    STORE_KEY,
    bytes_quantity,
    cpu_quantity,
    dataset_claim_name,
    dataset_snapshot_name,
    digest,
    escaped_name,
    home_claim_name,
    home_snapshot_name,
    key_name,
    label_value,
    network_policy_name,
    output_claim_name,
    pod_name,
    serve_policy_name,
    slug,
)

GPU_RESOURCE = "nvidia.com/gpu"
SNAPSHOT_GROUP = "snapshot.storage.k8s.io"
HOSTNAME_LABEL = "kubernetes.io/hostname"
CONTAINER = "notebook"  # KubeSpawner's name for the server's container
_DEPLOYMENT = re.compile(r"^[a-z]([-a-z0-9]{0,14}[a-z0-9])?$")  # at most 16, so key names fit in 63


# addresses an outbound rule leaves out: the cluster's own (pods, services, nodes) and cloud metadata
# what a workspace never reaches unless the site allows it (the ranges the Docker hosts' rules refuse)
PRIVATE_V4 = BLOCKED[4]
PRIVATE_V6 = BLOCKED[6]

# component labels: which of our objects a selector means
WORKSPACE_POD = "workspace"
HOME_VOLUME = "home"
HOME_SNAPSHOT = "home-snapshot"
DATASET_VOLUME = "dataset"
OWNER_NETWORK = "owner-network"
OUTPUT_VOLUME = "output"
SERVE_NETWORK = "serve-network"
OUTPUT_MOUNT = "/openbayes/output"


# -- inputs -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterSettings:
    """What a site configures once (KubeWorkspaceSpawner's traits in the design)."""

    namespace: str
    snapshot_class: str  # the VolumeSnapshotClass of homes (and dataset versions)
    storage_class: str | None = None  # of homes; None: the cluster's default class
    deployment: str = "workspace"
    home_access_mode: str = "ReadWriteOncePod"  # one pod at a time writes a home
    default_home_size: int = 10 << 30  # a home's volume where the type sets no home_size
    ephemeral_storage: int | None = 10 << 30  # the container's writable layer and /tmp; None: no limit
    # a read-only root, and tmpfs emptyDirs (medium Memory: counted in the memory limit) with a sizeLimit
    # where the image writes outside the home (workspace/spawner/scratch.py); the kubelet evicts a pod past one
    read_only_root: bool = True
    scratch_space: Mapping[str, object] = field(default_factory=lambda: dict(scratch.DEFAULT))
    scratch_memory_fraction: float = 0.5
    # datasets: a claim holding every version (read-only subPaths), or None: one ROX clone per slot
    datasets_claim: str | None = None
    dataset_storage_class: str | None = None  # of the clones; None: storage_class
    dataset_volume_size: int = 1 << 30  # a clone's size where the mount plan gives none
    gpu_label: str = "nvidia.com/gpu.product"  # node label of the GPU model (GPU feature discovery)
    gpu_products: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # model -> label values
    gpu_tolerations: tuple[dict, ...] = ({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},)
    hub_selector: Mapping[str, str] = field(default_factory=lambda: {"app": "jupyterhub", "component": "hub"})
    proxy_selector: Mapping[str, str] = field(default_factory=lambda: {"app": "jupyterhub", "component": "proxy"})
    dns_namespace: str = "kube-system"
    dns_selector: Mapping[str, str] = field(default_factory=lambda: {"k8s-app": "kube-dns"})
    hub_port: int = 8081
    port: int = 8888  # the single-user server's
    internet: bool = True  # outbound to public addresses (as on Docker's bridge); False: air-gapped
    allowed: tuple[str, ...] = ()  # Egress.allowed: private destinations the site lets workspaces reach
    uid: int = 1000
    gid: int = 1000
    home_mount: str = "/openbayes/home"

    def __post_init__(self):
        if not _DEPLOYMENT.match(self.deployment):
            raise ValueError(
                f"deployment {self.deployment!r}: on Kubernetes at most 16 lower-case letters, digits and '-', "
                "starting with a letter"
            )
        if not DNS_LABEL.match(self.namespace):
            raise ValueError(f"namespace {self.namespace!r} is not a DNS label")


@dataclass(frozen=True)
class Serving:
    """A deployment's replica (#33): its app's port and what it serves."""

    port: int
    source: str  # the saved output's snapshot key (s…) or the dataset version's key (d…)
    size: int | None = None  # bytes of that snapshot (a clone is at least that)


@dataclass(frozen=True)
class ExecutionInputs:
    """What the mixin has at start, after `lifecycle.begin()` and admission."""

    owner: str
    server: str  # the workspace's name ('' for a default server)
    execution_id: int
    number: int
    live_key: str  # the execution's home (Execution.live_key)
    snapshot_key: str  # what its stop saves (Execution.snapshot_key)
    image: str
    restore_snapshot: str | None = None  # the parent's snapshot key (StartPlan.restore_snapshot); None: empty
    restore_size: int | None = None  # that VolumeSnapshot's status.restoreSize (a clone is at least that)
    rtype: ResourceType | None = None
    limits: Mapping[str, object] | None = None  # WorkspaceMixin.limits(): cpu, memory (None: the type's)
    mounts: tuple[dict, ...] = ()  # datasets.resolve(): slot, mount, ref, key (+ size: the clone's bytes)
    home_limit: int | None = None  # lifecycle's home limit (None: the type's home_size, else the default)
    node: str | None = None  # the node the queue admitted it on (None: the scheduler chooses)
    serve: Serving | None = None  # a deployment's replica (None: a workspace, a task, a run)


# -- the pieces -------------------------------------------------------------------------


def labels(s: ClusterSettings, x: ExecutionInputs, component: str) -> dict[str, str]:
    """What identifies an execution's objects (DockerWorkspaceSpawner.container_labels(), escaped)."""
    return {
        "app.kubernetes.io/managed-by": "workspace",
        "workspace.deployment": s.deployment,
        "workspace.user": label_value(x.owner),
        "workspace.server": label_value(x.server),
        "workspace.execution": str(int(x.execution_id)),
        "workspace.component": component,
    }


def annotations(x: ExecutionInputs) -> dict[str, str]:
    """The exact names the labels escape."""
    return {"workspace.user": x.owner, "workspace.server": x.server, "workspace.number": str(int(x.number))}


def _metadata(s: ClusterSettings, x: ExecutionInputs, name: str, component: str) -> dict:
    return {"name": name, "namespace": s.namespace, "labels": labels(s, x, component), "annotations": annotations(x)}


def owner_selector(s: ClusterSettings, owner: str) -> dict[str, str]:
    """The labels of every workspace pod of one owner."""
    return {
        "workspace.deployment": s.deployment,
        "workspace.user": label_value(owner),
        "workspace.component": WORKSPACE_POD,
    }


def home_claim(s: ClusterSettings, x: ExecutionInputs) -> dict:
    """The execution's home: a clone of the parent's snapshot (constant time on a CoW driver), or empty."""
    limit = x.home_limit or (x.rtype.home_size if x.rtype else None) or s.default_home_size
    spec = {
        "accessModes": [s.home_access_mode],
        "resources": {"requests": {"storage": bytes_quantity(max(limit, x.restore_size or 0))}},
        "volumeMode": "Filesystem",
    }
    if s.storage_class:
        spec["storageClassName"] = s.storage_class
    if x.restore_snapshot:
        spec["dataSource"] = {
            "apiGroup": SNAPSHOT_GROUP,
            "kind": "VolumeSnapshot",
            "name": home_snapshot_name(s.deployment, x.restore_snapshot),
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(s, x, home_claim_name(s.deployment, x.live_key), HOME_VOLUME),
        "spec": spec,
    }


def home_snapshot(s: ClusterSettings, x: ExecutionInputs) -> dict:
    """The save: a VolumeSnapshot of the home's claim, made once the pod is gone."""
    return {
        "apiVersion": f"{SNAPSHOT_GROUP}/v1",
        "kind": "VolumeSnapshot",
        "metadata": _metadata(s, x, home_snapshot_name(s.deployment, x.snapshot_key), HOME_SNAPSHOT),
        "spec": {
            "volumeSnapshotClassName": s.snapshot_class,
            "source": {"persistentVolumeClaimName": home_claim_name(s.deployment, x.live_key)},
        },
    }


def dataset_claims(s: ClusterSettings, x: ExecutionInputs) -> list[dict]:
    """One ReadOnlyMany clone per mounted version (none with a shared datasets claim)."""
    if s.datasets_claim:
        return []
    claims = []
    for i, m in enumerate(x.mounts):
        slot = int(m.get("slot", i))
        spec = {
            "accessModes": ["ReadOnlyMany"],
            "resources": {"requests": {"storage": bytes_quantity(m.get("size") or s.dataset_volume_size)}},
            "volumeMode": "Filesystem",
            "dataSource": {
                "apiGroup": SNAPSHOT_GROUP,
                "kind": "VolumeSnapshot",
                "name": dataset_snapshot_name(s.deployment, m["key"]),
            },
        }
        storage_class = s.dataset_storage_class or s.storage_class
        if storage_class:
            spec["storageClassName"] = storage_class
        meta = _metadata(s, x, dataset_claim_name(s.deployment, x.live_key, slot), DATASET_VOLUME)
        meta["annotations"]["workspace.dataset"] = str(m.get("ref", m["key"]))
        claims.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec})
    return claims


def output_claim(s: ClusterSettings, x: ExecutionInputs) -> dict | None:
    """A replica's output: a ReadOnlyMany clone of the saved home's (or dataset version's) snapshot."""
    if x.serve is None:
        return None
    named = home_snapshot_name if x.serve.source.startswith("s") else dataset_snapshot_name
    source = {"apiGroup": SNAPSHOT_GROUP, "kind": "VolumeSnapshot", "name": named(s.deployment, x.serve.source)}
    size = {"storage": bytes_quantity(x.serve.size or s.dataset_volume_size)}
    spec = {"accessModes": ["ReadOnlyMany"], "resources": {"requests": size}, "volumeMode": "Filesystem"}
    spec["dataSource"] = source
    if s.dataset_storage_class or s.storage_class:
        spec["storageClassName"] = s.dataset_storage_class or s.storage_class
    meta = _metadata(s, x, output_claim_name(s.deployment, x.live_key), OUTPUT_VOLUME)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def serve_network_policy(s: ClusterSettings, x: ExecutionInputs) -> dict | None:
    """The router (in the hub's pod) reaches a replica's app on its port; the owner's policy allows only the
    server's port from the hub. Policies add up, so this one opens that port alone, for this pod alone."""
    if x.serve is None:
        return None
    pod = {k: v for k, v in labels(s, x, WORKSPACE_POD).items() if k != "app.kubernetes.io/managed-by"}
    hub = {"from": [{"podSelector": {"matchLabels": dict(s.hub_selector)}}]}
    spec = {"podSelector": {"matchLabels": pod}, "policyTypes": ["Ingress"]}
    spec["ingress"] = [{**hub, "ports": [{"protocol": "TCP", "port": int(x.serve.port)}]}]
    meta = _metadata(s, x, serve_policy_name(s.deployment, x.live_key), SERVE_NETWORK)
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta, "spec": spec}


def volumes(s: ClusterSettings, x: ExecutionInputs) -> tuple[list[dict], list[dict]]:
    """(volumes, the container's volume mounts): the home read-write, every dataset read-only."""
    vols = [{"name": "home", "persistentVolumeClaim": {"claimName": home_claim_name(s.deployment, x.live_key)}}]
    mounts = [{"name": "home", "mountPath": s.home_mount}]
    if s.datasets_claim and x.mounts:
        vols.append({"name": "datasets", "persistentVolumeClaim": {"claimName": s.datasets_claim, "readOnly": True}})
    for i, m in enumerate(x.mounts):
        if not STORE_KEY.match(m["key"]):
            raise ValueError(f"invalid dataset key {m['key']!r}")
        if s.datasets_claim:
            mounts.append({"name": "datasets", "mountPath": m["mount"], "subPath": m["key"], "readOnly": True})
            continue
        slot = int(m.get("slot", i))
        claim = dataset_claim_name(s.deployment, x.live_key, slot)
        vols.append({"name": f"input{slot}", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
        mounts.append({"name": f"input{slot}", "mountPath": m["mount"], "readOnly": True})
    if x.serve is not None:
        claim = output_claim_name(s.deployment, x.live_key)
        vols.append({"name": "output", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}})
        mounts.append({"name": "output", "mountPath": OUTPUT_MOUNT, "readOnly": True})
    if s.read_only_root:
        # an emptyDir is world-writable (0777): a private one's owner is the pod's runAsUser alone there
        for i, place in enumerate(scratch.plan(s.scratch_space, cpu_and_memory(x)[1], s.scratch_memory_fraction)):
            vols.append(
                {"name": f"scratch{i}", "emptyDir": {"medium": "Memory", "sizeLimit": bytes_quantity(place.size)}}
            )
            mounts.append({"name": f"scratch{i}", "mountPath": place.path})
    return vols, mounts


def cpu_and_memory(x: ExecutionInputs) -> tuple[float | None, int | None]:
    """(cores, bytes) of a start: the mixin's limits, else its type's (None: no limit)."""
    limits = x.limits if x.limits is not None else {"cpu": x.rtype.cpu, "memory": x.rtype.memory} if x.rtype else {}
    return limits.get("cpu") or None, limits.get("memory") or None


def resources(s: ClusterSettings, x: ExecutionInputs) -> dict:
    """Requests equal to limits (Guaranteed QoS): what the queue admitted is what the scheduler reserves."""
    cpu, memory = cpu_and_memory(x)
    amounts = {}
    if cpu:
        amounts["cpu"] = cpu_quantity(cpu)
    if memory:
        amounts["memory"] = bytes_quantity(memory)
    if s.ephemeral_storage:
        amounts["ephemeral-storage"] = bytes_quantity(s.ephemeral_storage)
    if x.rtype is not None and x.rtype.gpus:
        amounts[GPU_RESOURCE] = str(int(x.rtype.gpus))  # extended resources: whole units, requests == limits
    return {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}


def gpu_products(s: ClusterSettings, model: str) -> list[str]:
    """The node label values of a resource type's GPU model (the model itself when not mapped)."""
    values = list(s.gpu_products.get(model, (model,)))
    bad = [v for v in values if not v or not LABEL_VALUE.match(v)]
    if bad:
        raise ValueError(f"GPU model {model!r}: {bad} cannot be node label values; map it in gpu_products")
    return values


def node_selector_terms(s: ClusterSettings, x: ExecutionInputs) -> list[dict]:
    """Required node selector terms: the GPU model, and the node the queue admitted it on."""
    expressions = []
    if x.rtype is not None and x.rtype.gpus and x.rtype.gpu_model:
        expressions.append({"key": s.gpu_label, "operator": "In", "values": gpu_products(s, x.rtype.gpu_model)})
    if x.node:
        expressions.append({"key": HOSTNAME_LABEL, "operator": "In", "values": [x.node]})
    return [{"matchExpressions": expressions}] if expressions else []


def affinity(s: ClusterSettings, x: ExecutionInputs) -> dict | None:
    terms = node_selector_terms(s, x)
    if not terms:
        return None
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def tolerations(s: ClusterSettings, x: ExecutionInputs) -> list[dict]:
    return [dict(t) for t in s.gpu_tolerations] if x.rtype is not None and x.rtype.gpus else []


def gpu_env(env: Mapping[str, str], gpus: int) -> dict[str, str]:
    """The environment with NVIDIA_VISIBLE_DEVICES as Kubernetes needs it: the device plugin's
    choice for a GPU pod (ours removed), `void` for any other (no card through a default nvidia runtime)."""
    out = {k: v for k, v in env.items() if k != "NVIDIA_VISIBLE_DEVICES"}
    if not gpus:
        out["NVIDIA_VISIBLE_DEVICES"] = "void"
    return out


def pod_security(s: ClusterSettings, root: bool = False) -> tuple[dict, dict, dict]:
    """(the pod's, the container's security context, more of the pod's spec): the student runs any code, with
    no way up; a root-allowed type's pod, root in a user namespace of its own (spawner/privileges.py)."""
    return privileges.pod_security(s.uid, s.gid, s.read_only_root, root)


def owner_network_policy(s: ClusterSettings, owner: str) -> dict:
    """An owner's workspaces reach each other and the hub; the hub and the proxy reach them.

    One per owner (a selector cannot say "pods of my own owner"), kept while the user exists.
    Outbound traffic to public addresses follows `internet`; the private, link-local (the cloud's metadata
    address), documentation and other special ranges stay shut (egress.BLOCKED), but for the site's
    `allowed` destinations.
    """
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": network_policy_name(s.deployment, owner),
            "namespace": s.namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "workspace",
                "workspace.deployment": s.deployment,
                "workspace.user": label_value(owner),
                "workspace.component": OWNER_NETWORK,
            },
            "annotations": {"workspace.user": owner},
        },
        "spec": {
            "podSelector": {"matchLabels": dict(owner_selector(s, owner))},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": owner_ingress(s, owner),
            "egress": owner_egress(s, owner),
        },
    }


def owner_ingress(s: ClusterSettings, owner: str) -> list[dict]:
    """Who reaches an owner's workspaces: the owner's other workspaces, and the hub and the proxy (the
    server's port only)."""
    mine = owner_selector(s, owner)
    return [
        {"from": [{"podSelector": {"matchLabels": dict(mine)}}]},
        {
            "from": [
                {"podSelector": {"matchLabels": dict(s.hub_selector)}},
                {"podSelector": {"matchLabels": dict(s.proxy_selector)}},
            ],
            "ports": [{"protocol": "TCP", "port": s.port}],
        },
    ]


def owner_egress(s: ClusterSettings, owner: str) -> list[dict]:
    """What an owner's workspaces reach: each other, the hub's API, the cluster's DNS, the site's `allowed`
    destinations and, with `internet`, every public address."""
    mine = owner_selector(s, owner)
    egress = [
        {"to": [{"podSelector": {"matchLabels": dict(mine)}}]},
        {
            "to": [{"podSelector": {"matchLabels": dict(s.hub_selector)}}],
            "ports": [{"protocol": "TCP", "port": s.hub_port}],
        },
        {
            "to": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": s.dns_namespace}},
                    "podSelector": {"matchLabels": dict(s.dns_selector)},
                }
            ],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        },
    ]
    for dest in parse_allowed(s.allowed):
        rule: dict = {"to": [{"ipBlock": {"cidr": str(dest.network)}}]}
        if dest.port is not None:
            rule["ports"] = [{"protocol": p, "port": dest.port} for p in ("TCP", "UDP")]
        egress.append(rule)
    if s.internet:
        egress.append(
            {
                "to": [
                    {"ipBlock": {"cidr": "0.0.0.0/0", "except": list(PRIVATE_V4)}},
                    {"ipBlock": {"cidr": "::/0", "except": list(PRIVATE_V6)}},
                ]
            }
        )
    return egress


# -- all of an execution ------------------------------------------------------------------


@dataclass
class ExecutionManifests:
    pod_name: str
    cpu: float | None  # cores (the mixin's apply_limits: KubeSpawner's cpu_limit and cpu_guarantee)
    memory: int | None  # bytes (mem_limit and mem_guarantee)
    home_claim: dict  # created by the restore (before the pod)
    home_snapshot: dict  # created by the save (after the pod is gone), unless `saves_home` is False
    saves_home: bool  # False for a deployment's replica: its home is scratch
    output_claim: dict | None  # a replica's: created with the home; deleted with the pod
    serve_network_policy: dict | None  # a replica's: created before the pod, deleted with it
    ports: list[dict]  # the container's: the server's, and a replica's app
    dataset_claims: list[dict]  # created with the home; deleted with the pod
    network_policy: dict  # the owner's, ensured before the pod
    volumes: list[dict]
    volume_mounts: list[dict]
    resources: dict
    affinity: dict | None
    tolerations: list[dict]
    labels: dict[str, str]
    annotations: dict[str, str]
    pod_security_context: dict
    container_security_context: dict
    pod_extra: dict  # more of the pod's spec (`hostUsers: false` for a root-allowed type)

    def pod(self, s: ClusterSettings, image: str, env: Mapping[str, str] | None = None) -> dict:
        """The pod these pieces make (KubeSpawner builds it from `kubespawner_traits()`; here for tests and docs)."""
        gpus = int(self.resources.get("limits", {}).get(GPU_RESOURCE, 0))
        container = {
            "name": CONTAINER,
            "image": image,
            "ports": self.ports,
            "env": [{"name": k, "value": v} for k, v in sorted(gpu_env(env or {}, gpus).items())],
            "volumeMounts": self.volume_mounts,
            "securityContext": self.container_security_context,
            "workingDir": s.home_mount,
        }
        if self.resources:
            container["resources"] = self.resources
        spec = {
            "containers": [container],
            "volumes": self.volumes,
            "securityContext": self.pod_security_context,
            "automountServiceAccountToken": False,  # student code gets no credential for the cluster's API
            "enableServiceLinks": False,  # nor a list of the namespace's services in its environment
            "restartPolicy": "Never",  # a server that dies ends its execution (`lost`), as on Docker
            **self.pod_extra,
        }
        if self.affinity:
            spec["affinity"] = self.affinity
        if self.tolerations:
            spec["tolerations"] = self.tolerations
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.pod_name,
                "namespace": s.namespace,
                "labels": self.labels,
                "annotations": self.annotations,
            },
            "spec": spec,
        }

    def kubespawner_traits(self) -> dict:
        """What KubeWorkspaceSpawner sets on itself (KubeSpawner's trait names) before KubeSpawner.start()."""
        req, lim = self.resources.get("requests", {}), self.resources.get("limits", {})
        core = ("cpu", "memory")
        return {
            "pod_name": self.pod_name,
            "cpu_limit": self.cpu,
            "cpu_guarantee": self.cpu,
            "mem_limit": self.memory,
            "mem_guarantee": self.memory,
            "volumes": self.volumes,
            "volume_mounts": self.volume_mounts,
            "extra_resource_guarantees": {k: v for k, v in req.items() if k not in core},
            "extra_resource_limits": {k: v for k, v in lim.items() if k not in core},
            "node_affinity_required": (self.affinity or {})
            .get("nodeAffinity", {})
            .get("requiredDuringSchedulingIgnoredDuringExecution", {})
            .get("nodeSelectorTerms", []),
            "tolerations": self.tolerations,
            "extra_container_config": {"ports": self.ports},  # KubeSpawner's has the server's port only
            "extra_labels": self.labels,
            "extra_annotations": self.annotations,
            "storage_pvc_ensure": False,  # the home claim is the home store's, not KubeSpawner's
            "automount_service_account_token": False,
            "pod_security_context": self.pod_security_context,
            "container_security_context": self.container_security_context,
            "extra_pod_config": {"restartPolicy": "Never", "enableServiceLinks": False, **self.pod_extra},
        }


def execution_manifests(s: ClusterSettings, x: ExecutionInputs) -> ExecutionManifests:
    """Every object one execution needs, from what the mixin knows at start."""
    vols, mounts = volumes(s, x)
    pod_context, container_context, pod_extra = pod_security(s, root=x.rtype is not None and x.rtype.root)
    cpu, memory = cpu_and_memory(x)
    return ExecutionManifests(
        pod_name=pod_name(s.deployment, x.owner, x.server, x.number),
        cpu=cpu,
        memory=memory,
        home_claim=home_claim(s, x),
        home_snapshot=home_snapshot(s, x),
        saves_home=x.serve is None,
        output_claim=output_claim(s, x),
        serve_network_policy=serve_network_policy(s, x),
        ports=[{"name": "notebook-port", "containerPort": s.port}]
        + ([{"name": "app", "containerPort": int(x.serve.port)}] if x.serve else []),
        dataset_claims=dataset_claims(s, x),
        network_policy=owner_network_policy(s, x.owner),
        volumes=vols,
        volume_mounts=mounts,
        resources=resources(s, x),
        affinity=affinity(s, x),
        tolerations=tolerations(s, x),
        labels=labels(s, x, WORKSPACE_POD),
        annotations=annotations(x),
        pod_security_context=pod_context,
        container_security_context=container_context,
        pod_extra=pod_extra,
    )
