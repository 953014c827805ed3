"""The Kubernetes manifests of an execution (workspace/spawner/kubernetes.py, docs/kubernetes.md).

How they are validated: Pod, PersistentVolumeClaim and NetworkPolicy go through the `kubernetes`
client's own API models, read as the client reads an API server's answer
(`ApiClient._ApiClient__deserialize`, which fills the generated model classes and refuses a value of the
wrong type or a missing required field) and written back (`sanitize_for_serialization`). A field the
model does not know (a misspelling, a field at the wrong level) is dropped on that way, so the round trip
must give back exactly the manifest. VolumeSnapshot is a CRD (kubernetes-csi/external-snapshotter), not
in the client: its snapshot.storage.k8s.io/v1 schema is written down below from the CRD's documented
fields and rules, and checked by a small validator here; its metadata goes through the client's
V1ObjectMeta.

Names are checked against the DNS-1123 label rule as written here (not the module's own pattern).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from kubernetes.client import ApiClient

from workspace.limits.resource_types import ResourceType
from workspace.spawner import kubernetes as km

RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # and at most 63 characters
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")  # and at most 63 characters

ROOTED = ResourceType.from_config({"name": "rooted", "cpu": 2, "memory": "4G", "root": True})
HEX = "0123456789abcdef" * 2
CPU = ResourceType.from_config({"name": "cpu", "cpu": 2, "memory": "4G"})
A100 = ResourceType.from_config(
    {"name": "a100", "cpu": 8, "memory": "64G", "gpus": 2, "gpu_model": "A100", "home_size": "50G"}
)
MOUNTS = (
    {"slot": 0, "mount": "/input0", "ref": "prof/mnist:2", "version_id": 7, "key": "d" + HEX},
    {"slot": 1, "mount": "/input1", "ref": "prof/labels:1", "version_id": 9, "key": "d" + HEX[::-1], "size": 5 << 30},
)
HOSTILE = ["../x", "A" * 300, "ünïcödé", "用户", "Ada", "ada", "a.d.a", "a-d-a", "a_d_a", "-", "x" * 64, "a/b", "a b"]


def settings(**kw) -> km.ClusterSettings:
    kw = {"namespace": "workspaces", "snapshot_class": "csi-snapclass", "storage_class": "fast", **kw}
    return km.ClusterSettings(**kw)


def inputs(owner="ada", server="thesis", number=1, **kw) -> km.ExecutionInputs:
    token = f"{number:032x}"
    return km.ExecutionInputs(
        owner=owner,
        server=server,
        execution_id=100 + number,
        number=number,
        live_key=f"x{token}",
        snapshot_key=f"s{token}",
        image="workspace-base:latest",
        **kw,
    )


# -- validation against the API ------------------------------------------------------------


def validate(data: dict, model: str) -> None:
    """`data` is a valid `model` (a kubernetes.client model name), field for field."""
    client = ApiClient()
    obj = client._ApiClient__deserialize(copy.deepcopy(data), model)
    back = client.sanitize_for_serialization(obj)
    assert back == data, f"{model}: the API model reads it differently:\n{back}\n!=\n{data}"


# snapshot.storage.k8s.io/v1 VolumeSnapshot, from the CRD (external-snapshotter client/config/crd/
# snapshot.storage.k8s.io_volumesnapshots.yaml): spec is required and holds `source` (required, exactly one of
# persistentVolumeClaimName and volumeSnapshotContentName, both non-empty strings) and an optional
# volumeSnapshotClassName (non-empty when set); status is the controller's, never the creator's.
VOLUME_SNAPSHOT = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["snapshot.storage.k8s.io/v1"]},
        "kind": {"type": "string", "enum": ["VolumeSnapshot"]},
        "metadata": {"model": "V1ObjectMeta"},
        "spec": {
            "type": "object",
            "required": ["source"],
            "properties": {
                "source": {
                    "type": "object",
                    "oneOf": [["persistentVolumeClaimName"], ["volumeSnapshotContentName"]],
                    "properties": {
                        "persistentVolumeClaimName": {"type": "string", "minLength": 1},
                        "volumeSnapshotContentName": {"type": "string", "minLength": 1},
                    },
                },
                "volumeSnapshotClassName": {"type": "string", "minLength": 1},
            },
        },
    },
}
VOLUME_SNAPSHOT_ONE_OF = VOLUME_SNAPSHOT["properties"]["spec"]["properties"]["source"]["oneOf"]


def check_schema(value, schema: dict, where: str = "") -> list[str]:
    """What is wrong with `value` against a schema in the form above (empty: nothing)."""
    if "model" in schema:
        try:
            validate(value, schema["model"])
        except (AssertionError, ValueError, TypeError) as e:
            return [f"{where}: {e}"]
        return []
    if schema["type"] == "string":
        if not isinstance(value, str):
            return [f"{where}: not a string"]
        if len(value) < schema.get("minLength", 0) or value not in schema.get("enum", [value]):
            return [f"{where}: {value!r} is not allowed"]
        return []
    if not isinstance(value, dict):
        return [f"{where}: not an object"]
    errors = [f"{where}.{k}: unknown field" for k in value if k not in schema["properties"]]
    errors += [f"{where}.{k}: required" for k in schema.get("required", []) if k not in value]
    if "oneOf" in schema and sum(all(k in value for k in option) for option in schema["oneOf"]) != 1:
        errors.append(f"{where}: exactly one of {schema['oneOf']}")
    for k, v in value.items():
        if k in schema["properties"]:
            errors += check_schema(v, schema["properties"][k], f"{where}.{k}")
    return errors


def validate_all(m: km.ExecutionManifests, s: km.ClusterSettings) -> None:
    validate(m.home_claim, "V1PersistentVolumeClaim")
    for claim in m.dataset_claims:
        validate(claim, "V1PersistentVolumeClaim")
    validate(m.pod(s, "workspace-base:latest", {"HOME": "/openbayes/home"}), "V1Pod")
    validate(m.network_policy, "V1NetworkPolicy")
    assert check_schema(m.home_snapshot, VOLUME_SNAPSHOT) == []
    if m.output_claim is not None:
        validate(m.output_claim, "V1PersistentVolumeClaim")
        validate(m.serve_network_policy, "V1NetworkPolicy")


SCENARIOS = {
    "cpu, empty home": (settings(), inputs(rtype=CPU, limits={"cpu": 2, "memory": 4 << 30})),
    "no type, no limits": (settings(ephemeral_storage=None), inputs()),
    "gpu, restored, datasets cloned": (
        settings(),
        inputs(rtype=A100, mounts=MOUNTS, restore_snapshot="s" + HEX, restore_size=60 << 30, node="gpu-node-3"),
    ),
    "shared datasets claim, air-gapped": (
        settings(datasets_claim="workspace-datasets", internet=False, storage_class=None),
        inputs(rtype=CPU, mounts=MOUNTS),
    ),
    "root inside its own user namespace": (settings(), inputs(rtype=ROOTED)),
    "a deployment's replica, of a saved output": (settings(), inputs(rtype=CPU, serve=km.Serving(8080, "s" + HEX))),
    "a replica of a dataset version on a GPU": (
        settings(),
        inputs(rtype=A100, serve=km.Serving(9000, "d" + HEX, 3 << 30)),
    ),
    "mapped GPU products": (
        settings(gpu_products={"A100": ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-PCIE-40GB")}),
        inputs(rtype=A100),
    ),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_manifest_is_a_valid_api_object(name):
    s, x = SCENARIOS[name]
    validate_all(km.execution_manifests(s, x), s)


def test_the_validation_refuses_what_the_api_would():
    m = km.execution_manifests(settings(), inputs(rtype=A100, mounts=MOUNTS))
    misspelled = copy.deepcopy(m.home_claim)
    misspelled["spec"]["acessModes"] = misspelled["spec"].pop("accessModes")
    with pytest.raises(AssertionError):
        validate(misspelled, "V1PersistentVolumeClaim")
    number = copy.deepcopy(m.pod(settings(), "img"))
    number["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2  # quantities are strings
    with pytest.raises((AssertionError, ValueError, TypeError)):
        validate(number, "V1Pod")
    nameless = copy.deepcopy(m.pod(settings(), "img"))
    del nameless["spec"]["containers"][0]["name"]
    with pytest.raises((AssertionError, ValueError, TypeError)):
        validate(nameless, "V1Pod")
    both = copy.deepcopy(m.home_snapshot)
    both["spec"]["source"]["volumeSnapshotContentName"] = "content"
    assert check_schema(both, VOLUME_SNAPSHOT) == [".spec.source: exactly one of " + str(VOLUME_SNAPSHOT_ONE_OF)]
    stray = copy.deepcopy(m.home_snapshot)
    stray["spec"]["status"] = {"readyToUse": True}
    assert check_schema(stray, VOLUME_SNAPSHOT) == [".spec.status: unknown field"]
    bad_meta = copy.deepcopy(m.home_snapshot)
    bad_meta["metadata"]["labels"] = ["not", "a", "map"]
    assert check_schema(bad_meta, VOLUME_SNAPSHOT)


# -- names --------------------------------------------------------------------------------


def object_names(m: km.ExecutionManifests) -> list[str]:
    return [
        m.pod_name,
        m.home_claim["metadata"]["name"],
        m.home_snapshot["metadata"]["name"],
        m.network_policy["metadata"]["name"],
        *(c["metadata"]["name"] for c in m.dataset_claims),
    ]


def assert_dns_label(name: str) -> None:
    assert RFC1123_LABEL.match(name) and len(name) <= 63, name
    assert name[0].isalpha(), f"{name}: a Service name must start with a letter"


def assert_label_values(labels: dict) -> None:
    for key, value in labels.items():
        assert LABEL_VALUE.match(value) and len(value) <= 63, f"{key}={value!r}"


def test_names_are_dns_labels_and_unique_per_execution():
    s = settings()
    first = km.execution_manifests(s, inputs(number=1, rtype=CPU, mounts=MOUNTS))
    second = km.execution_manifests(s, inputs(number=2, rtype=CPU, mounts=MOUNTS, restore_snapshot=f"s{1:032x}"))
    for m in (first, second):
        names = object_names(m)
        for name in names:
            assert_dns_label(name)
        assert len(set(names)) == len(names)

    def per_execution(m):
        return set(object_names(m)) - {m.network_policy["metadata"]["name"]}

    assert not per_execution(first) & per_execution(second)
    # the owner's network is one object, whichever execution ensures it
    assert first.network_policy["metadata"]["name"] == second.network_policy["metadata"]["name"]
    assert first.pod_name.startswith("workspace-ada-thesis-") and first.pod_name.endswith("-1")
    assert first.home_claim["metadata"]["name"] == f"workspace-home-x{1:032x}"


def test_the_home_lineage_is_a_chain_of_snapshots():
    s = settings()
    first = km.execution_manifests(s, inputs(number=1, rtype=A100))
    second = km.execution_manifests(
        s, inputs(number=2, rtype=A100, restore_snapshot=f"s{1:032x}", restore_size=80 << 30)
    )
    assert "dataSource" not in first.home_claim["spec"]  # a fresh home is an empty volume
    # #2's home is cloned from the very VolumeSnapshot #1's stop creates
    assert second.home_claim["spec"]["dataSource"] == {
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": first.home_snapshot["metadata"]["name"],
    }
    # the save snapshots this execution's own claim, with the configured class
    assert second.home_snapshot["spec"] == {
        "volumeSnapshotClassName": "csi-snapclass",
        "source": {"persistentVolumeClaimName": second.home_claim["metadata"]["name"]},
    }
    # the type's home_size, but never smaller than the snapshot it is cloned from
    assert first.home_claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert second.home_claim["spec"]["resources"]["requests"]["storage"] == "80Gi"
    assert first.home_claim["spec"]["accessModes"] == ["ReadWriteOncePod"]
    assert first.home_claim["spec"]["storageClassName"] == "fast"
    assert second.home_snapshot["metadata"]["labels"]["workspace.component"] == "home-snapshot"


@pytest.mark.parametrize("server", ["thesis", "../x", "用户"])
def test_hostile_names_give_valid_names_that_never_collide(server):
    s = settings()
    seen_pods, seen_policies, seen_labels = {}, {}, {}
    for owner in HOSTILE:
        m = km.execution_manifests(s, inputs(owner=owner, server=server, rtype=A100, mounts=MOUNTS))
        for name in object_names(m):
            assert_dns_label(name)
        assert_label_values(m.labels)
        assert_label_values(m.network_policy["metadata"]["labels"])
        assert m.annotations["workspace.user"] == owner  # the exact name is kept
        validate(m.pod(s, "img"), "V1Pod")
        validate(m.network_policy, "V1NetworkPolicy")
        seen_pods.setdefault(m.pod_name, []).append(owner)
        seen_policies.setdefault(m.network_policy["metadata"]["name"], []).append(owner)
        seen_labels.setdefault(m.labels["workspace.user"], []).append(owner)
    for seen in (seen_pods, seen_policies, seen_labels):
        assert all(len(owners) == 1 for owners in seen.values()), seen
    # servers are told apart the same way
    pods = {km.pod_name("workspace", "ada", srv, 1) for srv in ["a.b", "a-b", "a_b", "A-B", "", "-"]}
    assert len(pods) == 6


def test_long_names_keep_a_readable_part_of_each():
    name = km.pod_name("workspace", "A" * 300, "B" * 300, 12345)
    assert len(name) <= 63 and "aaaa" in name and "bbbb" in name and name.endswith("-12345")
    assert km.label_value("") == ""
    assert km.label_value("用户") == km.digest("用户")  # nothing readable: the hash alone


# -- resources and placement -------------------------------------------------------------


def container(pod: dict) -> dict:
    return pod["spec"]["containers"][0]


def test_a_gpu_type_asks_the_device_plugin_for_its_cards_on_nodes_of_its_model():
    s = settings()
    m = km.execution_manifests(s, inputs(rtype=A100, limits={"cpu": 8, "memory": 64 << 30}, node="gpu-node-3"))
    expected = {"cpu": "8", "memory": "64Gi", "ephemeral-storage": "10Gi", "nvidia.com/gpu": "2"}
    assert m.resources == {"requests": expected, "limits": expected}
    terms = m.affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    # one term: model AND the admitted node (two terms would be OR)
    assert terms == [
        {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]},
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-node-3"]},
            ]
        }
    ]
    assert m.tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    env = {e["name"]: e["value"] for e in container(m.pod(s, "img", {"NVIDIA_VISIBLE_DEVICES": "0,1"}))["env"]}
    assert "NVIDIA_VISIBLE_DEVICES" not in env  # the device plugin's choice, not the hub's IDs

    mapped = settings(gpu_products={"A100": ("NVIDIA-A100-SXM4-80GB",)}, gpu_label="example.edu/gpu")
    term = km.node_selector_terms(mapped, inputs(rtype=A100))[0]
    assert term["matchExpressions"] == [
        {"key": "example.edu/gpu", "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB"]}
    ]


def test_a_cpu_type_gets_no_gpu_and_no_gpu_node():
    s = settings()
    m = km.execution_manifests(s, inputs(rtype=CPU, limits={"cpu": 0.5, "memory": (3 << 30) + 1}))
    assert m.resources["limits"] == {"cpu": "500m", "memory": "3073Mi", "ephemeral-storage": "10Gi"}
    assert m.resources["requests"] == m.resources["limits"]
    assert m.affinity is None and m.tolerations == []
    env = {e["name"]: e["value"] for e in container(m.pod(s, "img", {"NVIDIA_VISIBLE_DEVICES": "all"}))["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"  # no card through a default nvidia runtime
    unlimited = km.execution_manifests(settings(ephemeral_storage=None), inputs())
    assert unlimited.resources == {} and "resources" not in container(unlimited.pod(s, "img"))


def test_quantities():
    assert [km.cpu_quantity(c) for c in (1, 2.0, 0.5, 1.25, 0.001)] == ["1", "2", "500m", "1250m", "1m"]
    assert [km.bytes_quantity(b) for b in (1 << 30, 1, (1 << 30) + 1, 20 * (1 << 30))] == [
        "1Gi",
        "1Mi",
        "1025Mi",
        "20Gi",
    ]
    with pytest.raises(ValueError):
        km.cpu_quantity(0)


def test_the_pod_runs_unprivileged_without_cluster_credentials():
    s = settings()
    pod = km.execution_manifests(s, inputs(rtype=CPU)).pod(s, "img")
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["enableServiceLinks"] is False
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    sc = container(pod)["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}


def test_a_root_allowed_type_is_root_only_inside_a_user_namespace_of_its_pod():
    """#32: `hostUsers: false` maps the pod's uids to a range of its own (Kubernetes' user namespaces); it
    starts as that root (workspace-start writes the sudo rule, then runs as uid 1000), with the capabilities
    a package manager needs and no others, and a writable root (bounded by its ephemeral storage)."""
    s = settings()
    pod = km.execution_manifests(s, inputs(rtype=ROOTED)).pod(s, "img")
    assert pod["spec"]["hostUsers"] is False
    assert pod["spec"]["securityContext"]["runAsUser"] == 0 and pod["spec"]["securityContext"]["runAsNonRoot"] is False
    sc = container(pod)["securityContext"]
    assert sc["privileged"] is False and sc["readOnlyRootFilesystem"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    never = {"SYS_ADMIN", "MKNOD", "NET_ADMIN", "NET_RAW", "SYS_MODULE", "SYS_PTRACE", "DAC_READ_SEARCH"}
    assert not never & set(sc["capabilities"]["add"])
    traits = km.execution_manifests(s, inputs(rtype=ROOTED)).kubespawner_traits()
    assert traits["extra_pod_config"]["hostUsers"] is False
    # the other types: none of it
    plain = km.execution_manifests(s, inputs(rtype=CPU)).pod(s, "img")
    assert "hostUsers" not in plain["spec"] and plain["spec"]["securityContext"]["runAsNonRoot"] is True


def test_the_root_is_read_only_and_the_scratch_space_is_memory_with_a_size():
    """#28: the writable layer and /tmp filled the node's disk; the pod writes only where a size bounds it."""
    s = settings()
    m = km.execution_manifests(s, inputs(rtype=CPU))  # 4 GB of memory: the tmpfs mounts take at most half
    pod = m.pod(s, "img")
    assert container(pod)["securityContext"]["readOnlyRootFilesystem"] is True
    scratch = {v["name"]: v["emptyDir"] for v in m.volumes if "emptyDir" in v}
    paths = {v["mountPath"]: scratch[v["name"]] for v in m.volume_mounts if v["name"] in scratch}
    assert paths == {
        "/run/workspace": {"medium": "Memory", "sizeLimit": "16Mi"},
        "/tmp": {"medium": "Memory", "sizeLimit": "1Gi"},
        "/var/tmp": {"medium": "Memory", "sizeLimit": "256Mi"},
    }
    small = km.execution_manifests(s, inputs(limits={"cpu": 1, "memory": 512 << 20}))
    # 512 MB: 1 GB + 256 MB + 16 MB scaled down alike to 256 MB together
    assert [v["emptyDir"]["sizeLimit"] for v in small.volumes if "emptyDir" in v] == ["4Mi", "203Mi", "51Mi"]
    validate(pod, "V1Pod")
    off = km.execution_manifests(settings(read_only_root=False), inputs(rtype=CPU))
    assert not any("emptyDir" in v for v in off.volumes)
    assert off.container_security_context["readOnlyRootFilesystem"] is False


