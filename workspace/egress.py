"""Where workspaces and image builds may connect: the internet, not the site's own networks.

A student runs any code in a workspace, and a build runs an owner's script as
the container's root, so both are hostile clients of the network. Left to
Docker they reach everything the host reaches: the campus network, the cloud's
metadata address (169.254.169.254 hands out the machine's credentials), the
host's own services. The rules here let them reach the internet and nothing
else, unless the site allows a destination (`Egress.allowed`: a campus proxy,
a license server, a package mirror).

Two chains of ours per guarded set of bridges, for IPv4 and IPv6 alike:

- `<chain>` (jumped to from Docker's DOCKER-USER, which Docker never
  rewrites, for traffic coming in on the guarded bridges): replies to
  connections made from outside, the guarded bridges themselves (Docker's own
  isolation then decides: an owner's workspaces reach each other, SSH on
  2222, and nobody else's), DNS to the engine's resolvers, the allowed
  destinations; then REJECT for the private, shared, loopback, link-local,
  documentation, benchmarking, multicast and reserved ranges and every
  network the host has an address in;
- `<chain>-IN` (jumped to from INPUT: the host's own addresses are not
  forwarded): replies, the hub's API (`hub_connect_ip`:`hub_port`, what a
  workspace calls), DNS, the allowed destinations; REJECT for the rest.

The bridges are named by us (networks.bridge_prefix: every owner network of a
deployment is `ws<5 hex>…`, the build network `ws-build0`), so one wildcard
rule guards the networks made later too; the rules are made idempotently at
the hub's start, before each start of a workspace and before each build.
A rule that cannot be made stops the start or the build (fail closed).

On a Docker Swarm the hub cannot make them: a workspace's traffic leaves its
node through that node's `docker_gwbridge` (an overlay carries only the
traffic between containers), so the same two chains are made on every node,
keyed on `-i docker_gwbridge`, with the hub's address:port let through as a
forwarded destination (it is not the node's own): `python -m workspace.egress
node --hub ADDR:PORT [--allowed DEST ...]` on each node (docs/swarm.md), and
the test cluster (workspace/setup/cluster.py) in each node's network
namespace. Every function that runs iptables takes `prefix`, a command put
before it (`ip netns exec node2`), so a namespace gets the same rules by the
same code.
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from traitlets import Bool, List, Unicode
from traitlets.config import Configurable

# RFC 6890 and its successors: every range that is not the public internet. The documentation and
# benchmarking ranges are not routed on the internet either; a site whose own proxy lives in one allows it.
BLOCKED = {
    4: (
        "0.0.0.0/8",  # this network
        "10.0.0.0/8",  # RFC 1918
        "100.64.0.0/10",  # shared address space (carrier-grade NAT)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, with the cloud's metadata address 169.254.169.254
        "172.16.0.0/12",  # RFC 1918
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # 6to4 relays (deprecated)
        "192.168.0.0/16",  # RFC 1918
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast address
    ),
    6: (
        "::/127",  # unspecified and loopback
        "::ffff:0:0/96",  # IPv4-mapped (the IPv4 rules decide)
        "64:ff9b::/96",  # NAT64: an IPv4 address behind it may be private
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard
        "2001::/23",  # IETF protocol assignments (Teredo, benchmarking, ORCHID)
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4: an IPv4 address inside may be private
        "3fff::/20",  # documentation
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "ff00::/8",  # multicast
    ),
}
RESOLV_CONFS = ("/etc/resolv.conf", "/run/systemd/resolve/resolv.conf")


class EgressError(RuntimeError):
    """The rules could not be made (no iptables, no right to change them)."""


class Egress(Configurable):
    """Configured as `c.Egress.*`: what workspaces and image builds may reach besides the internet."""

    enabled = Bool(
        True,
        config=True,
        help="""Keep workspaces and image builds off the site's networks with
        iptables rules (Docker's DOCKER-USER and INPUT chains). Off only where
        the site filters their traffic elsewhere: without the rules a student
        reaches the campus network and the cloud's metadata address.""",
    )
    allowed = List(
        Unicode(),
        config=True,
        help="""Destinations workspaces and image builds may reach although
        they are private, link-local, documentation or the host's own: a
        network or an address, with a port or not, like `10.20.0.0/24`
        (a campus package mirror), `10.20.0.5:27000` (a license server,
        TCP and UDP) or `[fd00::8]:3128` (a proxy). Everything else that is
        not the public internet is refused.""",
    )


@dataclass(frozen=True)
class Destination:
    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    port: int | None = None

    @property
    def version(self) -> int:
        return self.network.version


