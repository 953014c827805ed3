"""The names and quantities of an execution's Kubernetes objects (workspace/spawner/kubernetes.py).

Store keys are safe already and used as they are, so an object is found from its
record; names made from user and server names, which may be anything, are a
readable slug plus a hash of the exact name, so two names never share an object.
Label values are made the same way.
"""

from __future__ import annotations

import hashlib
import json
import re

# RFC 1123 label; an object name here also starts with a letter (RFC 1035), as Services need
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
STORE_KEY = re.compile(r"^[a-z0-9]{1,40}$")  # live, snapshot and dataset keys: x…, s…, d… + hex

HASH_LENGTH = 10  # hex digits of the hash that makes an escaped name unique (40 bits)


# -- names ------------------------------------------------------------------------------


def slug(text: str, max_length: int = 63) -> str:
    """The readable part of a name: lower-case ASCII letters and digits, every other run one '-'.

    Lossy (`Ada`, `ada` and `a.d.a` are alike here); `digest` tells them apart.
    """
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:max_length].strip("-")


def digest(*parts: str, length: int = HASH_LENGTH) -> str:
    """A short hash of the exact parts (unambiguous: ("a-", "b") and ("a", "-b") differ)."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:length]


def escaped_name(prefix: str, readable: list[str], identity: list[str], suffix: str = "") -> str:
    """A DNS label `prefix-<slugs>-<hash of identity>[-suffix]` of at most 63 characters.

    `prefix` is ours (valid already); `readable` parts are shortened evenly to fit.
    """
    tail = digest(*identity) + (f"-{suffix}" if suffix else "")
    room = 63 - len(prefix) - len(tail) - 2
    if room < 0 or not DNS_LABEL.match(prefix):
        raise ValueError(f"cannot make a name from prefix {prefix!r} and suffix {suffix!r}")
    share = room // max(1, len(readable)) - 1
    middle = "-".join(s for s in (slug(r, max(share, 0)) for r in readable) if s)[:room].strip("-")
    return "-".join(p for p in (prefix, middle, tail) if p)


def key_name(deployment: str, kind: str, key: str) -> str:
    """The name of an object that holds a store key: `deployment-kind-key`."""
    if not STORE_KEY.match(key):
        raise ValueError(f"invalid store key {key!r}")
    name = f"{deployment}-{kind}-{key}"
    if not DNS_LABEL.match(name):
        raise ValueError(f"{name!r} is not a valid object name")
    return name


def label_value(text: str) -> str:
    """A label value for any text: '' stays '', else a slug plus the hash of the exact text."""
    if not text:
        return ""
    head = slug(text, 63 - HASH_LENGTH - 1)
    return f"{head}-{digest(text)}" if head else digest(text)


def home_claim_name(deployment: str, live_key: str) -> str:
    return key_name(deployment, "home", live_key)


def home_snapshot_name(deployment: str, snapshot_key: str) -> str:
    return key_name(deployment, "home", snapshot_key)


def dataset_snapshot_name(deployment: str, version_key: str) -> str:
    """The VolumeSnapshot a dataset version is kept as (made when the version is published)."""
    return key_name(deployment, "dataset", version_key)


def dataset_claim_name(deployment: str, live_key: str, slot: int) -> str:
    """The read-only clone of a dataset version for one execution's slot."""
    return key_name(deployment, f"input{int(slot)}", live_key)


def output_claim_name(deployment: str, live_key: str) -> str:
    """The read-only clone of what a deployment's replica serves (#33), for that execution."""
    return key_name(deployment, "output", live_key)


def serve_policy_name(deployment: str, live_key: str) -> str:
    """The NetworkPolicy that lets the router reach a replica's app (#33)."""
    return key_name(deployment, "serve", live_key)


def pod_name(deployment: str, owner: str, server: str, number: int) -> str:
    return escaped_name(deployment, [owner, server], [owner, server], suffix=str(int(number)))


def network_policy_name(deployment: str, owner: str) -> str:
    return escaped_name(f"{deployment}-owner", [owner], [owner])


# -- quantities -------------------------------------------------------------------------


def cpu_quantity(cores: float) -> str:
    """Cores as a Kubernetes quantity: `2`, `500m`."""
    millis = round(cores * 1000)
    if millis <= 0:
        raise ValueError(f"invalid CPU count {cores!r}")
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def bytes_quantity(size: int) -> str:
    """Bytes as a quantity, rounded up to whole MiB: `20Gi`, `1536Mi`."""
    if size <= 0:
        raise ValueError(f"invalid size {size!r}")
    mib = -(-int(size) // (1 << 20))
    return f"{mib >> 10}Gi" if mib % 1024 == 0 else f"{mib}Mi"