# -- datasets --------------------------------------------------------------------------------


def test_dataset_versions_are_read_only_clones_of_their_snapshots():
    s = settings()
    m = km.execution_manifests(s, inputs(rtype=CPU, mounts=MOUNTS))
    assert [c["spec"]["accessModes"] for c in m.dataset_claims] == [["ReadOnlyMany"], ["ReadOnlyMany"]]
    assert [c["spec"]["dataSource"]["name"] for c in m.dataset_claims] == [
        "workspace-dataset-d" + HEX,
        "workspace-dataset-d" + HEX[::-1],
    ]
    # the clone is as large as the plan says (a clone below the snapshot's size is refused), else the default
    assert [c["spec"]["resources"]["requests"]["storage"] for c in m.dataset_claims] == ["1Gi", "5Gi"]
    assert [c["metadata"]["annotations"]["workspace.dataset"] for c in m.dataset_claims] == [
        "prof/mnist:2",
        "prof/labels:1",
    ]
    mounts = {v["mountPath"]: v for v in m.volume_mounts}
    assert mounts["/input0"]["readOnly"] is True and mounts["/input1"]["readOnly"] is True
    assert "readOnly" not in mounts["/openbayes/home"]
    volumes = {v["name"]: v for v in m.volumes}
    claims = {c["metadata"]["name"] for c in m.dataset_claims}
    for slot in (0, 1):
        source = volumes[mounts[f"/input{slot}"]["name"]]["persistentVolumeClaim"]
        assert source["readOnly"] is True and source["claimName"] in claims


