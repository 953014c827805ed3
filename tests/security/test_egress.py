"""Egress (workspace/egress.py): a workspace and an image build reach the internet, not the site's networks.

Nothing real is probed: the test makes its own "site" in a network namespace joined to the host by a veth
pair, with listeners at the addresses a hostile student would try (the cloud's metadata address
169.254.169.254, a campus host at 10.x and one at 192.168.x, a documentation address the way this
project's machines have their proxy), a site's license server at an allowed address and port, and a
stand-in for a public address. For that the test takes 11.x: a globally routed range (the Department of
Defense's), so the rules treat it as the internet, and routed into the namespace only on this host and
only while the test runs; 198.18/15 or TEST-NET would not do, they are special ranges and refused too.
A listener of the test on the host's own docker0 address stands for the host's services.

From inside a workspace started by a real hub (so the hub reaches it and it the hub: it got ready) and
from a container on a build network made by build_network.ensure, the test connects to each.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import threading
import uuid

import pytest

from workspace import egress
from workspace.images import network as build_network
from workspace.setup import engine

PROBE = """
import json, socket, sys, urllib.request, urllib.error
out = {}
for key, url in json.loads(sys.argv[1]).items():
    try:
        with urllib.request.urlopen(url, timeout=4) as r:
            out[key] = "open " + r.read(200).decode(errors="replace")
    except urllib.error.HTTPError as e:
        out[key] = f"open HTTP {e.code}"
    except Exception as e:
        out[key] = f"closed {type(e).__name__}: {e}"
for key, (host, port) in json.loads(sys.argv[2]).items():
    try:
        with socket.create_connection((host, port), timeout=4) as s:
            out[key] = "open " + s.recv(40).decode(errors="replace").strip()
    except Exception as e:
        out[key] = f"closed {type(e).__name__}: {e}"
