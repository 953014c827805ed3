"""One Docker network per owner: a student's workspaces reach each other, nobody else's.

Docker isolates bridge networks from each other (its DOCKER-ISOLATION
chains), so a container on one owner's network cannot open a connection to
another owner's container, its Jupyter server or its extension. The host
stays reachable, and with it the hub's API on the docker0 gateway, which
is all a workspace needs.

Each network gets an explicit subnet from a pool (default 10.213.0.0/16 in
/27s, 2,048 owners running at once), so the daemon's small default pool of
about 30 networks is never the limit. A network is removed when its
owner's last workspace stops.

On a Docker Swarm the network is an attachable overlay (SwarmWorkspaceSpawner):
an owner's workspaces on different nodes reach each other by name, and
overlays are isolated from each other as bridges are (measured on the
three-node swarm: another owner's workspace on the same node does not answer).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import socket
import time

import docker

from workspace import egress

LABEL = "workspace.owner-network"


def name_for(deployment: str, owner: str) -> str:
    """A Docker network name for an owner: readable, and unique even for names Docker cannot spell."""
    slug = re.sub(r"[^a-zA-Z0-9_.-]", "-", owner)[:40]
    digest = hashlib.sha256(owner.encode()).hexdigest()[:8]
    return f"{deployment}-net-{slug}-{digest}"


def bridge_prefix(deployment: str) -> str:
    """The first characters of the bridge of every owner network of `deployment`: the egress rules
    (workspace/egress.py) guard them all, those made later too, with one wildcard (`wsab12c+`)."""
    return "ws" + hashlib.sha256(deployment.encode()).hexdigest()[:5]


def bridge_name(deployment: str, owner: str) -> str:
    """An owner network's bridge interface (15 characters at most, as Linux allows)."""
    return bridge_prefix(deployment) + hashlib.sha256(owner.encode()).hexdigest()[:8]


def bridges(client, deployment: str) -> list[str]:
    """The bridges of the deployment's owner networks on this engine (those made before their bridges were
    named by us are `br-<id>`) (blocking)."""
    out = []
    for net in _client(client).networks(filters={"label": [f"workspace.deployment={deployment}", LABEL]}):
        if net.get("Driver") != "bridge":
            continue
        named = (net.get("Options") or {}).get("com.docker.network.bridge.name")
        out.append(named or f"br-{net['Id'][:12]}")
    return out


def bridge_of(client, name: str) -> str:
    """The bridge interface of network `name` (`docker0` for Docker's default one) (blocking)."""
    info = _client(client).inspect_network(name)
    return (info.get("Options") or {}).get("com.docker.network.bridge.name") or f"br-{info['Id'][:12]}"


def _client(client) -> docker.APIClient:
    return client.api if isinstance(client, docker.DockerClient) else client


def ensure(client, deployment: str, owner: str, pool: str, prefix: int, driver: str = "bridge") -> str:
    """The owner's network, created if missing (blocking); its name. `driver`: `bridge` on one engine,
    `overlay` (attachable, created through a swarm's manager) across nodes."""
    api = _client(client)
    name = name_for(deployment, owner)
    if _listed(api, name, 0):
        return name
    subnets = list(ipaddress.ip_network(pool).subnets(new_prefix=prefix))
    start = int(hashlib.sha256(owner.encode()).hexdigest(), 16) % len(subnets)
    last_error = None
    for i in range(min(len(subnets), 256)):  # the owner's own slot, or the next free ones
        subnet = subnets[(start + i) % len(subnets)]
        # the gateway said explicitly: Docker 20.10+ records none for a network made with only a subnet, and
        # the host's address on it limits where the SSH gateway's key is accepted from (gateway_address)
        pool_config = docker.types.IPAMPool(subnet=str(subnet), gateway=str(next(subnet.hosts())))
        ipam = docker.types.IPAMConfig(pool_configs=[pool_config])
        try:
            api.create_network(
                name,
                driver=driver,
                attachable=driver == "overlay" or None,
                # named by us, so the egress rules name every owner network of the deployment at once
                options={"com.docker.network.bridge.name": bridge_name(deployment, owner)}
                if driver == "bridge"
                else None,
                ipam=ipam,
                check_duplicate=True,
                labels={LABEL: owner, "workspace.deployment": deployment},
            )
            return name
        except docker.errors.APIError as e:
            text = str(e).lower()
            # another start of the owner's made it meanwhile: Docker says "already exists", or (a second
            # create racing the first) that the bridge name is taken, the bridge being named after the owner
            # (then the first's network may be listed a moment later only: seen failing under load)
            if "already exists" in text or "same bridge name" in text:
                if _listed(api, name, RACE_WAIT_S):
                    return name
            elif _listed(api, name, 0):
                return name
            if "overlap" not in text:
                raise
            last_error = e
    raise RuntimeError(f"no free subnet for the network of {owner} in {pool}: {last_error}")


