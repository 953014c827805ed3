"""Setup commands behind the Makefile: `up`, `down`, `images`, `prepare`.

    python -m workspace.setup.deploy up        engine, proxy, images, data; start the hub
    python -m workspace.setup.deploy down      stop the servers, the hub and its containers; keep data
    python -m workspace.setup.deploy images    build the images whose definition changed
    python -m workspace.setup.deploy prepare   engine, proxy, images, test tools (Chromium, PostgreSQL); no hub

Each step prints a line with its duration; a failure ends with one sentence
and the log to read (see workspace/setup/steps.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from workspace import data_dir, egress
from workspace.labelling import team as labelling_team
from workspace.settings import Settings
from workspace.setup import engine, images, postgres, proxy
from workspace.setup.steps import (
    ROOT,
    SetupError,
    apt_install,
    fail,
    refuse_port_in_use,
    run_logged,
    say,
    step,
    terminate,
)
from workspace.spawner import networks
from workspace.store import homes

CHP_VERSION = "^4.6"
PREFIX = "up"


def ensure_proxy(settings: Settings) -> Path:
    """Install configurable-http-proxy from npm into ./.node (once)."""
    chp = ROOT / ".node" / "node_modules" / ".bin" / "configurable-http-proxy"
    if chp.exists():
        return chp
    if shutil.which("npm") is None:
        raise SetupError("npm is not installed; run `apt-get install -y npm` (or install Node.js) and try again.")
    log = settings.path("logs", "npm.log")
    with step(PREFIX, "install configurable-http-proxy (npm)"):
        run_logged(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(ROOT / ".node"),
                f"configurable-http-proxy@{CHP_VERSION}",
            ],
            log,
            "Installing configurable-http-proxy with npm failed (is the npm registry reachable?)",
        )
    return chp


def build_images(settings: Settings, force: bool = False) -> list[str]:
    builder = images.ImageBuilder(log=settings.path("logs", "image-build.log"))
    return [builder.build(d, force=force) for d in images.definitions(ROOT / "images", settings.build_images)]


def ensure_tools(settings: Settings, tests: bool = False) -> None:
    """Debian tools the deployment uses: btrfs-progs (the home store), debootstrap (images);
    for the tests also chromium (the browser tests, driven by Playwright), a Chinese font (the
    manual's pictures of the pages in Chinese, which the browser tests take) and rsync (the
    baseline of benchmarks/homes.py). A tool is a command, or a file (a font)."""
    tools = (("btrfs-progs", "mkfs.btrfs"), ("debootstrap", "debootstrap")) + (
        (
            ("chromium", "chromium"),
            ("fonts-wqy-microhei", "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
            ("rsync", "rsync"),
        )
        if tests
        else ()
    )
    missing = [pkg for pkg, tool in tools if not (os.path.exists(tool) if tool.startswith("/") else shutil.which(tool))]
    if missing and os.geteuid() == 0:
        with step(PREFIX, f"install {' '.join(missing)} (Debian)"):
            apt_install(
                missing,
                settings.path("logs", "tools.log"),
                "The home store, the image builder, the browser tests and the benchmarks",
            )


def ensure_store(settings: Settings, prefix: str = PREFIX) -> None:
    """Put the home store on btrfs (constant-time restore and save) when possible (`prefix`: the command's
    lines; a restore mounts it as `make up` does)."""
    store = settings.store_dir
    if homes.is_btrfs(store):
        say(prefix, f"home store {store} is on btrfs (snapshots)")
        return
    if os.geteuid() != 0 or shutil.which("mkfs.btrfs") is None:
        say(
            prefix,
            f"home store {store} is not on btrfs and mounting one needs root and btrfs-progs: "
            "homes will be copied (slower starts and stops)",
        )
        return
    image = settings.path("store.btrfs")
    with step(prefix, f"mount the btrfs home store {image} ({settings.store_size}, sparse) at {store}"):
        try:
            homes.mount_loop_btrfs(image, store, size=settings.store_size)
        except subprocess.CalledProcessError as e:
            raise SetupError(
                f"Mounting the btrfs home store failed ({(e.stderr or b'').decode().strip() or e}); "
                f"set WORKSPACE_STORE_DIR to a directory on btrfs, or remove {image} to start afresh.",
            ) from e


def prepare(settings: Settings, tests: bool = False) -> None:
    """Everything the hub (and with `tests`, the test suite) needs: engine, proxy, images, tools;
    for the tests also a throwaway PostgreSQL server (workspace/setup/postgres.py), so that the
    database tests run on PostgreSQL as well as on SQLite."""
    for sub in ("logs", "run"):
        settings.path(sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    data_dir.close(settings.data_dir)  # also what an older `make up` left readable (#28)
    engine.ensure_engine(settings.path("logs", "dockerd.log"))
    ensure_proxy(settings)
    ensure_tools(settings, tests=tests)
    if tests:
        if os.geteuid() == 0 or postgres.bindir() is not None:
            postgres.ensure_installed(settings.path("logs", "tools.log"))
            postgres.start(settings.data_dir)
        else:
            say(PREFIX, "PostgreSQL is not installed and installing it needs root: its database tests will skip")
    build_images(settings)


# -- the hub process -----------------------------------------------------------


def hub_pid(settings: Settings) -> int | None:
    """The pid of this deployment's running hub, or None."""
    try:
        pid = int(settings.path("run", "jupyterhub.pid").read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def hub_answers(settings: Settings) -> str | None:
    """JupyterHub's version if the hub answers on its public URL, else None."""
    try:
        with urllib.request.urlopen(f"{settings.url}/hub/api/", timeout=3) as r:
            return json.load(r).get("version")
    except (OSError, ValueError):
        return None


def start_hub(settings: Settings, wait_s: float = 90, prefix: str = PREFIX) -> bool:
    """The proxy (a process of its own: kept if it runs, workspace/setup/proxy.py), then the hub; True if the
    proxy ran already (every route kept)."""
    log = settings.path("logs", "jupyterhub.log")
    kept = proxy.ensure(settings, ensure_proxy(settings), prefix)
    refuse_port_in_use(engine.bridge_gateway(), settings.hub_port, "WORKSPACE_HUB_PORT")
    with step(prefix, f"start JupyterHub (log: {log})"):
        env = dict(os.environ, WORKSPACE_DATA_DIR=str(settings.data_dir), PATH=_venv_path(), WORKSPACE_PROXY="external")
        mirrors = [] if "WORKSPACE_EGRESS_ALLOWED" in env else egress.package_mirrors()
        if mirrors:
            env["WORKSPACE_EGRESS_ALLOWED"] = ",".join(mirrors)
            say(PREFIX, f"this host reaches the package indexes at {', '.join(mirrors)}: workspaces and builds may too")
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(ROOT / "jupyterhub_config.py")],
                cwd=settings.data_dir,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + wait_s
        # ready when the pages answer too: the workspace service (the hub's child) starts after the hub
        while not (hub_answers(settings) and service_answers(settings)):
            if proc.poll() is not None:
                raise SetupError(f"JupyterHub exited with status {proc.returncode} at start.", log)
            if time.monotonic() > deadline:
                raise SetupError(f"JupyterHub did not answer on {settings.url} within {wait_s:.0f} s.", log)
            time.sleep(0.5)
    return kept