def test_a_shared_datasets_claim_is_mounted_read_only_by_version():
    s = settings(datasets_claim="workspace-datasets")
    m = km.execution_manifests(s, inputs(rtype=CPU, mounts=MOUNTS))
    assert m.dataset_claims == []
    assert {"name": "datasets", "persistentVolumeClaim": {"claimName": "workspace-datasets", "readOnly": True}} in (
        m.volumes
    )
    inputs_ = [v for v in m.volume_mounts if v["mountPath"].startswith("/input")]
    assert inputs_ == [
        {"name": "datasets", "mountPath": "/input0", "subPath": "d" + HEX, "readOnly": True},
        {"name": "datasets", "mountPath": "/input1", "subPath": "d" + HEX[::-1], "readOnly": True},
    ]
    none = km.execution_manifests(s, inputs(rtype=CPU))
    assert [v["name"] for v in none.volumes if not v["name"].startswith("scratch")] == ["home"]


# -- the owner's network -----------------------------------------------------------------


def matches(selector: dict, labels: dict) -> bool:
    assert set(selector) <= {"matchLabels"}, "only matchLabels are expected here"
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def admitted(rules: list[dict], side: str, labels: dict) -> bool:
    """Whether a pod of this namespace with `labels` is a peer of any rule (ports aside)."""
    return any(
        "podSelector" in peer and "namespaceSelector" not in peer and matches(peer["podSelector"], labels)
        for rule in rules
        for peer in rule[side]
    )


