"""The egress rules of workspaces and builds (workspace/egress.py) as iptables arguments; applied against a
real kernel in tests/security/test_egress.py."""

from __future__ import annotations

import ipaddress
import subprocess
import threading
import time

import pytest

from workspace import egress
from workspace.spawner import networks


def policy(**kw) -> egress.Policy:
    base = dict(
        chain=egress.chain_name("d"),
        interfaces=["wsabcde+", "br-0123456789ab"],
        dns=["10.255.255.53", "fd00::53"],
        allowed=egress.parse_allowed(["10.20.0.5:27000", "192.168.7.0/24", "[fd00::8]:3128"]),
        host_nets=["192.0.2.0/24", "130.59.10.0/24", "fd00::/64"],
        hub=("172.17.0.1", 8081),
    )
    return egress.Policy(**{**base, **kw})


def test_allowed_destinations_parse_with_and_without_a_port():
    parsed = egress.parse_allowed(["10.20.0.0/24", "10.20.0.5:27000", "[fd00::8]:3128", "fd00::/64", "1.2.3.4"])
    assert [(str(d.network), d.port) for d in parsed] == [
        ("10.20.0.0/24", None),
        ("10.20.0.5/32", 27000),
        ("fd00::8/128", 3128),
        ("fd00::/64", None),
        ("1.2.3.4/32", None),
    ]


@pytest.mark.parametrize("bad", ["campus-proxy:3128", "10.0.0.0/33", "10.0.0.1:0", "10.0.0.1:70000", "*", ""])
def test_a_mistake_in_the_allow_list_is_refused_not_ignored(bad):
    with pytest.raises(ValueError, match="Egress.allowed"):
        egress.parse_allowed([bad])


