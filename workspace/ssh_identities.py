"""The SSH identities the platform makes (#16): each workspace's host key, each owner's own key pair.

- **A host key per workspace**, made at its first use and kept in the
  workspace database, so its fingerprint is the same in every execution,
  continued or fresh; a course's copy is another workspace with its own.
  The workspace page and `workspace ssh-config` show it, so a student can
  check it (and pin it) before trusting the connection.
- **A key pair per owner**, present in every workspace of theirs, so that
  `ssh thesis` from one of their workspaces to another needs no password;
  another owner's workspaces do not accept it (their `authorized_keys`
  hold their own owner's key).

Both are the user's own secrets, not the hub's: a student controls their
containers and may read them there; nothing of the hub's (its tokens, the
gateway's private key) is among them. Ed25519, made by `cryptography`.
"""

from __future__ import annotations

import datetime as dt

from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_ssh_private_key,
)
from sqlalchemy import DateTime, ForeignKey, Integer, String, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from workspace.db import Base, utcnow
from workspace.executions import Workspace
from workspace.ssh_directions import HOST_NAME
from workspace.ssh_keys import parse
from workspace.vault import Sealed


class WorkspaceHostKey(Base):
    __tablename__ = "workspace_host_keys"

    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"), primary_key=True)
    # OpenSSH format, unencrypted (the workspace's own); sealed at rest with the hub's key (workspace/vault.py)
    private_key: Mapped[str] = mapped_column(Sealed)
    public_key: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(64))
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class OwnerKeyPair(Base):
    __tablename__ = "owner_key_pairs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), unique=True)
    private_key: Mapped[str] = mapped_column(Sealed)  # sealed at rest, as the host key
    public_key: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(64))
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


def new_key_pair(comment: str) -> tuple[str, str, str]:
    """(private key in OpenSSH format, public key line, fingerprint) of a fresh Ed25519 key."""
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()).decode()
    public = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    _, print_, _ = parse(public)
    return private, f"{public} {comment}", print_


def host_key(session, workspace) -> WorkspaceHostKey:
    """The workspace's host key, made once (the caller's transaction commits it)."""
    found = session.get(WorkspaceHostKey, workspace.id)
    if found is None:
        private, public, print_ = new_key_pair(f"{workspace.owner}/{workspace.name}")
        found = WorkspaceHostKey(workspace_id=workspace.id, private_key=private, public_key=public, fingerprint=print_)
        session.add(found)
        session.flush()
    return found


def owner_pair(session, owner: str) -> OwnerKeyPair:
    """The owner's own key pair, made once."""
    found = session.scalar(select(OwnerKeyPair).where(OwnerKeyPair.owner == owner))
    if found is None:
        private, public, print_ = new_key_pair(f"{owner}'s workspaces")
        found = OwnerKeyPair(owner=owner, private_key=private, public_key=public, fingerprint=print_)
        session.add(found)
        session.flush()
    return found


def public_of(private_key: str) -> str:
    """The public key line of an OpenSSH private key (to check a stored pair)."""
    key = load_ssh_private_key(private_key.encode(), password=None)
    return key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


# the user sshd logs in (the image's uid 1000) and the port it listens on in every workspace
WORKSPACE_USER = "jovyan"
WORKSPACE_PORT = 2222
# where workspace-start writes what execution_env gives (the image's ssh_config.d includes its config)
RUN_DIR = "/run/workspace/ssh"
# a workspace name that may stand as an ssh_config Host and a DNS name: no dot (never
# mistaken for a real host such as github.com), no space, no pattern character


def host_alias(name: str) -> str:
    """The name a workspace's host key is pinned under in known_hosts."""
    return f"workspace-{name}"


