"""SSH through the gateway into real workspaces, with Debian's OpenSSH client (#16): commands, scp, sftp,
rsync and -L forwarding; between one owner's workspaces by name; and what another user, a removed key, a
narrow token or a stopped workspace gets."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest
import requests

from workspace import ssh_identities
from workspace.gateway_keys import GatewayKeys
from workspace.setup import engine

from .hub import Hub
from .test_cli import WORKSPACE

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="Debian's openssh-client is not installed")


def wait_listening(port: int, timeout: float = 60) -> None:
    """Until something accepts connections on 127.0.0.1:`port`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on port {port}"
            time.sleep(0.3)


class Client:
    """One user's OpenSSH client: their key, the gateway's host key pinned."""

    def __init__(self, hub: Hub, home: Path, user: str):
        self.hub, self.user, self.home = hub, user, home
        home.mkdir(parents=True, exist_ok=True)
        self.key = home / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)], check=True)
        public, _ = GatewayKeys(hub.data_dir / "gateway").host_public()
        self.port = hub.env["WORKSPACE_SSH_PORT"]
        (home / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {public}\n")
        self.token = hub.user_token(user)
        wait_listening(int(self.port))  # the gateway is a service the hub starts: a loaded machine's is late

    def register(self) -> dict:
        r = self.hub.service_call(
            "POST", "/ssh-keys", self.token, json={"key": self.key.with_suffix(".pub").read_text()}
        )
        assert r.status_code == 201, r.text
        return r.json()

    def options(self, password: bool = False) -> list[str]:
        common = ["-F", "/dev/null", "-o", f"UserKnownHostsFile={self.home / 'known_hosts'}"]
        if password:  # no key, no batch mode: the password comes from SSH_ASKPASS
            return [*common, "-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1"]
        return [
            *common,
            *("-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"),
            *("-o", "ConnectTimeout=20", "-i", str(self.key)),
        ]

    def login(self, workspace: str, owner: str | None = None) -> str:
        return f"{owner or self.user}+{workspace}@127.0.0.1"

    def ssh(self, workspace: str, command: str, owner: str | None = None, check: bool = True, **kw):
        r = subprocess.run(
            ["ssh", *self.options(), "-p", self.port, self.login(workspace, owner), command],
            capture_output=True,
            text=True,
            timeout=300,
            **kw,
        )
        if check:
            assert r.returncode == 0, f"exit {r.returncode}: {r.stdout}{r.stderr}"
        return r


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def two(hub: Hub, tmp_path_factory):
    """ada with two running workspaces (thesis, other) and her key; eve with one (theirs) and hers."""
    base = tmp_path_factory.mktemp("ssh")
    ada, eve = Client(hub, base / "ada", "sshada"), Client(hub, base / "eve", "ssheve")
    ada.register()
    eve.register()
    hub.start_workspace("sshada", "other", ada.token)
    hub.start_workspace("sshada", "thesis", ada.token)
    hub.start_workspace("ssheve", "theirs", eve.token)
    return ada, eve


def test_command_scp_sftp_rsync_and_forwarding_through_the_gateway(hub: Hub, two, tmp_path):
    ada, _ = two
    r = ada.ssh("thesis", "echo hello; id -un; pwd; echo $WORKSPACE_NAME")
    assert r.stdout.split() == ["hello", "jovyan", "/openbayes/home", "thesis"], r.stdout
    assert ada.ssh("thesis", "exit 7", check=False).returncode == 7
    # an OpenSSH client with its own preferences gets AES-GCM (no MAC), never CTR with an HMAC nor umac, which
    # it prefers (#34: each costs the gateway a quarter to a third of a copy's speed)
    r = subprocess.run(
        ["ssh", "-v", *ada.options(), "-p", ada.port, ada.login("thesis"), "true"], capture_output=True, text=True
    )
    chosen = re.findall(r"kex: client->server cipher: (\S+) MAC: (\S+)", r.stderr)
    assert chosen and chosen[0] == ("aes128-gcm@openssh.com", "<implicit>"), (chosen, r.stderr[-2000:])
    # scp in and out (SFTP protocol, OpenSSH's default) and the legacy protocol (-O: `scp -t` runs there)
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(3 << 20))
    scp = ["scp", *ada.options(), "-P", ada.port]
    subprocess.run([*scp, str(data), f"{ada.login('thesis')}:data.bin"], check=True, capture_output=True, timeout=120)
    assert ada.ssh("thesis", "sha256sum data.bin").stdout.split()[0] == _sha(data)
    back = tmp_path / "back.bin"
    subprocess.run(
        [*scp, "-O", f"{ada.login('thesis')}:data.bin", str(back)], check=True, capture_output=True, timeout=120
    )
    assert _sha(back) == _sha(data)
    # sftp listing
    r = subprocess.run(
        ["sftp", *ada.options(), "-P", ada.port, "-b", "-", ada.login("thesis")],
        input="ls -l\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and "data.bin" in r.stdout, r.stdout + r.stderr
    # rsync a tree, then again: nothing to send the second time
    tree = tmp_path / "tree"
    for i in range(20):
        (tree / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (tree / f"d{i % 3}" / f"f{i}.txt").write_text(f"file {i}\n" * (i + 1))
    rsh = " ".join(["ssh", *ada.options(), "-p", ada.port])
    subprocess.run(["rsync", "-a", "-e", rsh, f"{tree}/", f"{ada.login('thesis')}:tree/"], check=True, timeout=120)
    listing = ada.ssh("thesis", "cd tree && find . -type f | sort | xargs sha256sum").stdout
    local = subprocess.run(
        "find . -type f | sort | xargs sha256sum", shell=True, cwd=tree, capture_output=True, text=True
    )
    assert listing == local.stdout
    # -L to the workspace's own Jupyter port: the request is made inside the workspace
    port = str(_free_port())
    tunnel = subprocess.Popen(
        ["ssh", *ada.options(), "-p", ada.port, "-N", "-L", f"{port}:127.0.0.1:8888", ada.login("thesis")]
    )
    try:
        answer = _wait_http(f"http://127.0.0.1:{port}/user/sshada/thesis/api/status")
        assert answer.status_code in (200, 302, 403), answer.status_code
    finally:
        tunnel.terminate()
        tunnel.wait(10)


def test_between_one_owners_workspaces_by_name_and_nobody_elses(hub: Hub, two):
    ada, eve = two
    # thesis -> other: by name, no password, other's host key pinned
    r = ada.ssh(
        "thesis",
        "ssh -o BatchMode=yes other 'echo from $WORKSPACE_NAME' && echo payload > p.txt && scp -q p.txt other:",
    )
    assert "from other" in r.stdout, r.stdout + r.stderr
    assert ada.ssh("other", "cat p.txt").stdout == "payload\n"
    # eve's workspace: its name does not resolve on ada's network, and its address does not answer
    r = ada.ssh("thesis", "ssh -o BatchMode=yes -o ConnectTimeout=5 theirs true", check=False)
    assert r.returncode != 0
    (theirs,) = hub.containers(user="ssheve", server="theirs")
    address = next(iter(theirs.attrs["NetworkSettings"]["Networks"].values()))["IPAddress"]
    r = ada.ssh("thesis", f"timeout 5 bash -c '</dev/tcp/{address}/2222' && echo OPEN || echo closed")
    assert r.stdout.strip() == "closed", r.stdout
    # ada's own key pair is not accepted by eve's workspace even where the network would route
    assert "ssh-ed25519" in ada.ssh("thesis", "cat /run/workspace/ssh/id_workspace.pub").stdout
    assert "sshada" not in eve.ssh("theirs", "cat /run/workspace/ssh/authorized_keys").stdout


def test_other_users_keys_removed_keys_narrow_tokens_and_stopped_workspaces_are_refused(hub: Hub, two, tmp_path):
    ada, eve = two
    # eve's key for ada's workspace, and eve naming ada's workspace
    r = eve.ssh("thesis", "true", owner="sshada", check=False)
    assert r.returncode == 255 and "Permission denied" in r.stderr, r.stderr
    # a second key of ada's works, and is refused at once when removed
    extra = Client.__new__(Client)
    extra.__dict__.update(ada.__dict__)
    extra.key = tmp_path / "second"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(extra.key)], check=True)
    added = extra.register()
    assert extra.ssh("thesis", "true").returncode == 0
    r = hub.service_call("DELETE", f"/ssh-keys/{added['id']}", ada.token)
    assert r.status_code == 200, r.text
    assert extra.ssh("thesis", "true", check=False).returncode == 255
    # a token as the password: ada's full token works; one without access to servers does not
    assert _with_password(ada, "thesis", ada.token).stdout.strip() == "ok"
    r = hub.api("POST", "/users/sshada/tokens", token=ada.token, json={"scopes": ["read:users:name!user=sshada"]})
    assert r.status_code == 201, r.text
    assert _with_password(ada, "thesis", r.json()["token"], check=False).returncode == 255
    assert _with_password(ada, "thesis", eve.token, check=False).returncode == 255
    # a workspace that is not running: one line saying how to start it
    r = ada.ssh("never", "true", check=False)
    assert r.returncode == 1 and "never is not running" in r.stderr and "sshada+never+start" in r.stderr, r.stderr
    # a login the gateway cannot read
    r = subprocess.run(
        ["ssh", *ada.options(), "-p", ada.port, "sshada@127.0.0.1", "true"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 255 and "ada+thesis" in r.stderr, r.stderr


def test_host_key_is_kept_and_start_flag_starts_the_workspace(hub: Hub, two):
    ada, _ = two
    before = ada.ssh("other", "ssh-keygen -lf /run/workspace/ssh/host_key").stdout.split()[1]
    hub.stop_workspace("sshada", "other", ada.token)
    r = ada.ssh("other", "true", check=False)
    assert r.returncode == 1 and "other is not running" in r.stderr
    # +start: progress lines, then the command runs in the new execution
    r = ada.ssh("other+start", "echo execution $WORKSPACE_EXECUTION; ssh-keygen -lf /run/workspace/ssh/host_key")
    assert "Starting other" in r.stderr and "%]" in r.stderr, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "execution 2", r.stdout
    assert lines[1].split()[1] == before
    # and the gateway verified that key: a workspace presenting another is not reached (relay.py)
    r = ada.ssh("thesis", "ssh -o BatchMode=yes other hostname")
    assert r.returncode == 0


def _with_password(client: Client, workspace: str, password: str, check: bool = True):
    askpass = client.home / "askpass.sh"
    askpass.write_text('#!/bin/sh\ncat "$SSH_TEST_PASSWORD_FILE"\n')
    askpass.chmod(0o700)
    secret = client.home / "password"
    secret.write_text(password)
    env = dict(os.environ, SSH_ASKPASS=str(askpass), SSH_ASKPASS_REQUIRE="force", SSH_TEST_PASSWORD_FILE=str(secret))
    r = subprocess.run(
        ["ssh", *client.options(password=True), "-p", client.port, client.login(workspace), "echo ok"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    if check:
        assert r.returncode == 0, r.stderr
    return r


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, timeout: float = 30) -> requests.Response:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return requests.get(url, timeout=5, allow_redirects=False)
        except requests.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_an_open_session_keeps_the_workspace_and_is_told_before_it_stops(start_hub, tmp_path):
    from .test_culler import BROWSER_TIMEOUT, CULL_ENV

    hub = start_hub(**(CULL_ENV | {"WORKSPACE_CULL_MAX_RUNTIME": "45"}))
    ada = Client(hub, tmp_path / "ada", "sshcull")
    ada.register()
    # kept: an interactive session (a terminal) stays open; left: a session that closes at once
    hub.start_workspace("sshcull", "kept", ada.token)
    session = subprocess.Popen(
        ["ssh", *ada.options(), "-tt", "-p", ada.port, ada.login("kept"), "bash"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    printed = []
    reader = threading.Thread(target=lambda: printed.extend(iter(lambda: session.stdout.read1(4096), b"")))
    reader.start()
    try:
        hub.start_workspace("sshcull", "left", ada.token)
        ada.ssh("left", "true")
        # left has no browser and no session: culled as idle; kept is not, past the same timeout
        hub.wait_stopped("sshcull", "left", timeout=BROWSER_TIMEOUT + 30)
        (ex,) = hub.executions("sshcull", "left")
        assert ex["stop_reason"] == "idle", ex
        assert running(hub, "sshcull", "kept"), (hub.executions("sshcull", "kept"), b"".join(printed))
        # the maximum run time still applies, and the session's terminal is told first
        hub.wait_stopped("sshcull", "kept", timeout=60)
    finally:
        session.kill()
        reader.join(10)
    (ex,) = hub.executions("sshcull", "kept")
    assert ex["stop_reason"] == "max_runtime", ex
    text = b"".join(printed).decode(errors="replace")
    assert "[workspace] This workspace will be stopped" in text and "maximum run time" in text, text


def running(hub: Hub, user: str, server: str) -> bool:
    return bool(hub.api("GET", f"/users/{user}").json().get("servers", {}).get(server))


def test_directions_by_api_and_cli_each_users_own(hub: Hub, two, tmp_path):
    ada, eve = two
    d = hub.service_api("/ssh", ada.token).json()
    _, gateway_print = GatewayKeys(hub.data_dir / "gateway").host_public()
    assert d["enabled"] and d["gateway"]["fingerprint"] == gateway_print and d["gateway"]["port"] == int(ada.port)
    thesis = next(w for w in d["workspaces"] if w["name"] == "thesis")
    assert thesis["command"] == f"ssh -p {ada.port} sshada+thesis@127.0.0.1", thesis
    inside = ada.ssh("thesis", "ssh-keygen -lf /run/workspace/ssh/host_key").stdout.split()[1]
    assert thesis["host_key_fingerprint"] == inside
    assert "Host ws-thesis" in d["config"] and "User sshada+thesis" in d["config"]
    # each user is told of their own workspaces only; nobody may ask for another's; no token, nothing
    assert [w["name"] for w in hub.service_api("/ssh", eve.token).json()["workspaces"]] == ["theirs"]
    assert hub.service_api("/ssh", eve.token, user="sshada").status_code == 403
    assert hub.service_api("/ssh", None).status_code in (401, 403)
    # the CLI: ssh-config entries that work as printed (the gateway pinned in the CLI's known_hosts), and ssh NAME
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    env = dict(os.environ, HOME=str(home), WORKSPACE_URL=hub.url, WORKSPACE_TOKEN=ada.token)
    env.pop("XDG_CONFIG_HOME", None)
    config = subprocess.run(
        [WORKSPACE, "ssh-config", "-i", str(ada.key)], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert f"UserKnownHostsFile {home}/.config/workspace/known_hosts" in config, config
    assert f"IdentityFile {ada.key}" in config
    (home / ".ssh" / "config").write_text(config)
    r = subprocess.run(
        ["ssh", "-F", str(home / ".ssh" / "config"), "-o", "BatchMode=yes", "ws-thesis", "echo $WORKSPACE_NAME"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.strip() == "thesis", r.stderr
    r = subprocess.run(
        [WORKSPACE, "ssh", "-i", str(ada.key), "other", "--", "echo", "via-cli"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert r.stdout.strip() == "via-cli", r.stderr


def test_a_hostile_workspace_gets_nothing_from_the_gateway(hub: Hub, two):
    """The student controls their container, sshd included: another sshd with another host key is not
    relayed to (the gateway checks the workspace's key from the database), and remote forwarding, which would
    open a port on the hub host, is refused."""
    ada, _ = two
    r = subprocess.run(
        ["ssh", *ada.options(), "-p", ada.port, "-o", "ExitOnForwardFailure=yes", "-N", "-R", "0:127.0.0.1:22"]
        + [ada.login("thesis")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 255 and "forwarding failed" in r.stderr, r.stderr
    fake = (
        "pkill -u jovyan -x sshd; sleep 0.5; ssh-keygen -q -t ed25519 -N '' -f /tmp/fake_key && "
        "printf 'Port 2222\\nHostKey /tmp/fake_key\\nAuthorizedKeysFile /run/workspace/ssh/authorized_keys\\n"
        "PidFile none\\nUsePAM no\\n' > /tmp/fake_config && /usr/sbin/sshd -f /tmp/fake_config"
    )
    hub.sh("sshada", "thesis", fake)
    r = ada.ssh("thesis", "echo reached", check=False)
    assert r.returncode == 1 and "reached" not in r.stdout and "did not answer" in r.stderr, (r.stdout, r.stderr)
    # its own sshd back: reached again
    hub.sh("sshada", "thesis", "pkill -u jovyan -x sshd; sleep 0.5; /usr/sbin/sshd -f /etc/workspace/sshd_config")
    assert ada.ssh("thesis", "echo reached").stdout.strip() == "reached"


def gateway_process(hub: Hub) -> psutil.Process:
    """The hub's SSH gateway: the process listening on its port."""
    port = int(hub.env["WORKSPACE_SSH_PORT"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for p in psutil.process_iter(["cmdline"]):
            if "workspace.gateway" not in " ".join(p.info["cmdline"] or ()):
                continue
            try:
                if any(c.laddr.port == port and c.status == psutil.CONN_LISTEN for c in p.net_connections("tcp")):
                    return p
            except psutil.Error:
                continue
        time.sleep(0.5)
    raise AssertionError(f"no gateway listens on {port}")


def test_channels_waiting_for_a_start_are_capped_and_hold_little(hub: Hub, two):
    # a +start login makes every channel of the connection wait for the workspace: what the client sends
    # meanwhile is the gateway's to hold, so each channel may send only a small window of it
    import asyncio

    import asyncssh

    ada, _ = two
    gateway = gateway_process(hub)
    # a start that takes a while for sure: its home's start script sleeps before the server starts
    hub.start_workspace("sshada", "lazy", ada.token)
    hub.sh("sshada", "lazy", "mkdir -p ~/.workspace && echo 'sleep 45' > ~/.workspace/start.sh")
    hub.stop_workspace("sshada", "lazy", ada.token)

    async def attack() -> tuple[int, str]:
        async with asyncssh.connect(
            "127.0.0.1",
            int(ada.port),
            username="sshada+lazy+start",
            client_keys=[str(ada.key)],
            known_hosts=str(ada.home / "known_hosts"),
            config=None,
            agent_path=None,
        ) as conn:
            before = gateway.memory_info().rss
            channels = []
            for _ in range(12):
                chan, _ = await conn.create_session(asyncssh.SSHClientSession, "cat > /dev/null", encoding=None)
                chan.write(b"x" * (8 << 20))  # the client holds what the gateway does not take
                channels.append(chan)
            await asyncio.sleep(3)
            lazy = hub.api("GET", "/users/sshada").json()["servers"].get("lazy") or {}
            assert lazy.get("pending") and not lazy.get("ready"), f"not measured while it started: {lazy}"
            grown = gateway.memory_info().rss - before
            # 12 channels of 8 MiB windows took 96 MiB before; now 32 KiB each (and the interpreter's noise)
            assert grown < 16 << 20, f"the gateway grew by {grown >> 20} MiB"
            for _ in range(4):  # 16: the most one connection may have
                chan, _ = await conn.create_session(asyncssh.SSHClientSession, "true", encoding=None)
            with pytest.raises(asyncssh.ChannelOpenError) as refused:
                await conn.create_session(asyncssh.SSHClientSession, "true", encoding=None)
            return refused.value.code, refused.value.reason

    code, reason = asyncio.run(attack())
    assert code == 4 and "too many channels" in reason, (code, reason)  # OPEN_RESOURCE_SHORTAGE
    deadline = time.monotonic() + 300
    while (hub.api("GET", "/users/sshada").json()["servers"].get("lazy") or {}).get("pending"):
        assert time.monotonic() < deadline
        time.sleep(1)
    hub.stop_workspace("sshada", "lazy", ada.token)


def test_the_gateways_key_is_accepted_only_from_the_gateways_address(hub: Hub, two, tmp_path):
    # Docker 20.10+ records no gateway for a network made with only a subnet: the key went without from=,
    # so anything on the owner's network holding the gateway's key (or a copy of it) logged in
    import docker

    ada, _ = two
    client = engine.client()
    (container,) = hub.containers(user="sshada", server="thesis")
    written = hub.sh("sshada", "thesis", "cat /run/workspace/ssh/authorized_keys")
    (line,) = [x for x in written.splitlines() if x.endswith("workspace-gateway")]
    ((network, endpoint),) = container.attrs["NetworkSettings"]["Networks"].items()
    assert endpoint["Gateway"], endpoint  # the host's address on the network, as the engine gives it
    assert line.startswith(f'from="{endpoint["Gateway"]}",'), line
    key = GatewayKeys(hub.data_dir / "gateway").client_key.read_text()
    ssh = [
        *("ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no"),
        *("-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10"),
        *("-p", str(ssh_identities.WORKSPACE_PORT), f"{ssh_identities.WORKSPACE_USER}@{endpoint['IPAddress']}"),
    ]
    # from the host's address on the network (where the gateway connects from): accepted
    own = tmp_path / "gateway_key"
    own.write_text(key)
    own.chmod(0o600)
    r = subprocess.run([*ssh, "-i", str(own), "echo in"], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "in", r.stderr
    # from another container on the owner's network, with the same key: refused
    script = 'umask 077; printf "%s" "$KEY" > /tmp/k; exec "$@"'
    with pytest.raises(docker.errors.ContainerError) as refused:
        client.containers.run(
            container.image.id,
            ["sh", "-c", script, "sh", *ssh, "-i", "/tmp/k", "echo in"],
            environment={"KEY": key},
            network=network,
            user="0",
            entrypoint=[],
            remove=True,
            labels={"workspace.deployment": hub.deployment, "workspace.test": "gateway-from"},
        )
    assert b"Permission denied" in refused.value.stderr, refused.value.stderr
