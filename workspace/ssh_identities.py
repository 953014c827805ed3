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

from .db import Base, utcnow
from .ssh_keys import parse


class WorkspaceHostKey(Base):
    __tablename__ = "workspace_host_keys"

    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"), primary_key=True)
    private_key: Mapped[str] = mapped_column(Text)  # OpenSSH format, unencrypted (the workspace's own)
    public_key: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(64))
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class OwnerKeyPair(Base):
    __tablename__ = "owner_key_pairs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), unique=True)
    private_key: Mapped[str] = mapped_column(Text)
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
