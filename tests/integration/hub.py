"""A real JupyterHub process run from the project's jupyterhub_config.py.

Each `Hub` gets its own data directory, free ports and deployment name, so
tests never touch the data or containers of a `make up` deployment.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import requests

from workspace import egress
from workspace.settings import Settings
from workspace.setup import deploy, engine

ROOT = Path(__file__).resolve().parents[2]
USER_PASSWORD = "student-pass-1234"
ADMIN_PASSWORD = "admin-pass-" + "x" * 32


def free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


class Hub:
    def __init__(self, data_dir: Path, store_dir: Path | None = None, **env):
        self.data_dir = data_dir
        self.deployment = f"wstest-{uuid.uuid4().hex[:8]}"
        gateway = engine.bridge_gateway()
        self.env = {
            "WORKSPACE_DATA_DIR": str(data_dir),
            "WORKSPACE_PORT": str(free_port("127.0.0.1")),
            "WORKSPACE_PROXY_API_PORT": str(free_port("127.0.0.1")),
            "WORKSPACE_HUB_PORT": str(free_port(gateway)),
            "WORKSPACE_SERVICE_PORT": str(free_port("127.0.0.1")),
            "WORKSPACE_ROUTER_PORT": str(free_port("127.0.0.1")),
            "WORKSPACE_SSH_PORT": str(free_port("127.0.0.1")),
            "WORKSPACE_DEPLOYMENT": self.deployment,
            "WORKSPACE_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "WORKSPACE_USER_PASSWORD": USER_PASSWORD,
            "WORKSPACE_ADMIN_API_TOKEN": uuid.uuid4().hex,
            "WORKSPACE_STORE_DIR": str(store_dir or data_dir / "store"),
            "WORKSPACE_EGRESS_ALLOWED": os.environ.get("WORKSPACE_EGRESS_ALLOWED")
            or ",".join(egress.package_mirrors()),
            **env,
        }
        if self.env.get("WORKSPACE_SUBDOMAIN_HOST") == "localhost":  # per-user origins on this hub's port
            self.env["WORKSPACE_SUBDOMAIN_HOST"] = f"http://localhost:{self.env['WORKSPACE_PORT']}"
        self.settings = Settings.from_env(self.env)
        self.url = self.settings.url
        self.log_path = data_dir / "logs" / "jupyterhub.log"
        self.proc: subprocess.Popen | None = None
        self.killed = False  # the last stop needed SIGKILL

    # -- process ------------------------------------------------------------

    def start(self, timeout: float = 60) -> "Hub":
        for sub in ("logs", "run"):
            (self.data_dir / sub).mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **self.env)
        env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(ROOT / "jupyterhub_config.py")],
                cwd=self.data_dir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # as a shell's background job (`make up &`) starts it: SIGINT ignored, which its services
                # inherit, so each must stop on the hub's signals by its own handlers
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterHub exited with {self.proc.returncode}:\n{self.log_tail()}")
            if deploy.hub_answers(self.settings):
                return self
            time.sleep(0.3)
        # nobody holds a hub that did not come up: stopped here, or it runs (with its services and egress
        # chains) for the rest of the suite and after it
        self._end()
        raise RuntimeError(f"JupyterHub did not answer in {timeout} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                deploy.stop_servers(self.settings, wait_s=60)
            except Exception as e:  # the hub may be broken by the test; clean up anyway
                print(f"stopping servers through the hub failed: {e}")
        self._end()

    def _end(self) -> None:
        """The hub process (its services and proxy go with it), then whatever of the deployment is left."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                print(f"JupyterHub {self.deployment} did not stop in 30 s after SIGTERM; killing it")
                self.killed = True  # (its proxy is left running: only an orderly stop ends it)
                self.proc.kill()
                self.proc.wait(10)
        deploy.remove_containers(self.deployment)

    def log_tail(self, lines: int = 80) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    # -- REST API -----------------------------------------------------------

    @property
    def admin_token(self) -> str:
        return self.env["WORKSPACE_ADMIN_API_TOKEN"]

    def api(self, method: str, path: str, token: str | None = None, **kwargs) -> requests.Response:
        headers = kwargs.pop("headers", {})
        headers["Authorization"] = f"token {token or self.admin_token}"
        return requests.request(method, f"{self.url}/hub/api{path}", headers=headers, timeout=30, **kwargs)

    def create_user(self, name: str) -> None:
        r = self.api("POST", f"/users/{name}")
        assert r.status_code in (201, 409), r.text

    def service_api(self, path: str, token: str | None, **params) -> requests.Response:
        """GET from the workspace service's REST API."""
        headers = {"Authorization": f"token {token}"} if token else {}
        return requests.get(
            f"{self.url}/services/workspace/api{path}",
            headers=headers,
            params=params,
            timeout=30,
            allow_redirects=False,
        )

    def service_call(self, method: str, path: str, token: str, **kwargs) -> requests.Response:
        """Any method on the workspace service's REST API, with a token."""
        return requests.request(
            method,
            f"{self.url}/services/workspace/api{path}",
            headers={"Authorization": f"token {token}"},
            timeout=60,
            **kwargs,
        )

    def user_token(self, name: str, password: str = USER_PASSWORD) -> str:
        """A token of `name` obtained with the shared user password, as a student would."""
        self.create_user(name)
        r = requests.post(
            f"{self.url}/hub/api/users/{name}/tokens",
            json={"auth": {"username": name, "password": password}},
            timeout=30,
        )
        assert r.status_code == 201, r.text
        return r.json()["token"]

    def browser_login(self, user: str, password: str = USER_PASSWORD) -> requests.Session:
        """A session logged in through the hub's login form, as a browser would be."""
        browser = requests.Session()
        browser.get(f"{self.url}/hub/login", timeout=30)
        r = browser.post(
            f"{self.url}/hub/login",
            timeout=30,
            data={"username": user, "password": password, "_xsrf": browser.cookies.get("_xsrf")},
        )
        # login lands on the workspaces page (through the service's OAuth)
        assert r.status_code == 200 and "/services/workspace/workspaces" in r.url, (r.status_code, r.url)
        return browser

    def spawn(self, user: str, server: str, token: str, user_options: dict | None = None) -> requests.Response:
        return self.api(
            "POST",
            f"/users/{user}/servers/{server}",
            token=token,
            json={"user_options": user_options or {}, "display_name": server},
        )

    def progress(self, user: str, server: str, token: str, timeout: float = 180) -> list[dict]:
        """Follow the progress stream (server-sent events) to its end."""
        events = []
        with requests.get(
            f"{self.url}/hub/api/users/{user}/servers/{server}/progress",
            headers={"Authorization": f"token {token}"},
            stream=True,
            timeout=timeout,
        ) as r:
            assert r.status_code == 200, r.text
            for line in r.iter_lines(decode_unicode=True):
                if line and line.startswith("data:"):
                    event = json.loads(line[5:])
                    events.append(event)
                    if event.get("ready") or event.get("failed"):
                        break
        return events

    def start_workspace(self, user: str, server: str, token: str, **user_options) -> list[dict]:
        """Start a workspace and follow its progress to ready; return the events."""
        r = self.spawn(user, server, token, user_options)
        assert r.status_code in (201, 202), r.text
        events = self.progress(user, server, token)
        assert events[-1].get("ready"), events
        return events

    def stop_workspace(self, user: str, server: str, token: str | None = None) -> None:
        r = self.api("DELETE", f"/users/{user}/servers/{server}", token=token)
        assert r.status_code in (202, 204), r.text
        self.wait_stopped(user, server)

    def sh(self, user: str, server: str, script: str) -> str:
        """Run a shell script in the workspace's container as its user; return stdout+stderr."""
        (container,) = self.containers(user=user, server=server)
        code, out = container.exec_run(["bash", "-lc", script], user="1000")
        text = out.decode(errors="replace")
        assert code == 0, f"exit {code}: {text}"
        return text

    def wait_stopped(self, user: str, server: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            model = self.api("GET", f"/users/{user}").json()
            s = model.get("servers", {}).get(server)
            if not s:
                return
            time.sleep(0.5)
        raise AssertionError(f"{user}/{server} did not stop in {timeout} s")

    def containers(self, **labels):
        c = engine.client()
        filters = [f"workspace.deployment={self.deployment}"] + [f"workspace.{k}={v}" for k, v in labels.items()]
        return c.containers.list(all=True, filters={"label": filters})

    def live_home(self, user: str, server: str) -> Path:
        """The host directory mounted at /openbayes/home in the running workspace."""
        (container,) = self.containers(user=user, server=server)
        (mount,) = [m for m in container.attrs["Mounts"] if m["Destination"] == "/openbayes/home"]
        return Path(mount["Source"])

    def executions(self, user: str, server: str) -> list[dict]:
        """The workspace's execution records, read from its database."""
        from workspace.db import Database
        from workspace.executions import find_workspace

        with Database(self.settings.db_url, migrate=False, key_file=self.settings.secret_key_file).session() as s:
            ws = find_workspace(s, user, server)
            return [e.as_dict() for e in ws.executions] if ws else []

    def report_auth(self, user: str, server: str) -> dict:
        """The header the culler sends to the running workspace (its execution's report key)."""
        from workspace.db import Database
        from workspace.executions import find_workspace

        with Database(self.settings.db_url, migrate=False, key_file=self.settings.secret_key_file).session() as s:
            ws = find_workspace(s, user, server)
            key = max(ws.executions, key=lambda e: e.number).report_key
        return {"Authorization": f"workspace-report {key}"}

    def container_logs(self) -> str:
        out = []
        for c in self.containers():
            out.append(f"--- container {c.name} ({c.status}) ---\n{c.logs(tail=100).decode(errors='replace')}")
        return "\n".join(out)