def parse_allowed(entries) -> list[Destination]:
    """`Egress.allowed` parsed; a ValueError naming the entry on a mistake (a site's typo must not allow
    everything, nor be ignored)."""
    out = []
    for entry in entries:
        text = str(entry).strip()
        m = re.fullmatch(r"\[([0-9a-fA-F:./]+)\](?::(\d+))?", text) or re.fullmatch(
            r"([0-9.]+(?:/\d+)?)(?::(\d+))?", text
        )
        if m is None:
            m = re.fullmatch(r"([0-9a-fA-F:]+(?:/\d+)?)()", text)  # bare IPv6, no port
        if m is None:
            raise ValueError(f"Egress.allowed: {text!r} is not an address or network (with an optional :port)")
        try:
            network = ipaddress.ip_network(m.group(1), strict=False)
        except ValueError as e:
            raise ValueError(f"Egress.allowed: {text!r}: {e}") from None
        port = int(m.group(2)) if m.group(2) else None
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"Egress.allowed: {text!r}: the port must be 1 to 65535")
        out.append(Destination(network, port))
    return out


def nameservers(paths=RESOLV_CONFS) -> list[str]:
    """The resolvers the engine's embedded DNS forwards to: the host's (systemd-resolved's upstream ones when
    /etc/resolv.conf names only its stub). Loopback ones are unreachable from a container anyway."""
    found: list[str] = []
    for path in paths:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        for m in re.finditer(r"^\s*nameserver\s+(\S+)", text, re.M):
            try:
                ip = ipaddress.ip_address(m.group(1).split("%")[0])
            except ValueError:
                continue
            if not ip.is_loopback and str(ip) not in found:
                found.append(str(ip))
    return found


def host_networks(prefix: tuple[str, ...] = ()) -> list[str]:
    """Every network the host has an address in (`ip -json addr`): its LAN even when that is a public
    range, the docker bridges, a VPN (blocking). `prefix`: see the module's docstring."""
    try:
        result = subprocess.run([*prefix, "ip", "-json", "addr"], capture_output=True, text=True, timeout=60)
        links = json.loads(result.stdout or "[]")
    except (OSError, ValueError, subprocess.SubprocessError):
        return []
    nets = []
    for link in links:
        for addr in link.get("addr_info") or []:
            try:
                net = ipaddress.ip_interface(f"{addr['local']}/{addr['prefixlen']}").network
            except (KeyError, ValueError):
                continue
            if str(net) not in nets:
                nets.append(str(net))
    return nets


def chain_name(key: str) -> str:
    """A chain of ours for `key` (a deployment's workspaces, a build network), short enough for iptables
    (28 characters) with its `-IN` companion."""
    return "WS-EGRESS-" + hashlib.sha256(key.encode()).hexdigest()[:10].upper()


@dataclass
class Policy:
    chain: str
    interfaces: list[str]  # the guarded bridges; `wsab12c+` is a prefix
    dns: list[str] = field(default_factory=list)
    allowed: list[Destination] = field(default_factory=list)
    host_nets: list[str] = field(default_factory=list)
    hub: tuple[str, int] | None = None  # the host's address and port a workspace calls (the hub's API)
    # a swarm node's: the hub is another machine (forwarded), or this one where a manager runs it (INPUT)
    hub_routed: bool = False

    @property
    def input_chain(self) -> str:
        return f"{self.chain}-IN"


def _allow(dest: Destination) -> list[list[str]]:
    if dest.port is None:
        return [["-d", str(dest.network), "-j", "RETURN"]]
    return [["-d", str(dest.network), "-p", p, "--dport", str(dest.port), "-j", "RETURN"] for p in ("tcp", "udp")]


