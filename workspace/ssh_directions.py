"""How a user connects: the exact ssh command, the gateway's host key to pin, ~/.ssh/config entries.

The pages, the API (`GET /api/ssh`) and the CLI (`workspace ssh`, `workspace ssh-config`) all say
it from here, so the command a student copies is the one the gateway reads (gateway/login.py).
Pure: no database, no files, so the CLI (which speaks only the REST API) uses it as the service does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# a workspace name ssh_config can hold as a Host (and a workspace's host key is issued under)
HOST_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


@dataclass(frozen=True)
class Gateway:
    host: str
    port: int
    host_key: str  # `ssh-ed25519 AAAA...`
    fingerprint: str

    def login(self, owner: str, workspace: str) -> str:
        return f"{owner}+{workspace}"

    def command(self, owner: str, workspace: str) -> str:
        port = "" if self.port == 22 else f"-p {self.port} "
        return f"ssh {port}{self.login(owner, workspace)}@{self.host}"

    @property
    def alias(self) -> str:
        """The name the gateway's host key is pinned under (the config entries' HostKeyAlias)."""
        return f"workspace-gateway-{self.host}" + ("" if self.port == 22 else f"-{self.port}")

    def known_hosts(self) -> str:
        """The known_hosts line that pins the gateway."""
        return f"{self.alias} {self.host_key}"

    def config(
        self, owner: str, workspaces: list[str], prefix: str = "ws-", known_hosts: str = "", identity: str = ""
    ) -> str:
        """~/.ssh/config entries: `ssh ws-thesis`, `scp f ws-thesis:`, VS Code's Remote-SSH host list."""
        out = [
            f"# SSH into your workspaces through {self.host}:{self.port} (`workspace ssh-config`).",
            f"# The gateway's host key: {self.fingerprint}",
        ]
        if not known_hosts:
            out.append(f"# Pin it: add this line to ~/.ssh/known_hosts:\n#   {self.known_hosts()}")
        for name in workspaces:
            if not HOST_NAME.match(name):
                continue  # not a name ssh_config can hold as a Host; `workspace ssh NAME` still reaches it
            out += [
                "",
                f"Host {prefix}{name}",
                f"    HostName {self.host}",
                f"    Port {self.port}",
                f"    User {self.login(owner, name)}",
                f"    HostKeyAlias {self.alias}",
            ]
            if known_hosts:
                out.append(f"    UserKnownHostsFile {known_hosts}")
            if identity:
                out.append(f"    IdentityFile {identity}")
            out.append("    ServerAliveInterval 30")
        return "\n".join(out) + "\n"

    def as_dict(self) -> dict:
        return {
            "host": self.host,
            "port": self.port,
            "host_key": self.host_key,
            "fingerprint": self.fingerprint,
            "known_hosts": self.known_hosts(),
        }


def directions(gateway: Gateway, owner: str, workspaces: list[dict]) -> dict:
    """What `GET /api/ssh` answers: the gateway, and for each workspace its login and command."""
    return {
        "enabled": True,
        "gateway": gateway.as_dict(),
        "workspaces": [
            {**w, "login": gateway.login(owner, w["name"]), "command": gateway.command(owner, w["name"])}
            for w in workspaces
        ],
        "config": gateway.config(owner, [w["name"] for w in workspaces]),
    }