print(json.dumps(out))
"""


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The namespace with its listeners; taken away with everything it added to the host."""
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        pytest.skip("no `ip netns` here (needs root and iproute2)")
    tag = uuid.uuid4().hex[:6]
    r = random.randrange(1, 250)
    ns, host_end, ns_end = f"wsegress{tag}", f"veg{tag}h", f"veg{tag}n"
    addresses = {
        "metadata": "169.254.169.254",
        "campus": f"10.250.{r}.10",
        "lan": f"192.168.{r}.10",
        "documentation": f"198.51.100.{r}",
        "license": f"10.250.{r}.20",
        "public": f"11.250.{r}.10",
    }
    root = tmp_path_factory.mktemp("site")
    canary = uuid.uuid4().hex
    (root / "canary").write_text(canary)
    servers = []
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end)
        sh("ip", "link", "set", ns_end, "netns", ns)
        sh("ip", "addr", "add", f"10.251.{r}.1/30", "dev", host_end)
        sh("ip", "link", "set", host_end, "up")
        inside = ["ip", "netns", "exec", ns]
        sh(*inside, "ip", "addr", "add", f"10.251.{r}.2/30", "dev", ns_end)
        for address in addresses.values():
            sh(*inside, "ip", "addr", "add", f"{address}/32", "dev", ns_end)
            sh("ip", "route", "add", f"{address}/32", "via", f"10.251.{r}.2", "dev", host_end)
        sh(*inside, "ip", "link", "set", ns_end, "up")
        sh(*inside, "ip", "link", "set", "lo", "up")
        sh(*inside, "ip", "route", "add", "default", "via", f"10.251.{r}.1")
        for port in (8765, 8766):
            servers.append(
                subprocess.Popen(
                    [*inside, "python3", "-m", "http.server", str(port), "--bind", "0.0.0.0"],
                    cwd=root,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        # the listeners answer from the host (no rule stands between the host and the namespace)
        for _ in range(50):
            try:
                with socket.create_connection((addresses["public"], 8765), timeout=1):
                    break
            except OSError:
                threading.Event().wait(0.1)
        yield {"addresses": addresses, "canary": canary, "port": 8765, "other_port": 8766}
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)
        subprocess.run(["ip", "link", "del", host_end], capture_output=True)  # its routes go with it
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def host_listener():
    """A service of the host's own, on its docker0 address (where the hub listens too)."""
    server = socket.create_server((engine.bridge_gateway(), 0))
    server.settimeout(0.5)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.sendall(b"host-service\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()
    stop.set()
    thread.join(5)
    server.close()


def probes(site: dict, host_listener) -> tuple[dict, dict]:
    a, port = site["addresses"], site["port"]
    urls = {name: f"http://{address}:{port}/canary" for name, address in a.items()}
    urls["license, another port"] = f"http://{a['license']}:{site['other_port']}/canary"
    return urls, {"host service": list(host_listener)}


def run_probe(container_run, urls: dict, sockets: dict) -> dict:
    out = container_run(["python3", "-c", PROBE, json.dumps(urls), json.dumps(sockets)])
    return json.loads(out.strip().splitlines()[-1])


def assert_only_the_internet_and_the_site_s_choice(seen: dict, canary: str) -> None:
    refused = ["metadata", "campus", "lan", "documentation", "license, another port", "host service"]
    for name in refused:
        assert seen[name].startswith("closed"), f"{name} was reached: {seen}"
    assert seen["public"] == f"open {canary}", seen
    assert seen["license"] == f"open {canary}", f"the allowed destination is refused: {seen}"


def test_a_workspace_reaches_the_internet_and_what_the_site_allows_only(start_hub, site, host_listener):
    license_ = f"{site['addresses']['license']}:{site['port']}"
    hub = start_hub(WORKSPACE_EGRESS_ALLOWED=license_)  # this site's only (not the machine's proxy)
    user = f"egress{uuid.uuid4().hex[:6]}"
    hub.create_user(user)
    token = hub.user_token(user)
    hub.start_workspace(user, "one", token)  # ready: the hub reached it, and it the hub's API
    hub.start_workspace(user, "two", token)

    def in_workspace(cmd):
        (container,) = hub.containers(user=user, server="one")
        code, out = container.exec_run(cmd, user="1000")
        assert code == 0, out
        return out.decode()

    urls, sockets = probes(site, host_listener)
    urls["hub api"] = hub.containers(user=user, server="one")[0].attrs["Config"]["Env"]
    urls["hub api"] = next(e.split("=", 1)[1] for e in urls["hub api"] if e.startswith("JUPYTERHUB_API_URL="))
    sockets["own workspace's sshd"] = ["two", 2222]
    seen = run_probe(in_workspace, urls, sockets)
    print(json.dumps(seen, indent=1))
    assert_only_the_internet_and_the_site_s_choice(seen, site["canary"])
    assert seen["hub api"].startswith("open"), seen
    assert seen["own workspace's sshd"].startswith("open SSH-2.0"), seen
    hub.stop_workspace(user, "two", token)
    hub.stop_workspace(user, "one", token)


def test_an_image_build_reaches_the_internet_and_what_the_site_allows_only(docker_client, image, site, host_listener):
    tag = uuid.uuid4().hex[:6]
    name, bridge = f"wstest-build-{tag}", f"wsb{tag}"
    license_ = f"{site['addresses']['license']}:{site['port']}"
    try:
        build_network.ensure(docker_client, name, bridge, [license_])

        def in_build(cmd):
            out = docker_client.containers.run(
                image, cmd, network=name, remove=True, user="0:0", cap_drop=["ALL"], stderr=True
            )
            return out.decode()

        urls, sockets = probes(site, host_listener)
        seen = run_probe(in_build, urls, sockets)
        print(json.dumps(seen, indent=1))
        assert_only_the_internet_and_the_site_s_choice(seen, site["canary"])
    finally:
        egress.remove(build_network.chain(bridge))
        try:
            docker_client.networks.get(name).remove()
        except Exception as e:  # the test's own network; say so rather than hide it
            print(f"could not remove {name}: {e}")


def test_rules_taken_away_between_two_starts_are_made_again():
    # a start whose rules' listing is unchanged since the last apply does not make them again (#30: ten
    # listings instead of a hundred checks); a flushed chain (a firewall reloaded) is seen and made again
    policy = egress.Policy(
        chain=egress.chain_name(f"wstest-listing-{uuid.uuid4().hex[:6]}"),
        interfaces=["wsnone0+"],  # no such bridge: the rules guard nothing here
        dns=egress.nameservers(),
        host_nets=egress.host_networks(),
        hub=("172.17.0.1", 8081),
    )

    def rules() -> list[str]:
        listed = subprocess.run(["iptables", "-w", "20", "-S", policy.chain], capture_output=True, text=True)
        return listed.stdout.splitlines()[1:]

    try:
        egress.apply(policy)
        made = rules()
        assert made and any("REJECT" in r for r in made), made
        egress.apply(policy)
        assert rules() == made
        subprocess.run(["iptables", "-w", "20", "-F", policy.chain], check=True)
        assert rules() == []
        egress.apply(policy)
        assert rules() == made
    finally:
        egress.remove(policy.chain)
