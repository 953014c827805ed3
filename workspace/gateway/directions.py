"""How a user connects: the exact ssh command, the gateway's host key to pin, ~/.ssh/config entries.

The pages, the API (`GET /api/ssh`) and the CLI (`workspace ssh`, `workspace ssh-config`) all say
it from here, so the command a student copies is the one the gateway reads (login.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select

from workspace.executions import Workspace
from workspace.gateway.keys import GatewayKeys
from workspace.ssh_identities import HOST_NAME, WorkspaceHostKey


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


def gateway_of(config, request_host: str) -> Gateway | None:
    """The gateway as this deployment configures it (c.SshGateway), named as the user reached the
    hub (`request_host`) unless `public_host` says otherwise; None where there is none."""
    section = config.SshGateway if "SshGateway" in config else {}
    port, keys_dir = section.get("port", 0), section.get("keys_dir", "")
    if not port or not keys_dir or not GatewayKeys(Path(keys_dir)).host_key.exists():
        return None
    key, print_ = GatewayKeys(Path(keys_dir)).host_public()
    return Gateway(host=section.get("public_host") or request_host, port=int(port), host_key=key, fingerprint=print_)


def workspaces_of(session, owner: str) -> list[dict]:
    """The owner's workspaces with their host key fingerprints (made at a first start with SSH)."""
    rows = session.execute(
        select(Workspace.name, WorkspaceHostKey.fingerprint)
        .outerjoin(WorkspaceHostKey, WorkspaceHostKey.workspace_id == Workspace.id)
        .where(Workspace.owner == owner)
        .order_by(Workspace.name)
    )
    return [{"name": name, "host_key_fingerprint": fingerprint} for name, fingerprint in rows]


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