def test_the_owner_network_lets_an_owner_s_workspaces_and_the_hub_in_and_nobody_else():
    s = settings()
    ada = km.execution_manifests(s, inputs(owner="ada", number=1))
    ada_other = km.execution_manifests(s, inputs(owner="ada", server="other", number=4)).labels
    bob = km.execution_manifests(s, inputs(owner="bob", number=1)).labels
    ada_lookalike = km.execution_manifests(s, inputs(owner="Ada", number=1)).labels
    hub = {"app": "jupyterhub", "component": "hub", "release": "jhub"}
    proxy = {"app": "jupyterhub", "component": "proxy"}
    spec = ada.network_policy["spec"]

    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert matches(spec["podSelector"], ada.labels) and matches(spec["podSelector"], ada_other)
    assert not matches(spec["podSelector"], bob) and not matches(spec["podSelector"], ada_lookalike)
    # no peer is an empty selector (which would mean every pod)
    peers = [p for rule in spec["ingress"] for p in rule["from"]] + [p for rule in spec["egress"] for p in rule["to"]]
    assert all(p.get("podSelector") != {} and p.get("namespaceSelector") != {} for p in peers)

    for who, allowed in [(ada_other, True), (hub, True), (proxy, True), (bob, False), (ada_lookalike, False)]:
        assert admitted(spec["ingress"], "from", who) is allowed, who
    hub_rule = next(r for r in spec["ingress"] if any(matches(p["podSelector"], hub) for p in r["from"]))
    assert hub_rule["ports"] == [{"protocol": "TCP", "port": 8888}]  # the hub and proxy reach the server only
    for who, allowed in [(ada_other, True), (hub, True), (bob, False), (proxy, False)]:
        assert admitted(spec["egress"], "to", who) is allowed, who
    blocks = [p["ipBlock"] for rule in spec["egress"] for p in rule["to"] if "ipBlock" in p]
    assert blocks[0] == {"cidr": "0.0.0.0/0", "except": list(km.PRIVATE_V4)}
    assert "10.0.0.0/8" in blocks[0]["except"] and "169.254.0.0/16" in blocks[0]["except"]

    assert {"203.0.113.0/24", "192.0.2.0/24", "127.0.0.0/8", "224.0.0.0/4"} <= set(blocks[0]["except"])
    assert {"fc00::/7", "fe80::/10", "ff00::/8"} <= set(blocks[1]["except"])

    closed = km.owner_network_policy(settings(internet=False), "ada")["spec"]
    assert not [p for rule in closed["egress"] for p in rule["to"] if "ipBlock" in p]