def execution_env(session, workspace: Workspace, gateway_key: str, gateway_from: str | None, by_name: bool) -> dict:
    """The WORKSPACE_SSH_* variables of an execution of `workspace` (the image's workspace-start
    writes them to RUN_DIR and starts sshd): its host key; authorized_keys with the gateway's
    public key (limited to `gateway_from`, the address the gateway's connections come from) and
    the owner's own; the owner's key pair; and, with `by_name` (the owner's workspaces reach
    each other by name on their own network), an ssh_config entry and a pinned host key for
    each workspace of the owner. The caller's transaction commits what is made here."""
    host = host_key(session, workspace)
    pair = owner_pair(session, workspace.owner)
    limit = f'from="{gateway_from}",' if gateway_from else ""
    authorized = [
        f"{limit}no-agent-forwarding,no-X11-forwarding {gateway_key.strip()} workspace-gateway",
        f"no-agent-forwarding,no-X11-forwarding {pair.public_key}",
    ]
    config, known = [], []
    if by_name:
        siblings = session.scalars(select(Workspace).where(Workspace.owner == workspace.owner).order_by(Workspace.name))
        for other in siblings:
            if not HOST_NAME.match(other.name):
                continue
            known.append(_known(session, other))
            config.append(_entry(other.name, other.name))
    return {
        "WORKSPACE_SSH_HOST_KEY": host.private_key.strip(),
        "WORKSPACE_SSH_AUTHORIZED_KEYS": "\n".join(authorized),
        "WORKSPACE_SSH_ID": pair.private_key.strip(),
        "WORKSPACE_SSH_ID_PUB": pair.public_key,
        "WORKSPACE_SSH_CONFIG": "\n".join(config),
        "WORKSPACE_SSH_KNOWN_HOSTS": "\n".join(known),
    }


def _known(session, workspace: Workspace) -> str:
    """The known_hosts line pinning the workspace's host key under its alias."""
    key = host_key(session, workspace).public_key.split()
    return f"{host_alias(workspace.name)} {key[0]} {key[1]}"


def _entry(host: str, workspace_name: str) -> str:
    """An ssh_config entry: `host` is an sshd of workspace `workspace_name` (its host key, the owner's key)."""
    return (
        f"Host {host}\n"
        f"    HostName {host}\n"
        f"    Port {WORKSPACE_PORT}\n"
        f"    User {WORKSPACE_USER}\n"
        f"    IdentityFile {RUN_DIR}/id_workspace\n"
        f"    IdentitiesOnly yes\n"
        f"    HostKeyAlias {host_alias(workspace_name)}\n"
        f"    UserKnownHostsFile {RUN_DIR}/known_hosts\n"
        f"    StrictHostKeyChecking yes\n"
    )


def job_env(session, workspace: Workspace, hosts: list[str], env: dict) -> dict:
    """`env` (execution_env's) with an entry for each rank of a job over several nodes (#31): every rank
    runs sshd with the workspace's host key and the owner's key authorized, so `ssh HOST` and mpirun go
    from any rank to any other without a password or a question."""
    if not env.get("WORKSPACE_SSH_HOST_KEY"):
        return env
    config = "".join(_entry(h, workspace.name) for h in hosts)
    known = _known(session, workspace)
    return {
        **env,
        "WORKSPACE_SSH_CONFIG": "\n".join(part for part in (config, env.get("WORKSPACE_SSH_CONFIG", "")) if part),
        "WORKSPACE_SSH_KNOWN_HOSTS": "\n".join(p for p in (known, env.get("WORKSPACE_SSH_KNOWN_HOSTS", "")) if p),
    }


def workspaces_of(session, owner: str) -> list[dict]:
    """The owner's workspaces with their host key fingerprints (made at a first start with SSH)."""
    rows = session.execute(
        select(Workspace.name, WorkspaceHostKey.fingerprint)
        .outerjoin(WorkspaceHostKey, WorkspaceHostKey.workspace_id == Workspace.id)
        .where(Workspace.owner == owner)
        .order_by(Workspace.name)
    )
    return [{"name": name, "host_key_fingerprint": fingerprint} for name, fingerprint in rows]
