"""The public proxy as a process of its own (`make up`): configurable-http-proxy, which the hub only tells
its routes (`should_start` off in jupyterhub_config.py, with the token they share), run by a keeper
(`python -m workspace.setup.proxy`) that starts it again when it exits and then has the hub give it its
routes again (`POST /hub/api/proxy`), as JupyterHub does for a proxy it started itself.

A hub that stops (`make upgrade`) or dies leaves it running, and with it every route: an open notebook, a
terminal, a download or an SSH-less API call to a running workspace goes on while the hub is away; the
new hub finds the routes and corrects only what changed. This is how Zero to JupyterHub runs its proxy.
The hubs the tests start (tests/integration/hub.py) start their own proxy, as JupyterHub does by default.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from workspace.settings import Settings
from workspace.setup import engine
from workspace.setup.steps import ROOT, SetupError, refuse_port_in_use, say, step, terminate

TOKEN = "WORKSPACE_PROXY_AUTH_TOKEN"


def pid_file(settings: Settings) -> Path:
    return settings.path("run", "proxy.pid")


def keeper_pid_file(settings: Settings) -> Path:
    return settings.path("run", "proxy-keeper.pid")


def running(settings: Settings) -> int | None:
    """The pid of the proxy the pid file names, if it runs and is configurable-http-proxy."""
    return _alive(pid_file(settings), b"configurable-http-proxy")


def keeper(settings: Settings) -> int | None:
    """The pid of the proxy's keeper, if it runs."""
    return _alive(keeper_pid_file(settings), b"workspace.setup.proxy")


def _alive(path: Path, marker: bytes) -> int | None:
    """The pid `path` names, if that process runs and its command line holds `marker` (not a reused pid)."""
    try:
        pid = int(path.read_text().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return pid if marker in f.read() else None
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
    refuse_port_in_use(settings.ip, settings.port, "WORKSPACE_PORT")
    refuse_port_in_use("127.0.0.1", settings.proxy_api_port, "WORKSPACE_PROXY_API_PORT")
    if not settings.secrets.get(TOKEN):
        raise SetupError(f"The proxy has no token: set {TOKEN}, or run `make up`, which makes one.")
    log = settings.path("logs", "proxy.log")
    with step(prefix, f"start the proxy on {settings.ip}:{settings.port} (log: {log})"):
        env = dict(os.environ, CONFIGPROXY_AUTH_TOKEN=settings.secrets[TOKEN])
        with open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "workspace.setup.proxy", str(chp)],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # not the hub's child: it outlives the hub
            )
        keeper_pid_file(settings).write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + wait_s
        while not answers(settings):
            if proc.poll() is not None:
                raise SetupError(f"The proxy's keeper exited with status {proc.returncode} at start.", log)
            if time.monotonic() > deadline:
                stop(settings)  # not left trying again and again
                raise SetupError(f"The proxy did not answer on its API within {wait_s:.0f} s.", log)
            time.sleep(0.2)


def ensure(settings: Settings, chp: Path, prefix: str = "up") -> bool:
    """The proxy running with this deployment's token; True if one was running already (its routes kept)."""
    pid = running(settings)
    if pid and answers(settings) and keeper(settings):
        say(prefix, f"the proxy (pid {pid}) keeps running: every route to a running workspace is kept")
        return True
    if pid or keeper(settings):  # another token (an older release's hub's), no keeper, or a keeper between tries
        say(prefix, "the proxy running was not started by `make up`, lost its keeper or is down; replacing it")
        stop(settings)  # never two keepers, each starting its own on the same port
    start(settings, chp, prefix=prefix)
    return False


def stop(settings: Settings, wait_s: float = 10) -> None:
    """The keeper first (it ends the proxy it runs), then a proxy left without one."""
    for find, path in ((keeper, keeper_pid_file(settings)), (running, pid_file(settings))):
        pid = find(settings)  # looked up in turn: the keeper's end may have ended the proxy
        if pid:
            terminate(pid, wait_s)
            path.unlink(missing_ok=True)


# -- the keeper (a process of its own) ---------------------------------------------------------------


def keep(settings: Settings, chp: Path) -> None:
    """Run the proxy until SIGTERM; start it again when it exits (1 s, doubling to 30 s while it keeps
    failing at once), and each time have the hub give it its routes again."""
    child: list[subprocess.Popen] = []
    stopping = threading.Event()

    def on_term(*_) -> None:
        stopping.set()
        if child:
            child[-1].terminate()

    signal.signal(signal.SIGTERM, on_term)
    delay, first = 1.0, True
    while not stopping.is_set():
        started = time.monotonic()
        child.append(subprocess.Popen(command(settings, chp), stdin=subprocess.DEVNULL))
        pid_file(settings).write_text(f"{child[-1].pid}\n")
        if not first:
            threading.Thread(target=resync, args=(settings, stopping), daemon=True).start()
        code = child[-1].wait()
        if stopping.is_set():
            break
        delay = 1.0 if time.monotonic() - started > 60 else min(delay * 2, 30.0)
        print(f"[proxy keeper] the proxy exited with status {code}; starting it again in {delay:.0f} s", flush=True)
        first = False
        stopping.wait(delay)


def resync(settings: Settings, stopping: threading.Event, wait_s: float = 300) -> None:
    """Once the proxy answers again, ask the hub to give it every route (the hub may be away: retried)."""
    deadline = time.monotonic() + wait_s
    while not stopping.is_set() and time.monotonic() < deadline:
        if answers(settings):
            req = urllib.request.Request(  # the hub itself, not through the proxy: it has no route to it yet
                f"http://{engine.bridge_gateway()}:{settings.hub_port}/hub/api/proxy",
                method="POST",
                data=json.dumps({}).encode(),
                headers={"Authorization": f"token {settings.secrets['WORKSPACE_ADMIN_API_TOKEN']}"},
            )
            try:
                with urllib.request.urlopen(req, timeout=30):
                    print("[proxy keeper] the hub gave the proxy its routes again", flush=True)
                    return
            except (OSError, urllib.error.HTTPError) as e:
                print(f"[proxy keeper] asking the hub for the routes: {e}; trying again", flush=True)
        stopping.wait(2)


if __name__ == "__main__":
    keep(Settings.from_env(base=ROOT), Path(sys.argv[1]))
