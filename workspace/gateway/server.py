"""The SSH gateway: a JupyterHub service on one port of the hub host.

    python -m workspace.gateway --hub-config=jupyterhub_config.py    (started by the hub)

`ssh -p 2222 ada+thesis@campus` reaches ada's workspace `thesis`:

1. **Who**: ada's registered keys (workspace/ssh_keys.py), looked up in the
   workspace database by fingerprint at every connection, so a removed key
   is refused at once; or a JupyterHub API token of ada's as the password,
   which must be allowed to use that server (`access:servers`).
2. **Whose**: the login's owner must be the one authenticated. Admins and
   instructors get nothing here that the API does not give them: the
   gateway lets nobody into another user's workspace.
3. **Where**: the hub says whether the workspace is ready, and the running
   execution's record where its sshd answers (the spawner's: the container's
   address on one host, the node's published port on a swarm); the gateway
   logs in with its own client key, checking the workspace's host key from
   the database. A workspace that is not running gets one line saying how to
   start it, or is started with `ada+thesis+start`, its progress shown.
4. **What**: sessions (shell, commands, sftp, scp, rsync) and `-L`
   forwarding are relayed (relay.py). Remote forwarding, agent and X11
   forwarding are refused.

What comes back from a workspace is the student's: the gateway only relays
it, and reads nothing of it but the SSH protocol itself.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import json
import logging
import signal
import sys
import time
from pathlib import Path
from urllib.parse import quote

import asyncssh
from sqlalchemy import select, update
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from traitlets import Float, Int, List, Unicode

from workspace import config, gateway_keys, i18n, ssh_identities
from workspace.db import database
from workspace.errors import UserError
from workspace.executions import find_workspace
from workspace.gateway.login import Login, parse
from workspace.gateway.relay import PENDING_WINDOW, GatewayRefusal, SessionRelay, locale_of, tunnel
from workspace.i18n import N_
from workspace.spawner import form as spawnform
from workspace.spawner.options import SpawnerOptions
from workspace.ssh_keys import SshKey

log = logging.getLogger("workspace.gateway")

# The client chooses among what the server offers, in ITS order: OpenSSH's puts chacha20-poly1305 (which
# asyncssh computes in several calls a packet) and aes128-ctr (with an HMAC, two) before AES-GCM (one call
# into OpenSSL), and umac-64-etm first among MACs, which asyncssh computes through ctypes in several calls a
# packet. Offering the SHA-2 HMACs only took a 1 GiB scp through the gateway from 107 to 163 MiB/s, and
# offering AES-GCM only took a 2 GiB scp to /dev/null (no disk in the way) from 168 to 218 MiB/s, 4 rounds
# each (#34, benchmarks/ssh.py): what a copy costs the gateway is its CPU. `SshGateway.ciphers` adds CTR back
# for clients without GCM (PuTTY before 0.76). The workspace's leg, where the gateway is the client, is GCM.
CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
MACS = ("hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com", "hmac-sha2-256", "hmac-sha2-512")
# a larger window than asyncssh's 2 MiB keeps a copy flowing across the two legs' round trips
WINDOW = 8 << 20


class SshGateway(config.HubService):
    """The SSH gateway (a JupyterHub service; jupyterhub_config.py sets its address from WORKSPACE_SSH_IP and
    WORKSPACE_SSH_PORT)."""

    name = "workspace-ssh-gateway"
    description = "SSH into one's workspaces through one port of the hub host."

    ip = Unicode("127.0.0.1", config=True, help="The address the gateway listens on (0.0.0.0: every interface).")
    port = Int(2222, config=True, help="The port the gateway listens on (`ssh -p PORT you+workspace@host`).")
    public_host = Unicode(
        "",
        config=True,
        help="""The host name users give ssh (the pages and `workspace ssh-config` print it);
        empty: the hub's public host.""",
    )
    keys_dir = Unicode("", config=True, help="The directory of the gateway's host and client keys (keys.py).")
    db_url = Unicode("", config=True, help="The workspace database (default: the spawner's).")
    connect_timeout = Float(15, config=True, help="Seconds to reach a workspace's sshd.")
    start_timeout = Float(600, config=True, help="Seconds a `+start` login waits for its workspace.")
    login_timeout = Float(60, config=True, help="Seconds a client has to authenticate.")
    max_channels_per_connection = Int(
        16,
        config=True,
        help="""Channels (sessions, `-L` forwardings) one client connection may have open at once; one
        more is refused. Until its workspace's side is open a channel holds at most
        relay.PENDING_WINDOW bytes of what the client sends.""",
    )
    max_channels_per_user = Int(
        32, config=True, help="Channels one user may have open at once over all their connections."
    )
    ciphers = List(
        Unicode(),
        list(CIPHERS),
        config=True,
        help="""The ciphers offered to users' clients, the client choosing among them in its own order.
        AES-GCM only by default, the cheapest for the gateway (OpenSSH since 6.2, PuTTY since 0.76, Paramiko,
        Go's x/crypto/ssh); add "aes128-ctr" for older clients, which slows every OpenSSH client's copy by
        about a quarter (OpenSSH prefers CTR to GCM).""",
    )
    aliases = {"hub-config": "SshGateway.hub_config"}

    def initialize(self, argv=None):
        self.channels_of: collections.Counter = collections.Counter()  # open channels per user
        config.load(self, argv)
        spawner = SpawnerOptions(self.config)
        self.db_url = self.db_url or spawner.db_url
        self._key_file = spawner.secret_key_file
        self.keys = gateway_keys.ensure(Path(self.keys_dir))
        self.client_key = asyncssh.import_private_key(self.keys.client_key.read_text())
        self.http = None

    @property
    def db(self):
        return database(self.db_url, self._key_file)

    # -- the hub ---------------------------------------------------------------------

    async def hub(self, method: str, path: str, token: str | None = None, body=None, timeout: float = 30):
        if self.http is None:
            self.http = AsyncHTTPClient(force_instance=True, max_body_size=64 << 20)
        req = HTTPRequest(
            self.hub_api_url.rstrip("/") + path,
            method=method,
            headers={"Authorization": f"token {token or self.api_token}"},
            body=None if body is None else json.dumps(body),
            request_timeout=timeout,
            allow_nonstandard_methods=True,
        )
        resp = await self.http.fetch(req)
        return json.loads(resp.body) if resp.body else None

    async def server(self, login: Login) -> dict | None:
        """The hub's model of the login's server, or None when it has none."""
        try:
            user = await self.hub("GET", f"/users/{quote(login.owner, safe='')}")
        except HTTPClientError as e:
            if e.code == 404:
                return None
            raise
        return (user.get("servers") or {}).get(login.workspace)

    def ssh_address(self, login: Login) -> tuple[str, int] | None:
        """Where the running execution's sshd answers (blocking): the address its spawner recorded,
        never what the workspace says."""
        with self.db.session() as s:
            workspace = find_workspace(s, login.owner, login.workspace)
            # the workspace's own server: a run beside it (#31) is not where `ssh thesis` goes
            running = (
                [e for e in workspace.executions if e.state == "running" and e.server is None] if workspace else []
            )
            recorded = running[-1].ssh_address if running else None
        if not recorded:
            return None
        host, _, port = recorded.rpartition(":")
        return host, int(port)

    async def start(self, login: Login, say, locale: str = "en") -> None:
        """Start the workspace with its latest output, saying its progress (in `locale`)."""
        path = f"/users/{quote(login.owner, safe='')}/servers/{quote(login.workspace, safe='')}"
        say(
            i18n.translate(
                locale, "Starting {workspace} (continuing from its latest output)...", workspace=login.workspace
            )
        )
        options = await asyncio.to_thread(self.start_options, login)
        try:
            await self.hub("POST", path, body={"user_options": options})
        except HTTPClientError as e:
            text = _hub_message(e)
            if e.code != 400 or "already" not in text.lower():
                raise GatewayRefusal(
                    N_("{workspace} could not be started: {reason}"), workspace=login.workspace, reason=text
                ) from None
        follow = asyncio.ensure_future(self._follow_progress(path, say))
        try:
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline:
                server = await self.server(login)
                if server and server.get("ready"):
                    return
                if not server or not server.get("pending"):
                    raise GatewayRefusal(
                        N_("{workspace} did not start; open it on the web pages to see why"), workspace=login.workspace
                    )
                await asyncio.sleep(1)
            raise GatewayRefusal(
                N_("{workspace} did not start in {seconds:.0f} s"),
                workspace=login.workspace,
                seconds=self.start_timeout,
            )
        finally:
            follow.cancel()

    def start_options(self, login: Login) -> dict:
        """What `+start` asks the hub for (blocking), said in full, as the pages' Start does unchanged: the
        latest output with its datasets and resource type. No image: the workspace's own runs (its
        course's, else the site's). An empty request would get what JupyterHub kept of an earlier start."""
        refs, resource_type = spawnform.continued(self.db, login.owner, login.workspace, "latest")
        return spawnform.options_from_page("latest", ",".join(refs), resource_type, {})

    async def _follow_progress(self, path: str, say) -> None:
        """Say each event of the hub's progress stream (server-sent events) as it comes."""
        buffer = b""

        def chunk(data: bytes) -> None:
            nonlocal buffer
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.startswith(b"data:"):
                    try:
                        event = json.loads(line[5:])
                    except ValueError:
                        continue
                    if isinstance(event, dict) and event.get("message"):
                        say(f"[{event.get('progress', '')}%] {event['message']}")

        req = HTTPRequest(
            f"{self.hub_api_url.rstrip('/')}{path}/progress",
            headers={"Authorization": f"token {self.api_token}"},
            streaming_callback=chunk,
            request_timeout=self.start_timeout,
        )
        try:
            await self.http.fetch(req, raise_error=False)
        except (OSError, asyncio.TimeoutError) as e:
            log.info("progress of %s: %s", path, e)

    # -- who ---------------------------------------------------------------------------

    def key_owner(self, fingerprint: str, owner: str) -> bool:
        """Whether `owner` registered the key (blocking); its last use is recorded."""
        with self.db.session() as s:
            row = s.scalar(select(SshKey).where(SshKey.fingerprint == fingerprint, SshKey.owner == owner))
            if row is None:
                return False
            s.execute(update(SshKey).where(SshKey.id == row.id).values(last_used=dt.datetime.utcnow()))
            return True

    async def token_allows(self, token: str, login: Login) -> bool:
        """Whether `token` is the owner's and may use their server (the API's own rule)."""
        try:
            model = await self.hub("GET", "/user", token=token, timeout=10)
        except (HTTPClientError, OSError, json.JSONDecodeError):
            return False
        if not isinstance(model, dict) or model.get("name") != login.owner:
            return False
        scopes = set(model.get("scopes") or [])
        wanted = {
            "access:servers",
            f"access:servers!user={login.owner}",
            f"access:servers!server={login.owner}/{login.workspace}",
        }
        return bool(scopes & wanted)

    def host_key(self, login: Login) -> str | None:
        """The workspace's public host key (blocking), which its sshd must present."""
        with self.db.session() as s:
            workspace = find_workspace(s, login.owner, login.workspace)
            if workspace is None:
                return None
            return ssh_identities.host_key(s, workspace).public_key

    # -- listening -------------------------------------------------------------------

    async def serve(self) -> None:
        server = await asyncssh.create_server(
            lambda: GatewayConnection(self),
            self.ip,
            self.port,
            server_host_keys=[str(self.keys.host_key)],
            login_timeout=self.login_timeout,
            keepalive_interval=30,
            agent_forwarding=False,
            x11_forwarding=False,
            allow_scp=False,
            encoding=None,
            encryption_algs=list(self.ciphers),
            mac_algs=MACS,
            line_editor=False,  # every byte is the workspace's sshd's to echo or edit: none passes asyncssh's editor
            window=WINDOW,
        )
        log.info("SSH gateway on %s:%s, host key %s", self.ip, self.port, self.keys.host_public()[1])
        # JupyterHub stops a service with SIGINT, then SIGTERM: a process started in the background by a
        # shell inherits SIGINT ignored, so without these the hub waited out its timeouts on every stop
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("SSH gateway stopping")
        server.close()
        await server.wait_closed()


