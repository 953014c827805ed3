"""The public proxy as a process of its own (`make up`): configurable-http-proxy, which the hub only tells
its routes (`should_start` off in jupyterhub_config.py, with the token they share).

A hub that stops (`make upgrade`) or dies leaves it running, and with it every route: an open notebook, a
terminal, a download or an SSH-less API call to a running workspace goes on while the hub is away; the
new hub finds the routes and corrects only what changed. This is how Zero to JupyterHub runs its proxy.
The hubs the tests start (tests/integration/hub.py) start their own proxy, as JupyterHub does by default.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from workspace.settings import Settings
from workspace.setup import engine
from workspace.setup.steps import SetupError, port_in_use, say, step

TOKEN = "WORKSPACE_PROXY_AUTH_TOKEN"


def pid_file(settings: Settings) -> Path:
    return settings.path("run", "proxy.pid")


def running(settings: Settings) -> int | None:
    """The pid of the proxy the pid file names, if it runs and is configurable-http-proxy."""
    try:
        pid = int(pid_file(settings).read_text().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return pid if b"configurable-http-proxy" in f.read() else None
    except (OSError, ValueError):
        return None


def answers(settings: Settings) -> bool:
    """Whether the proxy's API answers this deployment's token (a proxy an older hub started has another)."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{settings.proxy_api_port}/api/routes",
        headers={"Authorization": f"token {settings.secrets.get(TOKEN, '')}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=3) as r:
            return r.status == 200
    except (OSError, urllib.error.HTTPError):
        return False


def command(settings: Settings, chp: Path) -> list[str]:
    """What JupyterHub itself would run (jupyterhub/proxy.py), with the routes' errors sent to the hub."""
    hub = f"http://{engine.bridge_gateway()}:{settings.hub_port}/hub/error"
    cmd = [str(chp), "--ip", settings.ip, "--port", str(settings.port)]
    cmd += ["--api-ip", "127.0.0.1", "--api-port", str(settings.proxy_api_port), "--error-target", hub]
    cmd += ["--log-level", "info"]
    if settings.subdomain_host:
        cmd.append("--host-routing")
    return cmd


def start(settings: Settings, chp: Path, wait_s: float = 30, prefix: str = "up") -> None:
    ports = (
        (settings.ip, settings.port, "WORKSPACE_PORT"),
        ("127.0.0.1", settings.proxy_api_port, "WORKSPACE_PROXY_API_PORT"),
    )
    for ip, port, what in ports:
        if port_in_use(ip, port):
            raise SetupError(
                f"Port {port} on {ip} is already in use by another program; stop it, "
                f"or choose another port with {what}=<port> make up."
            )
    if not settings.secrets.get(TOKEN):
        raise SetupError(f"The proxy has no token: set {TOKEN}, or run `make up`, which makes one.")
    log = settings.path("logs", "proxy.log")
    with step(prefix, f"start the proxy on {settings.ip}:{settings.port} (log: {log})"):
        env = dict(os.environ, CONFIGPROXY_AUTH_TOKEN=settings.secrets[TOKEN])
        with open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
            proc = subprocess.Popen(
                command(settings, chp),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # not the hub's child: it outlives the hub
            )
        pid_file(settings).write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + wait_s
        while not answers(settings):
            if proc.poll() is not None:
                raise SetupError(f"The proxy exited with status {proc.returncode} at start.", log)
            if time.monotonic() > deadline:
                raise SetupError(f"The proxy did not answer on its API within {wait_s:.0f} s.", log)
            time.sleep(0.2)


def ensure(settings: Settings, chp: Path, prefix: str = "up") -> bool:
    """The proxy running with this deployment's token; True if one was running already (its routes kept)."""
    pid = running(settings)
    if pid and answers(settings):
        say(prefix, f"the proxy (pid {pid}) keeps running: every route to a running workspace is kept")
        return True
    if pid:  # another token: what an older release's hub started (and left, killed): replaced
        say(prefix, f"the proxy (pid {pid}) was started by an older hub; replacing it")
        stop(settings)
    start(settings, chp, prefix=prefix)
    return False


def stop(settings: Settings, wait_s: float = 10) -> None:
    pid = running(settings)
    if not pid:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
    pid_file(settings).unlink(missing_ok=True)