def _common(policy: Policy, version: int) -> list[list[str]]:
    """What passes in both chains: replies, DNS, the site's allowed destinations."""
    out = [["-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "RETURN"]]
    for server in policy.dns:
        if ipaddress.ip_address(server).version == version:
            out += [["-d", server, "-p", p, "--dport", "53", "-j", "RETURN"] for p in ("udp", "tcp")]
    for dest in policy.allowed:
        if dest.version == version:
            out += _allow(dest)
    return out


def forward_rules(policy: Policy, version: int = 4) -> list[list[str]]:
    """`<chain>`'s rules in order (each the arguments after `-A <chain>`): what a workspace's traffic to
    another host meets."""
    out = _common(policy, version)
    if policy.hub_routed and policy.hub and ipaddress.ip_address(policy.hub[0]).version == version:
        out.append(_hub_rule(policy.hub))
    # to the guarded bridges themselves: Docker's isolation decides (an owner's own workspaces only)
    out += [["-o", bridge, "-j", "RETURN"] for bridge in policy.interfaces]
    refused = list(BLOCKED[version])
    # the host's networks outside those ranges (its LAN in a public range, say); one inside them is refused
    # already, and naming it would change the rules with every owner network made (each gives the host an
    # address): every start would make the rules anew, a rule longer each time (#30: 4 s a start at 60)
    blocked = [ipaddress.ip_network(n) for n in BLOCKED[version]]
    for net in policy.host_nets:
        network = ipaddress.ip_network(net)
        if network.version == version and not any(network.subnet_of(b) for b in blocked) and net not in refused:
            refused.append(net)
    out += [["-d", net, "-j", "REJECT"] for net in refused]
    return out


def input_rules(policy: Policy, version: int = 4) -> list[list[str]]:
    """`<chain>-IN`'s rules in order: what a workspace's traffic to the host itself meets."""
    out = _common(policy, version)
    if policy.hub and ipaddress.ip_address(policy.hub[0]).version == version:
        out.append(_hub_rule(policy.hub))
    if version == 6:  # neighbour discovery: without it no IPv6 reaches the bridge at all
        out.append(["-p", "ipv6-icmp", "-j", "RETURN"])
    out.append(["-j", "REJECT"])
    return out


def _hub_rule(hub: tuple[str, int]) -> list[str]:
    return ["-d", hub[0], "-p", "tcp", "--dport", str(hub[1]), "-j", "RETURN"]


# -- applying (blocking) ------------------------------------------------------------------------
# `prefix` everywhere: a command the tool runs under (`ip netns exec node2`: a test cluster's node), () here.


# seconds iptables waits for the xtables lock: Docker holds it while it wires each new container, and
# a class's burst of starts wires many at once
XTABLES_WAIT = "20"


def _run(tool: str, *args: str, check: bool = True, prefix: tuple[str, ...] = ()) -> bool:
    try:
        result = subprocess.run([*prefix, tool, "-w", XTABLES_WAIT, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        if check:
            raise EgressError(f"{tool} {' '.join(args)}: {e}") from e
        return False
    if check and result.returncode != 0:
        raise EgressError(f"{tool} {' '.join(args)}: {result.stderr.strip()}")
    return result.returncode == 0


def delete_rule(parent: str, *rule: str) -> None:
    """Delete one IPv4 rule if it is there."""
    _run("iptables", "-D", parent, *rule, check=False)


def _fill(tool: str, chain: str, wanted: list[list[str]], prefix: tuple[str, ...]) -> None:
    if not _run(tool, "-n", "-L", chain, check=False, prefix=prefix):
        # another process (a second hub, a build) may make it first: that is as good
        if not _run(tool, "-N", chain, check=False, prefix=prefix):
            _run(tool, "-n", "-L", chain, prefix=prefix)
    listed = subprocess.run(
        [*prefix, tool, "-w", XTABLES_WAIT, "-S", chain], capture_output=True, text=True, timeout=60
    )
    old = max(0, len(listed.stdout.splitlines()) - 1)  # its `-N chain` line, then one line a rule
    if old == len(wanted) and all(_run(tool, "-C", chain, *rule, check=False, prefix=prefix) for rule in wanted):
        return
    # the new rules after the old ones, then the old ones taken away: never a moment without rules
    for rule in wanted:
        _run(tool, "-A", chain, *rule, prefix=prefix)
    for _ in range(old):
        _run(tool, "-D", chain, "1", prefix=prefix)


def _jump(tool: str, parent: str, interface: str, chain: str, prefix: tuple[str, ...]) -> None:
    if not _run(tool, "-C", parent, "-i", interface, "-j", chain, check=False, prefix=prefix):
        _run(tool, "-I", parent, "1", "-i", interface, "-j", chain, prefix=prefix)


def _guard(tool: str, policy: Policy, parent: str, chain: str, wanted: list[list[str]], prefix) -> None:
    _fill(tool, chain, wanted, prefix)
    for interface in policy.interfaces:
        _jump(tool, parent, interface, chain, prefix)


# One apply at a time in a process: two at once would each see the other's half-made chain and take
# its rules away (measured: 29 of 30 starts at once failed). A start that waited for an apply begun after
# it asked takes that apply's success: the rules were verified after its request.
_applying = threading.Lock()
_verified: dict[tuple[str, tuple[str, ...]], float] = {}  # (its rules, prefix) -> when its last good apply began
# (its rules, prefix) -> the tables' own listing of its chains and jumps right after its last good apply: a
# later apply that lists the same is done in two table reads instead of a hundred checks (under a burst's
# load each iptables run costs tens of milliseconds, and every start applies)
_listed: dict[tuple[str, tuple[str, ...]], tuple] = {}


def apply(policy: Policy, prefix: tuple[str, ...] = ()) -> None:
    """Make `policy`'s chains and jumps, for IPv4 and (where the host has ip6tables) IPv6; idempotent.
    EgressError when a rule cannot be made. Serialized in the process; a call that waited for an apply of
    the same policy begun after it was made returns at once (a class's starts make the rules once, not a
    hundred times)."""
    asked, key = time.monotonic(), (_rules_of(policy), tuple(prefix))
    with _applying:
        if _verified.get(key, float("-inf")) >= asked:
            return
        began = time.monotonic()
        if _listed.get(key) is None or _listing(policy, prefix) != _listed[key]:
            _listed.pop(key, None)
            _apply(policy, prefix)
            _listed[key] = _listing(policy, prefix)
        _verified[key] = began


def _rules_of(policy: Policy) -> str:
    """What applying `policy` makes (its chains, rules and jumps), as a key: two policies that make the same
    rules are one (the host's networks inside the refused ranges change nothing)."""
    made = [(version, forward_rules(policy, version), input_rules(policy, version)) for version in (4, 6)]
    return repr((policy.chain, policy.interfaces, made))


def _listing(policy: Policy, prefix: tuple[str, ...]) -> tuple:
    """What the tables say of `policy` now: its chains' rules and the jumps to them, in save format,
    and whether IPv6 is routed (which decides whether it is guarded at all)."""
    ours = {policy.chain, policy.input_chain}
    out: list = [_ipv6_forwarding(prefix)]
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        saved = _saved(tool, prefix)
        for chain in ("DOCKER-USER", "FORWARD", "INPUT", policy.chain, policy.input_chain):
            lines = saved.get(chain) if saved is not None else _listed_chain(tool, chain, prefix)
            if lines is not None and chain not in ours:  # a parent: only the jumps to our chains
                lines = [line for line in lines if line.split()[-1:] and line.split()[-1] in ours]
            out.append((tool, chain, tuple(lines) if lines is not None else None))
    return tuple(out)


def _saved(tool: str, prefix: tuple[str, ...]) -> dict[str, list[str]] | None:
    """The filter table as `<tool>-save` prints it, {chain: its rules}: one run for all five chains a listing
    reads (each `-S` run reads the whole table too; a burst's every start lists). None without the tool."""
    try:
        saved = subprocess.run([*prefix, f"{tool}-save", "-t", "filter"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if saved.returncode != 0:
        return None
    chains: dict[str, list[str]] = {}
    for line in saved.stdout.splitlines():
        if line.startswith(":"):
            chains[line[1:].split()[0]] = []
        elif line.startswith("-A "):
            chains.setdefault(line.split()[1], []).append(line)
    return chains


def _listed_chain(tool: str, chain: str, prefix: tuple[str, ...]) -> list[str] | None:
    cmd = [*prefix, tool, "-w", XTABLES_WAIT, "-S", chain]
    listed = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return listed.stdout.splitlines() if listed.returncode == 0 else None


def _apply(policy: Policy, prefix: tuple[str, ...]) -> None:
    if shutil.which("iptables") is None:
        raise EgressError("iptables is not installed")
    families = [("iptables", 4)] + ([("ip6tables", 6)] if shutil.which("ip6tables") else [])
    for tool, version in families:
        # Docker makes DOCKER-USER (and keeps what is in it); ip6tables has it only with Docker's ip6tables on
        has_user = _run(tool, "-n", "-L", "DOCKER-USER", check=False, prefix=prefix)
        forward = "DOCKER-USER" if has_user else "FORWARD"
        if version == 6 and forward == "FORWARD" and not _ipv6_forwarding(prefix):
            forward = None  # no IPv6 is routed: nothing to guard, and FORWARD is not Docker's to keep
        if forward:
            _guard(tool, policy, forward, policy.chain, forward_rules(policy, version), prefix)
        _guard(tool, policy, "INPUT", policy.input_chain, input_rules(policy, version), prefix)


def _ipv6_forwarding(prefix: tuple[str, ...] = ()) -> bool:
    path = "/proc/sys/net/ipv6/conf/all/forwarding"  # per network namespace: read in the one guarded
    try:
        if prefix:
            return (
                subprocess.run([*prefix, "cat", path], capture_output=True, text=True, timeout=60).stdout.strip() == "1"
            )
        return Path(path).read_text().strip() == "1"
    except (OSError, subprocess.SubprocessError):
        return True


def remove(chain: str, prefix: tuple[str, ...] = ()) -> None:
    """Take a policy's chains and every jump to them away (a deployment's `down`, a test's clean-up);
    never raises."""
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        for parent in ("DOCKER-USER", "FORWARD", "INPUT"):
            listed = subprocess.run(
                [*prefix, tool, "-w", XTABLES_WAIT, "-S", parent], capture_output=True, text=True, timeout=30
            )
            for line in listed.stdout.splitlines():
                words = line.split()
                if words[:2] == ["-A", parent] and words[-2:] in (["-j", chain], ["-j", f"{chain}-IN"]):
                    _run(tool, "-D", parent, *words[2:], check=False, prefix=prefix)
        for target in (chain, f"{chain}-IN"):
            _run(tool, "-F", target, check=False, prefix=prefix)
            _run(tool, "-X", target, check=False, prefix=prefix)


PACKAGE_HOSTS = ("deb.debian.org", "pypi.org", "files.pythonhosted.org")


def package_mirrors(hosts=PACKAGE_HOSTS) -> list[str]:
    """The addresses this host reaches the package indexes at, where the rules would refuse them: a site
    whose resolver sends PyPI and Debian to a proxy of its own (the project's test machines resolve them
    to 203.0.113.80) would otherwise have no `pip install` in a workspace and no image build. The host's
    resolver is the site's, not a student's, so what it says is the site's choice; `make up` and the tests'
    hubs allow these unless `WORKSPACE_EGRESS_ALLOWED` is set."""
    found: list[str] = []
    for host in hosts:
        try:
            infos = socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)
        except OSError:
            continue
        for info in infos:
            address = ipaddress.ip_address(info[4][0])
            blocked = any(address in ipaddress.ip_network(n) for n in BLOCKED[address.version])
            if blocked and str(address) not in found:
                found.append(str(address))
    return sorted(found)


def hub_address(api_url: str) -> tuple[str, int]:
    """(address, port) of the hub's API as workspaces call it (`JUPYTERHUB_API_URL`)."""
    parts = urlsplit(api_url)
    host = parts.hostname or "127.0.0.1"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        host = socket.gethostbyname(host)
    return host, parts.port or (443 if parts.scheme == "https" else 80)


def remove_deployment(deployment: str) -> None:
    """The rules of a deployment's workspaces taken away (its `down`); never raises."""
    remove(chain_name(deployment))


# -- on a swarm's node --------------------------------------------------------------------------

NODE_CHAIN = chain_name("swarm-node")  # one policy a node: every deployment's workspaces leave by the gwbridge
GWBRIDGE = "docker_gwbridge"


def node_policy(hub: tuple[str, int], allowed=(), dns: list[str] | None = None, prefix: tuple[str, ...] = ()) -> Policy:
    """The rules of a swarm node's workspaces: what leaves by its `docker_gwbridge` reaches the internet,
    the hub's API (on another machine: forwarded) and the site's allowed destinations (blocking: reads
    the node's networks and resolvers)."""
    return Policy(
        chain=NODE_CHAIN,
        interfaces=[GWBRIDGE],
        dns=nameservers() if dns is None else list(dns),
        allowed=parse_allowed(allowed),
        host_nets=host_networks(prefix),
        hub=hub,
        hub_routed=True,
    )


def parse_hub(text: str) -> tuple[str, int]:
    """`ADDR:PORT` (`[v6]:PORT`) -> (address, port); ValueError on anything else."""
    m = re.fullmatch(r"\[([0-9a-fA-F:]+)\]:(\d+)|([0-9.]+):(\d+)", text.strip())
    if m is None:
        raise ValueError(f"--hub: {text!r} is not ADDR:PORT (the hub's API as workspaces call it)")
    address, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    ipaddress.ip_address(address)
    return address, int(port)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workspace.egress",
        description="Make (or remove) the egress rules of a swarm node's workspaces, on that node, as root.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    node = sub.add_parser("node", help="guard this node's docker_gwbridge (idempotent: run it at every boot)")
    node.add_argument("--hub", required=True, help="ADDR:PORT of the hub's API as workspaces call it")
    node.add_argument("--allowed", action="append", default=[], help="a destination to let through (repeatable)")
    node.add_argument("--dns", action="append", help="a resolver on port 53 (default: this node's)")
    sub.add_parser("remove-node", help="take this node's rules away")
    args = parser.parse_args(argv)
    try:
        if args.command == "remove-node":
            remove(NODE_CHAIN)
            return 0
        allowed = [a for entry in args.allowed for a in entry.split(",") if a.strip()]
        apply(node_policy(parse_hub(args.hub), allowed, args.dns))
    except (EgressError, ValueError) as e:
        print(f"egress: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