class GatewayConnection(asyncssh.SSHServer):
    """One client connection: its login, identity, and its connection to the workspace."""

    def __init__(self, gateway: SshGateway):
        self.gateway = gateway
        self.login: Login | None = None
        self.peer = "?"
        self.conn = None
        self.upstream: asyncio.Future | None = None
        self.lock = asyncio.Lock()
        self.channels = 0  # open now (counted in the gateway's per-user count too)

    def connection_made(self, conn):
        self.conn = conn
        self.peer = (conn.get_extra_info("peername") or ("?",))[0]

    def connection_lost(self, exc):
        self._release(self.channels)
        if self.upstream is None:
            return
        if not self.upstream.done():
            # the client went while its workspace's side was being made (a `+start` waits up to
            # start_timeout): stop waiting for it and following its progress (the hub's start goes on)
            self.upstream.cancel()
        elif not self.upstream.cancelled() and not self.upstream.exception():
            self.upstream.result().close()

    def begin_auth(self, username):
        try:
            self.login = parse(username)
        except UserError as e:
            self.conn.send_auth_banner(e.jupyterhub_message + "\r\n")
            self.login = None
        return True

    def public_key_auth_supported(self):
        return True

    def password_auth_supported(self):
        return True

    async def validate_public_key(self, username, key):
        if self.login is None:
            return False
        fingerprint = key.get_fingerprint("sha256")
        ok = await asyncio.to_thread(self.gateway.key_owner, fingerprint, self.login.owner)
        log.info("%s key %s for %s from %s", "accepted" if ok else "refused", fingerprint, self.login.label, self.peer)
        return ok

    async def validate_password(self, username, password):
        if self.login is None or not password or len(password) > 512:
            return False
        ok = await self.gateway.token_allows(password, self.login)
        log.info("%s token for %s from %s", "accepted" if ok else "refused", self.login.label, self.peer)
        if not ok:
            await asyncio.sleep(1)  # a wrong password costs the guesser a second
        return ok

    def session_requested(self):
        chan = self._count(self.conn.create_server_channel(encoding=None, window=PENDING_WINDOW))
        return chan, SessionRelay(self.open_upstream, WINDOW)

    def connection_requested(self, dest_host, dest_port, orig_host, orig_port):
        chan = self._count(self.conn.create_tcp_channel(window=PENDING_WINDOW))
        return chan, tunnel(self.open_upstream, dest_host, dest_port, WINDOW)

    def _count(self, chan):
        """Count a new channel until it closes, or refuse it beyond the connection's or the user's limit.
        It opens with a small window (relay.PENDING_WINDOW), widened once its workspace's side is open, so
        that a channel waiting for a start holds little of what the client sends."""
        gateway, owner = self.gateway, self.login.owner
        if self.channels >= gateway.max_channels_per_connection or gateway.channels_of[owner] >= (
            gateway.max_channels_per_user
        ):
            log.info("channel of %s from %s refused: %d open", self.login.label, self.peer, gateway.channels_of[owner])
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_RESOURCE_SHORTAGE,
                i18n.translate(
                    i18n.DEFAULT,
                    "too many channels open at once ({connection} on this connection, {user} of yours); close one",
                    connection=self.channels,
                    user=gateway.channels_of[owner],
                ),
            )
        self.channels += 1
        gateway.channels_of[owner] += 1
        asyncio.ensure_future(chan.wait_closed()).add_done_callback(lambda _: self._release(1))
        return chan

    def _release(self, count: int) -> None:
        count = min(count, self.channels)
        if count and self.login is not None:
            self.channels -= count
            owner = self.login.owner
            self.gateway.channels_of[owner] -= count
            if self.gateway.channels_of[owner] <= 0:
                del self.gateway.channels_of[owner]

    def server_requested(self, listen_host, listen_port):
        return False  # remote forwarding would open a port on the hub host

    async def open_upstream(self, chan):
        """The connection to the workspace's sshd, made once per client connection."""
        async with self.lock:
            if self.upstream is None or (self.upstream.done() and self.upstream.exception()):
                self.upstream = asyncio.ensure_future(self._connect(chan))
        return await asyncio.shield(self.upstream)

    async def _connect(self, chan):
        gateway, login = self.gateway, self.login
        locale = locale_of(chan)

        def say(line: str) -> None:
            if chan is not None:
                chan.write(f"{line}\r\n".encode(), asyncssh.EXTENDED_DATA_STDERR)

        server = await gateway.server(login)
        if not server or not server.get("ready"):
            if not login.start:
                raise GatewayRefusal(
                    N_(
                        "{workspace} is not running. Start it on the web pages, with "
                        "`workspace start {workspace}`, or log in as "
                        "{owner}+{workspace}+start to start it now."
                    ),
                    workspace=login.workspace,
                    owner=login.owner,
                )
            await gateway.start(login, say, locale)
            say(i18n.translate(locale, "{workspace} is running.", workspace=login.workspace))
        address = await asyncio.to_thread(gateway.ssh_address, login)
        if address is None:
            raise GatewayRefusal(
                N_(
                    "{workspace} runs without SSH (it started before SSH was set up here, or on an engine "
                    "without it); restart it to connect"
                ),
                workspace=login.workspace,
            )
        host_key = await asyncio.to_thread(gateway.host_key, login)
        if host_key is None:
            raise GatewayRefusal(
                N_("{workspace} has no SSH identity yet; restart it once to enable SSH"), workspace=login.workspace
            )
        trusted = asyncssh.import_public_key(host_key)
        host, port = address
        conn = await asyncio.wait_for(
            asyncssh.connect(
                host,
                port,
                username=ssh_identities.WORKSPACE_USER,
                client_keys=[gateway.client_key],
                known_hosts=([trusted], [], []),
                config=None,
                agent_path=None,
                preferred_auth="publickey",
                keepalive_interval=30,
                encryption_algs=CIPHERS,
                window=WINDOW,
            ),
            gateway.connect_timeout,
        )
        log.info("%s from %s relayed to %s:%s", login.label, self.peer, host, port)
        return conn


def _hub_message(e: HTTPClientError) -> str:
    try:
        return json.loads(e.response.body).get("message") or str(e)
    except Exception:
        return str(e)


def main(argv=None) -> None:
    from workspace.process import die_with_the_hub

    die_with_the_hub()
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s")
    logging.getLogger("asyncssh").setLevel(logging.WARNING)
    app = SshGateway()
    app.initialize(sys.argv[1:] if argv is None else argv)
    asyncio.run(app.serve())
