"""A deployment's API keys (#33): for programs that call it without a JupyterHub login.

A key is `wsk_` and 43 URL-safe characters (256 random bits), shown once when it is made; the records keep
only its SHA-256, its first characters (to tell keys apart on the page), when it was made, last used and
revoked. A revoked key is refused at once (the router reads the table every half second). Keys are sent
as `Authorization: Bearer wsk_…` (or `X-API-Key`); the router removes them before the request reaches
the deployment, as it removes every credential of the platform.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from workspace.db import Database, utcnow
from workspace.errors import UserError

from .deployment import owned
from .policy import DeploymentPolicy
from .records import DeploymentKey

PREFIX = "wsk_"
SHAPE = re.compile(r"^wsk_[A-Za-z0-9_-]{43}$")
LABEL = re.compile(r"^[\w .,:()/@+-]{1,64}$")


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def make(db: Database, owner: str, name: str, label, policy: DeploymentPolicy) -> dict:
    """A new key of the deployment: its record, and the key itself (the only time it is shown)."""
    if label is None:
        label = "key"
    if not isinstance(label, str) or not LABEL.fullmatch(label):
        raise UserError(400, "A key's “label” is 1–64 letters, digits, spaces and simple punctuation.")
    key = PREFIX + secrets.token_urlsafe(32)
    with db.session() as s:
        dep = owned(s, owner, name)
        if len(dep.keys) >= policy.max_keys:
            raise UserError(
                403,
                "“{name}” has {count} keys, the most a deployment may have; delete one first.",
                name=name,
                count=len(dep.keys),
            )
        record = DeploymentKey(label=label, prefix=key[:10], digest=digest(key))
        dep.keys.append(record)
        s.flush()
        return {**record.as_dict(), "key": key}


def revoke(db: Database, owner: str, name: str, key_id: int) -> None:
    """Revoke a key: from now on it is refused (its record stays, marked revoked)."""
    with db.session() as s:
        dep = owned(s, owner, name)
        record = next((k for k in dep.keys if k.id == key_id), None)
        if record is None:
            raise UserError(404, "“{name}” has no key {id}.", name=name, id=key_id)
        record.revoked = record.revoked or utcnow()
