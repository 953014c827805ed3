"""The network image builds run on: the internet (apt and pip mirrors), nothing of the site's.

A build runs a user's post-build script as the container's root, so its
network is the hostile part: it must reach Debian's mirrors and PyPI but not
the hub (8081 on the docker bridge), the proxy, the service, the other
containers, the site's private networks or the cloud's metadata address. It is
a bridge network of its own (its interface named, so rules can name it) with
two sets of iptables rules, made idempotently before every build:

- INPUT from its bridge is rejected: nothing listening on the host itself
  (every address of it) answers a build;
- a chain of ours, jumped to from Docker's DOCKER-USER for traffic from the
  bridge, lets DNS through to the host's own resolvers (the engine's embedded
  DNS forwards from the container) and the site's `allowed_networks` (a
  package mirror on campus), then rejects every non-global destination.

No rule can be made (no iptables, no root): no build runs. Fail closed.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
from pathlib import Path

import docker

from .errors import UserError
from .i18n import N_

CHAIN = "WORKSPACE-BUILD"
# the ranges a site's own hosts live in (RFC 6890): private, shared, loopback, link-local (the cloud's
# metadata address), benchmarking, multicast and reserved. The documentation ranges (TEST-NET-1..3) are not
# routed on the internet, and some sandboxes put their egress proxy there (this project's machines reach
# PyPI and Debian through 203.0.113.80), so they pass.
PRIVATE = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
UNAVAILABLE = N_(
    "Image builds are not available on this server: its build network cannot be isolated. "
    "Please tell your administrator."
)


def nameservers(resolv_conf: str = "/etc/resolv.conf") -> list[str]:
    """The host's IPv4 resolvers that the engine's DNS forwards to (loopback ones are the host's own and
    unreachable from a container anyway)."""
    try:
        text = Path(resolv_conf).read_text()
    except OSError:
        return []
    found = []
    for m in re.finditer(r"^\s*nameserver\s+(\S+)", text, re.M):
        try:
            ip = ipaddress.ip_address(m.group(1))
        except ValueError:
            continue
        if ip.version == 4 and not ip.is_loopback:
            found.append(str(ip))
    return found


def rules(bridge: str, dns: list[str], allowed: list[str]) -> list[list[str]]:
    """The chain's rules, in order (each an iptables argument list after `-A CHAIN`)."""
    out = []
    for server in dns:
        for proto in ("udp", "tcp"):
            out.append(["-i", bridge, "-d", server, "-p", proto, "--dport", "53", "-j", "RETURN"])
    for net in allowed:
        out.append(["-i", bridge, "-d", str(ipaddress.ip_network(net, strict=False)), "-j", "RETURN"])
    for net in PRIVATE:
        out.append(["-i", bridge, "-d", net, "-j", "REJECT"])
    return out


def _iptables(*args: str, check: bool = True) -> bool:
    result = subprocess.run(["iptables", "-w", "5", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise UserError(503, UNAVAILABLE, detail=f"iptables {' '.join(args)}: {result.stderr.strip()}")
    return result.returncode == 0


def ensure(client, name: str, bridge: str, allowed: list[str]) -> str:
    """The build network (made if missing) with its rules in place; its name. The user's 503 if the rules
    cannot be made (blocking)."""
    if shutil.which("iptables") is None:
        raise UserError(503, UNAVAILABLE, detail="iptables is not installed")
    try:
        client.networks.get(name)
    except docker.errors.NotFound:
        try:
            client.networks.create(
                name, driver="bridge", options={"com.docker.network.bridge.name": bridge}, check_duplicate=True
            )
        except docker.errors.APIError as e:
            if e.status_code != 409:  # made by another build at the same time
                raise
    if not _iptables("-C", "INPUT", "-i", bridge, "-j", "REJECT", check=False):
        _iptables("-I", "INPUT", "1", "-i", bridge, "-j", "REJECT")
    if not _iptables("-n", "-L", CHAIN, check=False):
        _iptables("-N", CHAIN)
    wanted = rules(bridge, nameservers(), allowed)
    # refilled only when a rule is missing (a flush would leave a running build unguarded for a moment)
    if not all(_iptables("-C", CHAIN, *rule, check=False) for rule in wanted):
        _iptables("-F", CHAIN)
        for rule in wanted:
            _iptables("-A", CHAIN, *rule)
    if not _iptables("-C", "DOCKER-USER", "-i", bridge, "-j", CHAIN, check=False):
        _iptables("-I", "DOCKER-USER", "1", "-i", bridge, "-j", CHAIN)
    return name