def service_answers(settings: Settings) -> bool:
    """Whether the workspace service (its pages and REST API) answers through the proxy."""
    try:
        with urllib.request.urlopen(f"{settings.url}/services/workspace/api/", timeout=3) as r:
            return r.status < 500
    except urllib.error.HTTPError as e:
        return e.code < 500  # 401, 404: it answers
    except OSError:
        return False


def _venv_path() -> str:
    return f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"


def up(settings: Settings) -> None:
    started = time.monotonic()
    prepare(settings)
    ensure_store(settings)
    generated = settings.generate_missing_secrets()
    if hub_pid(settings) and not proxy.ensure(settings, ensure_proxy(settings)):
        # the hub runs but its proxy was gone (and its keeper): a new one, given the hub's routes
        proxy.resync(settings, threading.Event(), wait_s=30)
    if hub_pid(settings) and hub_answers(settings):
        say(PREFIX, f"JupyterHub is already running at {settings.url}")
    else:
        start_hub(settings)
    say(PREFIX, f"ready in {time.monotonic() - started:.1f} s")
    print(
        f"""
JupyterHub {hub_answers(settings)} is running at {settings.url}/

  Log in as any user name with the user password; the admin logs in as
  "{settings.admin_user}" with the admin password.""",
    )
    if generated:
        print("\n  Generated now and shown only this once (kept in {}):".format(settings.secrets_file))
        for name in (n for n in generated if n != proxy.TOKEN):  # the proxy's token is the hub's business
            print(f"    {name}={settings.secrets[name]}")
    else:
        print(f"  The passwords are in {settings.secrets_file}.")
    if not site_authenticator(settings):
        print(SHARED_PASSWORD_WARNING)
    print(f"\n  Logs: {settings.path('logs')}/   Stop with: make down\n")


SHARED_PASSWORD_WARNING = """
  !!! FOR TRYING ONLY: anyone who knows the user password logs in under ANY
  !!! name (and so becomes that student). Before real students use it, run
  !!! with WORKSPACE_AUTH=native WORKSPACE_EMAIL_DOMAINS=<your domain> (sign-up
  !!! with the institution's e-mail, each account approved by an admin) or set
  !!! LDAP / OpenID Connect in data/jupyterhub_config.d/, and add TLS: see
  !!! docs/admin/production.md (the manual, Help) and SECURITY.md."""