def test_what_passes_comes_before_what_is_refused_and_the_rest_is_refused():
    rules = egress.forward_rules(policy())
    first_reject = next(i for i, r in enumerate(rules) if r[-1] == "REJECT")
    assert all(r[-1] == "RETURN" for r in rules[:first_reject])
    assert all(r[-1] == "REJECT" for r in rules[first_reject:])
    assert rules[0] == ["-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "RETURN"]
    passes = rules[:first_reject]
    # DNS to the engine's resolvers only on 53; a license server on its port only, TCP and UDP
    assert ["-d", "10.255.255.53", "-p", "udp", "--dport", "53", "-j", "RETURN"] in passes
    assert ["-d", "10.255.255.53/32", "-j", "RETURN"] not in passes
    assert ["-d", "10.20.0.5/32", "-p", "tcp", "--dport", "27000", "-j", "RETURN"] in passes
    assert ["-d", "10.20.0.5/32", "-p", "udp", "--dport", "27000", "-j", "RETURN"] in passes
    assert ["-d", "192.168.7.0/24", "-j", "RETURN"] in passes
    # the guarded bridges themselves: Docker's isolation decides (an owner's workspaces, SSH on 2222)
    assert ["-o", "wsabcde+", "-j", "RETURN"] in passes and ["-o", "br-0123456789ab", "-j", "RETURN"] in passes
    refused = {r[1] for r in rules[first_reject:]}
    for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"):
        assert net in refused
    assert "130.59.10.0/24" in refused, "the host's own LAN, even in a public range"
    assert not any(":" in r[1] for r in rules if r[0] == "-d"), "no IPv6 address in the IPv4 rules"


def test_every_special_range_is_refused_and_no_public_address_is():
    for version, ranges in egress.BLOCKED.items():
        nets = [ipaddress.ip_network(n) for n in ranges]
        probes = {
            4: [
                "169.254.169.254",
                "10.1.2.3",
                "172.20.0.1",
                "192.168.1.1",
                "100.64.0.1",
                "127.0.0.1",
                "192.0.2.7",
                "198.51.100.7",
                "203.0.113.80",
                "198.18.0.1",
                "224.0.0.1",
                "255.255.255.255",
                "0.0.0.0",
            ],
            6: ["::1", "fe80::1", "fd00::1", "fc00::1", "ff02::1", "2001:db8::1", "::ffff:10.0.0.1", "64:ff9b::a00:1"],
        }[version]
        for probe in probes:
            assert any(ipaddress.ip_address(probe) in n for n in nets), probe
        public = {4: ["11.0.0.1", "1.1.1.1", "8.8.8.8", "151.101.0.223"], 6: ["2a00:1450::1", "2606:4700::1111"]}
        for probe in public[version]:
            assert not any(ipaddress.ip_address(probe) in n for n in nets), probe


def test_the_host_answers_a_workspace_only_on_the_hubs_port():
    rules = egress.input_rules(policy())
    assert ["-d", "172.17.0.1", "-p", "tcp", "--dport", "8081", "-j", "RETURN"] in rules
    assert rules[-1] == ["-j", "REJECT"]
    assert not any(r[:2] == ["-d", "172.17.0.1"] and "8081" not in r for r in rules)
    v6 = egress.input_rules(policy(), 6)
    assert ["-p", "ipv6-icmp", "-j", "RETURN"] in v6, "neighbour discovery"
    assert ["-d", "fd00::8/128", "-p", "tcp", "--dport", "3128", "-j", "RETURN"] in v6
    assert not any("172.17.0.1" in r for r in v6)


def test_ipv6_refuses_its_own_ranges_and_the_hosts():
    rules = egress.forward_rules(policy(), 6)
    refused = {r[1] for r in rules if r[-1] == "REJECT"}
    assert {"fc00::/7", "fe80::/10", "ff00::/8", "::ffff:0:0/96"} <= refused
    assert "fd00::/64" not in refused  # the host's, but inside fc00::/7: refused by that rule already
    assert ["-d", "fd00::53", "-p", "udp", "--dport", "53", "-j", "RETURN"] in rules


def test_names_fit_the_kernels_limits():
    assert len(egress.chain_name("wstest-" + "x" * 60) + "-IN") <= 28
    assert len(networks.bridge_name("a-long-deployment-name", "a-very-long-user-name@example.edu")) <= 15
    assert networks.bridge_name("d", "ada").startswith(networks.bridge_prefix("d"))
    assert networks.bridge_prefix("d") != networks.bridge_prefix("e")


def test_the_hub_address_is_read_from_its_api_url():
    assert egress.hub_address("http://172.17.0.1:8081/hub/api") == ("172.17.0.1", 8081)
    assert egress.hub_address("https://10.0.0.2/hub/api") == ("10.0.0.2", 443)


def test_a_swarm_nodes_rules_let_the_hub_through_as_a_forwarded_destination():
    # on a swarm the hub is another machine: its address:port passes in the forward chain, before the
    # private ranges it is in are refused, and the node itself answers nothing else (INPUT)
    node = egress.Policy(
        chain="WS-EGRESS-X",
        interfaces=["docker_gwbridge"],
        host_nets=["10.250.0.0/24"],
        hub=("172.17.0.1", 8081),
        hub_routed=True,
    )
    rules = egress.forward_rules(node)
    hub = ["-d", "172.17.0.1", "-p", "tcp", "--dport", "8081", "-j", "RETURN"]
    assert hub in rules and rules.index(hub) < rules.index(["-d", "172.16.0.0/12", "-j", "REJECT"])
    assert ["-d", "10.0.0.0/8", "-j", "REJECT"] in rules  # the node's own 10.250.0.0/24 with it
    assert egress.input_rules(node)[-2:] == [hub, ["-j", "REJECT"]]  # a hub on a manager that is a node too
    assert egress.parse_hub("172.17.0.1:8081") == ("172.17.0.1", 8081)
    assert egress.parse_hub("[fd00::1]:443") == ("fd00::1", 443)
    for bad in ("172.17.0.1", "hub:8081", "0.0.0.0.0:1"):
        with pytest.raises(ValueError):
            egress.parse_hub(bad)


def test_the_node_command_applies_the_node_policy_in_the_given_prefix(monkeypatch):
    applied = []
    monkeypatch.setattr(egress, "apply", lambda policy, prefix=(): applied.append(policy))
    monkeypatch.setattr(egress, "host_networks", lambda prefix=(): ["10.0.0.0/24"])
    assert egress.main(["node", "--hub", "10.0.0.1:8081", "--allowed", "10.20.0.5:27000", "--dns", "10.0.0.53"]) == 0
    (policy,) = applied
    assert (policy.interfaces, policy.hub, policy.hub_routed, policy.dns) == (
        ["docker_gwbridge"],
        ("10.0.0.1", 8081),
        True,
        ["10.0.0.53"],
    )
    assert egress.main(["node", "--hub", "nowhere"]) == 1


def test_starts_at_once_make_the_rules_one_at_a_time_and_share_a_later_apply(monkeypatch):
    # a class's burst: thirty starts guard the same networks at the same moment. Two applies at once each
    # saw the other's half-made chain and took its rules away (29 of 30 starts failed); now they run one at
    # a time, and a start that waited for an apply begun after it asked takes that apply's result
    running, overlapped, calls = [0], [], []
    lock = threading.Lock()

    def slow_apply(policy, prefix):
        with lock:
            running[0] += 1
            overlapped.append(running[0] > 1)
        time.sleep(0.05)
        calls.append(policy.chain)
        with lock:
            running[0] -= 1

    monkeypatch.setattr(egress, "_apply", slow_apply)
    monkeypatch.setattr(egress, "_verified", {})
    monkeypatch.setattr(egress, "_listed", {})
    monkeypatch.setattr(egress, "_listing", lambda policy, prefix: ("as made",))
    policy = egress.Policy(chain="WS-burst", interfaces=["wsabcde+"])
    threads = [threading.Thread(target=egress.apply, args=(policy,)) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not any(overlapped)
    assert 1 <= len(calls) <= 3  # the first, one for all who asked while it ran, and perhaps a straggler
    egress.apply(policy)  # a start after them all still has the rules verified for itself
    assert len(calls) <= 4 and calls.count("WS-burst") == len(calls)


def test_rules_listed_as_made_are_not_made_again_and_rules_gone_are(monkeypatch):
    # every start applies the rules: the tables' own listing, unchanged since the last good apply, is enough;
    # a listing that changed (a firewall reloaded, a rule deleted by hand) makes the next apply make them all
    made, tables = [], {"listing": ("chain", "rules", "jumps")}
    monkeypatch.setattr(egress, "_apply", lambda policy, prefix: made.append(policy.chain))
    monkeypatch.setattr(egress, "_verified", {})
    monkeypatch.setattr(egress, "_listed", {})
    monkeypatch.setattr(egress, "_listing", lambda policy, prefix: tables["listing"])
    policy = egress.Policy(chain="WS-listed", interfaces=["wsabcde+"])
    egress.apply(policy)
    egress.apply(policy)
    egress.apply(policy)
    assert made == ["WS-listed"]
    tables["listing"] = ("chain", "jumps")  # the rules were flushed
    egress.apply(policy)
    assert made == ["WS-listed", "WS-listed"]


def test_the_rules_stay_the_same_as_owner_networks_come_and_go():
    # every owner network gives the host an address in it (10.213.x.1/27); naming each in the rules made them
    # anew, a rule longer, at every start of a class's burst (4 s a start at the 60th). They are inside
    # 10.0.0.0/8, refused already: the rules are the same with one owner network or a hundred
    few = policy(host_nets=["130.59.10.0/24", "10.213.0.0/27"])
    many = policy(host_nets=["130.59.10.0/24"] + [f"10.213.{i}.0/27" for i in range(100)])
    assert egress.forward_rules(few) == egress.forward_rules(many)
    assert ["-d", "130.59.10.0/24", "-j", "REJECT"] in egress.forward_rules(many)  # outside them: named


def test_a_listing_reads_each_family_s_table_once(monkeypatch):
    # every start lists the rules: one `iptables-save` a family, not five `-S` runs that each read the table
    saved = "\n".join(
        [
            "*filter",
            ":INPUT ACCEPT [0:0]",
            ":DOCKER-USER - [0:0]",
            ":WS-one - [0:0]",
            ":WS-one-IN - [0:0]",
            "-A INPUT -i wsabcde+ -j WS-one-IN",
            "-A INPUT -j ACCEPT",
            "-A DOCKER-USER -i wsabcde+ -j WS-one",
            "-A WS-one -d 10.0.0.0/8 -j REJECT",
            "COMMIT",
        ]
    )
    runs = []

    def run(cmd, **kwargs):
        runs.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout=saved if cmd[0].endswith("-save") else "", stderr="")

    monkeypatch.setattr(egress.subprocess, "run", run)
    monkeypatch.setattr(egress.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    listing = egress._listing(egress.Policy(chain="WS-one", interfaces=["wsabcde+"]), ())
    assert [cmd[0] for cmd in runs if cmd[0] != "cat"] == ["iptables-save", "ip6tables-save"]
    chains = {(tool, chain): lines for tool, chain, lines in listing[1:]}
    assert chains["iptables", "INPUT"] == ("-A INPUT -i wsabcde+ -j WS-one-IN",)  # only the jumps to ours
    assert chains["iptables", "WS-one"] == ("-A WS-one -d 10.0.0.0/8 -j REJECT",)
    assert chains["iptables", "WS-one-IN"] == ()  # there, and empty: not the same as gone
    assert chains["iptables", "FORWARD"] is None
