"""Is a browser attached to this workspace?

Three signals, the culler combines them:

- kernel websockets (an open notebook or console holds one per kernel),
- terminal websockets (an open terminal tab),
- the time of the last request made by a browser. JupyterLab polls the
  server while its tab is open, and the workspace JupyterLab plugin asks for
  notices every 30 s even from a background tab (browsers slow hidden tabs'
  timers to once a minute at most, they do not stop them).

A browser request is one authenticated by the hub's cookie, not by a token:
the culler, the hub and scripts use tokens, so they never count as a browser.
A request the server did not sign in (any client can send a `Cookie` header)
or refused never counts: else anyone who reaches the proxy could keep a
workspace, and its GPU, from ever being culled.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

# the port of the workspace's sshd (workspace/ssh_identities.py WORKSPACE_PORT, /etc/workspace/sshd_config)
SSH_PORT = 2222


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def iso(t: dt.datetime | None) -> str | None:
    return t.isoformat().replace("+00:00", "Z") if t else None


def signed_in(handler) -> bool:
    """Whether a finished request was made by a signed-in user and not refused: Jupyter Server's handlers
    find the user before they answer (`prepare`, which sets tornado's `_current_user`); a request it
    refused, or never looked at the user of, has none."""
    return bool(getattr(handler, "_current_user", None)) and handler.get_status() < 400


class BrowserActivity:
    def __init__(self):
        self.last_request: dt.datetime | None = None

    def install(self, web_app) -> None:
        """Watch every finished request (tornado's log_function hook)."""
        log_function = web_app.settings.get("log_function")

        def log_request(handler):
            self.observe(handler.request, signed_in(handler))
            if log_function is not None:
                log_function(handler)

        web_app.settings["log_function"] = log_request

    def observe(self, request, by_user: bool) -> None:
        """Count `request` as a browser's if a signed-in user made it (`by_user`, see `signed_in`) with
        the hub's cookie."""
        headers = request.headers
        if not by_user or "Authorization" in headers or "token" in request.arguments:
            return
        if "Cookie" in headers:
            self.last_request = utcnow()

    def report(self, web_app) -> dict:
        kernels = web_app.settings.get("kernel_manager")
        kernel_connections = 0
        busy = 0
        if kernels is not None:
            for model in kernels.list_kernels():
                kernel_connections += model.get("connections", 0)
                busy += model.get("execution_state") == "busy"
        terminal_connections = 0
        terminals = web_app.settings.get("terminal_manager")
        if terminals is not None:
            for term in terminals.terminals.values():
                terminal_connections += len(term.clients)
        return {
            "kernel_connections": kernel_connections,
            "terminal_connections": terminal_connections,
            "ssh_connections": ssh_connections(),
            "busy_kernels": busy,
            "last_browser_request": iso(self.last_request),
            "now": iso(utcnow()),
        }


def ssh_connections(proc: str = "/proc") -> int:
    """Open connections to this workspace's sshd: established TCP sockets on its port, in this
    container's network namespace (the gateway's relayed sessions and the owner's other workspaces)."""
    port = f"{SSH_PORT:04X}"
    count = 0
    for table in ("net/tcp", "net/tcp6"):
        try:
            lines = Path(proc, table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "01" and fields[1].rsplit(":", 1)[-1] == port:
                count += 1
    return count