def test_a_site_allows_a_private_destination_to_workspaces_on_kubernetes():
    policy = km.owner_network_policy(settings(allowed=("10.20.0.5:27000", "10.30.0.0/16")), "ada")
    validate(policy, "V1NetworkPolicy")
    rules = policy["spec"]["egress"]
    license_server = {
        "to": [{"ipBlock": {"cidr": "10.20.0.5/32"}}],
        "ports": [{"protocol": "TCP", "port": 27000}, {"protocol": "UDP", "port": 27000}],
    }
    assert license_server in rules
    assert {"to": [{"ipBlock": {"cidr": "10.30.0.0/16"}}]} in rules
    with pytest.raises(ValueError, match="Egress.allowed"):
        km.owner_network_policy(settings(allowed=("campus-mirror",)), "ada")


# -- KubeSpawner, and what is refused -------------------------------------------------------


def test_the_kubespawner_traits_make_the_same_pod():
    s = settings()
    m = km.execution_manifests(s, inputs(rtype=A100, mounts=MOUNTS, limits={"cpu": 1.5, "memory": 8 << 30}))
    t = m.kubespawner_traits()
    pod = m.pod(s, "img")
    assert t["volumes"] == pod["spec"]["volumes"] and t["volume_mounts"] == container(pod)["volumeMounts"]
    limits = container(pod)["resources"]["limits"]
    assert km.cpu_quantity(t["cpu_limit"]) == limits["cpu"] == "1500m" and t["cpu_guarantee"] == t["cpu_limit"]
    assert km.bytes_quantity(t["mem_limit"]) == limits["memory"] == "8Gi"
    assert t["extra_resource_limits"] == {"ephemeral-storage": "10Gi", "nvidia.com/gpu": "2"}
    assert t["extra_resource_guarantees"] == t["extra_resource_limits"]
    assert t["node_affinity_required"] == km.node_selector_terms(s, inputs(rtype=A100))
    assert t["storage_pvc_ensure"] is False and t["automount_service_account_token"] is False
    assert t["extra_labels"] == pod["metadata"]["labels"] and t["pod_name"] == pod["metadata"]["name"]