RACE_WAIT_S = 10.0  # how long a start that lost the race to create its owner's network waits to see it


def _listed(api, name: str, wait: float) -> bool:
    """Whether the engine lists a network named `name`, asking again for up to `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        if any(n["Name"] == name for n in api.networks(names=[name])):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def gateway_address(client, name: str) -> str | None:
    """The address the host has on network `name` (its gateway), where the host's connections
    into the network come from; None when the network has none (blocking). Where Docker records no
    gateway (20.10+, for the default bridge and a network made with only a subnet) it is the subnet's
    first address, which the bridge driver gives the host."""
    try:
        info = _client(client).inspect_network(name)
    except docker.errors.NotFound:
        return None
    pools = (info.get("IPAM") or {}).get("Config") or []
    for pool in pools:
        if pool.get("Gateway"):
            return pool["Gateway"].split("/")[0]
    for pool in pools:
        subnet = ipaddress.ip_network(pool.get("Subnet") or "::/128", strict=False)
        if subnet.version == 4 and subnet.num_addresses > 2:
            return str(next(subnet.hosts()))
    return None


def source_towards(address: str) -> str | None:
    """The address this machine sends from towards `address` (its route's source; no packet is sent),
    where a connection it opens there comes from unless something translates it; None without a route."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((address, 9))
            return s.getsockname()[0]
    except (OSError, ValueError):
        return None


def guard(
    client, deployment: str, owner_networks: bool, network_name: str, hub: tuple[str, int], allowed
) -> egress.Policy:
    """The rules of the deployment's workspaces in place (idempotent): on its owner networks (every one,
    those made later too), or on `network_name` when owners share it; the policy applied."""
    if owner_networks:
        prefix = bridge_prefix(deployment)
        interfaces = [f"{prefix}+"] + [b for b in bridges(client, deployment) if not b.startswith(prefix)]
    else:
        interfaces = [bridge_of(client, network_name)]
    policy = egress.Policy(
        chain=egress.chain_name(deployment),
        interfaces=interfaces,
        dns=egress.nameservers(),
        allowed=egress.parse_allowed(allowed),
        host_nets=egress.host_networks(),
        hub=hub,
    )
    egress.apply(policy)
    return policy


def remove_if_unused(client, deployment: str, owner: str) -> bool:
    """Remove the owner's network if no container is on it (blocking); True if it went or was not there,
    False while something uses it."""
    api = _client(client)
    name = name_for(deployment, owner)
    for net in api.networks(names=[name]):
        if net["Name"] != name:
            continue
        if api.inspect_network(net["Id"]).get("Containers"):
            return False
        try:
            api.remove_network(net["Id"])
            return True
        except docker.errors.NotFound:
            return True  # removed meanwhile (another stop of the owner's)
        except docker.errors.APIError as e:
            # in use: a container on this engine, or (an overlay) a task of the swarm's
            if "active endpoints" in str(e) or "in use" in str(e) or e.status_code in (403, 409):
                return False
            raise
    return True


def remove_all(client, deployment: str) -> int:
    """Remove every owner network of a deployment that no container uses (make down, tests)."""
    api = _client(client)
    gone = 0
    for net in api.networks(filters={"label": [f"workspace.deployment={deployment}", LABEL]}):
        try:
            api.remove_network(net["Id"])
            gone += 1
        except docker.errors.APIError:
            pass
    return gone
