"""What a workspace's processes may do: nothing beyond their own files, or root inside a user namespace (#32).

Every default type runs its container as uid 1000 with no capability at all
and (on a single engine) `no-new-privileges`. A type with `root`
(resource_types.py) runs on a node whose engine keeps containers in a user
namespace (`userns-remap`): the container starts as its root, writes a sudo
rule for uid 1000 (images/base/rootfs/usr/local/bin/workspace-start), and drops
to uid 1000 for the server, so that `sudo apt-get install` works in its
terminals. The capabilities it keeps are those a package manager needs, and
they are the user namespace's: host root is never involved (SECURITY.md, "Root
inside").
"""

from __future__ import annotations

# What dpkg and apt use (ownership and modes of the files they unpack, apt's switch to its `_apt` user, signals
# to the daemons they restart, a low port for a service one installs), Docker's default set without MKNOD (no
# device files), NET_RAW (no forged packets on the owner's network), SETFCAP, SETPCAP and SYS_CHROOT.
ROOT_CAPABILITIES = (
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "NET_BIND_SERVICE",
    "AUDIT_WRITE",
)

ROOT_ENV = "WORKSPACE_ROOT"  # workspace-start: write the sudo rule, then drop to uid 1000


def swarm_container(root: bool) -> dict:
    """The `ContainerSpec` arguments of a swarm task for a type with or without `root`."""
    if not root:
        return {"cap_drop": ["ALL"]}  # the student runs any code here
    return {"user": "0:0", "cap_drop": ["ALL"], "cap_add": list(ROOT_CAPABILITIES)}


def pod_security(uid: int, gid: int, read_only_root: bool, root: bool) -> tuple[dict, dict, dict]:
    """(the pod's, the container's security context, more of the pod's spec) on Kubernetes: a root-allowed
    pod gets its own user namespace (`hostUsers: false`, Kubernetes' user namespaces, which map each pod to
    a range of its own), the others none of the ways up."""
    pod = {
        "runAsUser": 0 if root else uid,
        "runAsGroup": 0 if root else gid,
        "runAsNonRoot": not root,
        "fsGroup": gid,
        # a restored home has the right owner already: no recursive chown of a large home at every start
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = {
        "allowPrivilegeEscalation": root,  # sudo is setuid
        "capabilities": {"drop": ["ALL"], **({"add": list(ROOT_CAPABILITIES)} if root else {})},
        "privileged": False,
        "readOnlyRootFilesystem": read_only_root and not root,  # apt-get writes /usr and /var
    }
    return pod, container, ({"hostUsers": False} if root else {})