def test_a_replica_serves_its_output_read_only_on_its_port_to_the_hub_alone():
    """A deployment's replica (#33): what it serves cloned read-only at /openbayes/output, its app's port on
    the pod (and in KubeSpawner's container), reached from the hub's pod (the router) on that port only,
    and its home never saved."""
    s = settings()
    m = km.execution_manifests(s, inputs(rtype=CPU, serve=km.Serving(8080, "s" + HEX, 2 << 30)))
    pod = m.pod(s, "img")
    assert {"name": "app", "containerPort": 8080} in container(pod)["ports"]
    assert m.kubespawner_traits()["extra_container_config"]["ports"] == container(pod)["ports"]
    output = next(v for v in container(pod)["volumeMounts"] if v["mountPath"] == "/openbayes/output")
    assert output["readOnly"] is True
    claim = next(v for v in pod["spec"]["volumes"] if v["name"] == output["name"])["persistentVolumeClaim"]
    assert claim == {"claimName": m.output_claim["metadata"]["name"], "readOnly": True}
    assert m.output_claim["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert m.output_claim["spec"]["dataSource"]["name"] == km.home_snapshot_name(s.deployment, "s" + HEX)
    assert m.output_claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert not m.saves_home
    policy = m.serve_network_policy["spec"]
    assert policy["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": dict(s.hub_selector)}}], "ports": [{"protocol": "TCP", "port": 8080}]}
    ]
    # this pod alone: its execution's labels, which no other pod has
    selected = policy["podSelector"]["matchLabels"]
    assert selected.items() <= pod["metadata"]["labels"].items() and selected["workspace.execution"] == "101"
    # a workspace has none of it
    plain = km.execution_manifests(s, inputs(rtype=CPU))
    assert plain.output_claim is None and plain.serve_network_policy is None and plain.saves_home
    assert [p["name"] for p in container(plain.pod(s, "img"))["ports"]] == ["notebook-port"]
    with pytest.raises(ValueError, match="store key"):
        km.execution_manifests(s, inputs(serve=km.Serving(8080, "../s1")))