def site_authenticator(settings: Settings) -> bool:
    """Whether a site file sets an authenticator (the shared password is then not in use)."""
    if os.environ.get("WORKSPACE_AUTH") == "native":
        return True
    return any(
        "authenticator_class" in f.read_text(errors="replace")
        for f in settings.path("jupyterhub_config.d").glob("*.py")
    )


def api(settings: Settings, method: str, path: str, body=None):
    """Call the hub's REST API with the operator token."""
    req = urllib.request.Request(
        f"{settings.url}/hub/api{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"token {settings.secrets['WORKSPACE_ADMIN_API_TOKEN']}"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


def stop_servers(settings: Settings, wait_s: float = 300) -> int:
    """Stop every running server through the hub, so each stops the normal way."""
    users = api(settings, "GET", "/users?state=active")
    pending = []
    for user in users:
        for server in user.get("servers", {}):
            path = f"/users/{user['name']}/servers/{server}" if server else f"/users/{user['name']}/server"
            api(settings, "DELETE", path)
            pending.append((user["name"], server))
    deadline = time.monotonic() + wait_s
    while pending and time.monotonic() < deadline:
        time.sleep(1)
        active = {(u["name"], s) for u in api(settings, "GET", "/users?state=active") for s in u.get("servers", {})}
        pending = [p for p in pending if p in active]
    return len(pending)


def down(settings: Settings) -> None:
    pid = hub_pid(settings)
    if pid and hub_answers(settings) and settings.secrets["WORKSPACE_ADMIN_API_TOKEN"]:
        with step("down", "stop the workspaces through the hub"):
            try:
                left = stop_servers(settings)
            except (OSError, urllib.error.HTTPError) as e:
                say("down", f"could not stop the workspaces through the hub ({e}); removing their containers")
                left = 0
            if left:
                say("down", f"{left} workspace(s) did not stop in time; removing their containers")
    if pid:
        with step("down", f"stop JupyterHub (pid {pid})"):
            if not terminate(pid, 30):
                say("down", f"JupyterHub (pid {pid}) did not exit in 30 s; it was killed")
    else:
        say("down", "JupyterHub is not running")
    if proxy.running(settings) or proxy.keeper(settings):
        with step("down", "stop the proxy"):
            proxy.stop(settings)
    removed = remove_containers(settings.deployment)
    if removed:
        say("down", f"removed {removed} leftover container(s)")
    say("down", f"stopped; all data is kept in {settings.data_dir}")


def remove_containers(deployment: str) -> int:
    c = engine.client()
    if c is None:
        return 0
    found = c.containers.list(all=True, filters={"label": f"workspace.deployment={deployment}"})
    # image builds carry no label (a commit would keep it): by their name
    found += [
        b
        for b in c.containers.list(all=True, filters={"name": f"{deployment}-build-"})
        if b.name.startswith(f"{deployment}-build-")
    ]
    for container in found:
        container.remove(force=True)
    networks.remove_all(c, deployment)  # the owners' networks, now unused
    labelling_team.remove_networks(c, deployment)  # and the courses' Label Studios' (#36)
    egress.remove_deployment(deployment)  # and the rules that guarded them
    return len(found)


def default_origins() -> None:
    """Per-user origins where browsers allow it (`make up`, `make upgrade`): every name under localhost is
    the loopback address (workspace/origins.py); WORKSPACE_SUBDOMAIN_HOST= turns it off."""
    if "WORKSPACE_SUBDOMAIN_HOST" not in os.environ and os.environ.get("WORKSPACE_IP", "127.0.0.1") == "127.0.0.1":
        os.environ["WORKSPACE_SUBDOMAIN_HOST"] = f"http://localhost:{os.environ.get('WORKSPACE_PORT', '8000')}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="workspace-admin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["up", "down", "images", "prepare"])
    parser.add_argument("--force", action="store_true", help="images: rebuild even when unchanged")
    args = parser.parse_args(argv)
    if args.command == "up":
        default_origins()
    settings = Settings.from_env(base=ROOT)
    # what every command here and every process it starts (the hub and its children) creates is
    # root's alone: the data directory holds every home and key (workspace/data_dir.py, #28)
    data_dir.restrict_umask()
    try:
        if args.command == "up":
            up(settings)
        elif args.command == "down":
            down(settings)
        elif args.command == "images":
            settings.path("logs").mkdir(parents=True, exist_ok=True)
            engine.ensure_engine(settings.path("logs", "dockerd.log"))
            build_images(settings, force=args.force)
        elif args.command == "prepare":
            prepare(settings, tests=True)
    except SetupError as e:
        fail(e)
    except KeyboardInterrupt:
        fail(SetupError("Interrupted."))


if __name__ == "__main__":
    main()