def test_what_cannot_be_named_is_refused():
    with pytest.raises(ValueError, match="deployment"):
        settings(deployment="Workspace!")
    with pytest.raises(ValueError, match="deployment"):
        settings(deployment="a-very-long-deployment-name")
    with pytest.raises(ValueError, match="store key"):
        km.execution_manifests(settings(), inputs(restore_snapshot="../s1"))
    with pytest.raises(ValueError, match="dataset key"):
        km.execution_manifests(settings(), inputs(mounts=({"slot": 0, "mount": "/input0", "key": "D/x"},)))
    tesla = ResourceType.from_config({"name": "v100", "gpus": 1, "gpu_model": "Tesla V100"})
    with pytest.raises(ValueError, match="gpu_products"):
        km.execution_manifests(settings(), inputs(rtype=tesla))
    ok = km.execution_manifests(settings(gpu_products={"Tesla V100": ("Tesla-V100-SXM2-16GB",)}), inputs(rtype=tesla))
    assert ok.affinity is not None


# -- the example in docs/kubernetes.md ------------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"


def example() -> list[tuple[str, dict]]:
    """The documented example: #2 of ada/thesis continuing from #1, one A100, one dataset, on gpu-node-3."""
    s = km.ClusterSettings(namespace="workspaces", snapshot_class="csi-snapclass", storage_class="ceph-rbd")
    a100 = ResourceType.from_config(
        {"name": "a100", "cpu": 8, "memory": "64G", "gpus": 1, "gpu_model": "A100", "home_size": "50G"}
    )
    x = km.ExecutionInputs(
        owner="ada",
        server="thesis",
        execution_id=412,
        number=2,
        live_key="x7f3c2a9e4b1d4c8e9a0b6d5e4f3a2b1c",
        snapshot_key="s7f3c2a9e4b1d4c8e9a0b6d5e4f3a2b1c",
        image="registry.uni.example.edu/workspace-base:2026.1",
        restore_snapshot="s0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        restore_size=50 << 30,
        rtype=a100,
        limits={"cpu": 8, "memory": 64 << 30},
        mounts=({"slot": 0, "mount": "/input0", "ref": "prof/mnist:2", "key": "d5e6f708192a3b4c5d6e7f8091a2b3c4d"},),
        node="gpu-node-3",
    )
    m = km.execution_manifests(s, x)
    env = {"HOME": "/openbayes/home", "WORKSPACE_EXECUTION": "2"}
    return [
        ("the owner's network, ensured before the owner's first pod", m.network_policy),
        ("the home: a clone of #1's snapshot, made by the restore", m.home_claim),
        ("dataset slot 0: a read-only clone of the version's snapshot", m.dataset_claims[0]),
        ("the pod (KubeSpawner makes it from kubespawner_traits(); its own env left out)", m.pod(s, x.image, env)),
        ("the save, at stop, once the pod is gone", m.home_snapshot),
    ]


def render_example() -> str:
    return "---\n".join(f"# {title}\n" + yaml.safe_dump(obj, sort_keys=False, width=110) for title, obj in example())


def test_the_example_in_the_design_is_what_the_module_makes():
    block = DOC.read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    assert block == render_example(), f"docs/kubernetes.md's example is stale; it should read:\n{render_example()}"
    for _, obj in example()[:-1]:
        validate(obj, f"V1{obj['kind']}")
