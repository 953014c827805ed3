"""SSH public keys a user registers, to reach their workspaces by SSH (#16).

A key is one line of an OpenSSH `authorized_keys`/`.pub` file: `TYPE BASE64
[COMMENT]`. It is parsed by the `cryptography` library (the key must load: a
well-formed blob of an accepted type and size), never by hand, and stored
as its canonical form (type and base64 re-encoded from the loaded key), so
what is later written into a workspace's `authorized_keys` is exactly a key:
no option (`command=`, `from=`...), no second line, no control character can
come from what a student typed. Accepted: Ed25519, ECDSA (P-256/384/521) and
RSA of 2048 bits or more (what OpenSSH 8.8+ accepts by default; DSA is gone).

Keys are the user's own: they are listed, added and removed by their owner
(an administrator may list and remove anyone's). The fingerprint is
OpenSSH's (`SHA256:` and the unpadded base64 of the blob's SHA-256), which
`ssh-keygen -lf` prints, so a student can tell their keys apart.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import re

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_ssh_public_key
from sqlalchemy import DateTime, Integer, String, Text, UniqueConstraint, select
from sqlalchemy.orm import Mapped, mapped_column

from workspace.db import Base, utcnow
from workspace.errors import UserError

MAX_KEYS = 20  # per user: enough for every laptop and lab machine, bounded for the gateway's lookups
MAX_LINE = 16 * 1024  # an RSA-16384 key is about 2.8 kB of base64
MAX_COMMENT = 100
MIN_RSA_BITS = 2048
# OpenSSH's names of the accepted types (ssh-dss is gone from OpenSSH; FIDO `sk-` keys are not supported yet)
TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa")
# each refusal of a key ends with how to give one ("Paste the contents of your public key file ..."), written out
# in each: a translator translates whole sentences


class SshKey(Base):
    __tablename__ = "ssh_keys"
    __table_args__ = (UniqueConstraint("owner", "fingerprint"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    # the canonical `TYPE BASE64` (no comment, no option): what authorized_keys receives
    key: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(64), index=True)  # SHA256:... (OpenSSH's)
    comment: Mapped[str] = mapped_column(String(MAX_COMMENT), default="")
    added: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    last_used: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)

    def as_dict(self) -> dict:
        kind = self.key.split(" ", 1)[0]
        return {
            "id": self.id,
            "type": kind,
            "fingerprint": self.fingerprint,
            "comment": self.comment,
            "added": self.added.isoformat() + "Z" if self.added else None,
            "last_used": self.last_used.isoformat() + "Z" if self.last_used else None,
        }


def fingerprint(blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint of a key blob (as `ssh-keygen -lf` prints it)."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _not_accepted(kind: str) -> UserError:
    return UserError(
        400,
        "{kind} keys are not accepted; use Ed25519, ECDSA or RSA. Paste the contents of your public key file "
        "(for example ~/.ssh/id_ed25519.pub); make one with `ssh-keygen -t ed25519`.",
        kind=kind,
    )


def parse(text) -> tuple[str, str, str]:
    """(canonical key, fingerprint, comment) of one public key line, or the user's 400 saying what is wrong."""
    line = _one_line(text)
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(("ssh-", "ecdsa-")):
        raise UserError(
            400,
            "That is not an OpenSSH public key, which starts with ssh-ed25519, ecdsa-sha2-… or ssh-rsa "
            "(options such as command= are not accepted). Paste the contents of your public key file (for example "
            "~/.ssh/id_ed25519.pub); make one with `ssh-keygen -t ed25519`.",
        )
    kind, data = parts[0], parts[1]
    comment = parts[2].strip() if len(parts) > 2 else ""
    key = _load(kind, data)
    # re-encoded from the loaded key: trailing bytes or another encoding of the same key are not kept
    canonical = key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    blob = base64.b64decode(canonical.split()[1])
    # a comment is shown back on the pages and the CLI: printable, one line, bounded
    comment = re.sub(r"[^\x20-\x7e\u00a0-\uffff]", "", comment)[:MAX_COMMENT]
    return canonical, fingerprint(blob), comment


def _one_line(text) -> str:
    """The pasted text's one line: not empty, not too long, not a private key, not several keys."""
    if not isinstance(text, str) or not text.strip():
        raise UserError(
            400,
            "The key is empty. Paste the contents of your public key file (for example ~/.ssh/id_ed25519.pub); "
            "make one with `ssh-keygen -t ed25519`.",
        )
    if len(text) > MAX_LINE:
        raise UserError(
            400,
            "That is longer than any public key ({length:,} characters). Paste the contents of your public key "
            "file (for example ~/.ssh/id_ed25519.pub); make one with `ssh-keygen -t ed25519`.",
            length=len(text),
        )
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if "PRIVATE KEY" in text:  # a whole private key file (many lines) or its first line
        raise UserError(
            400,
            "That is a PRIVATE key: never share it. Delete it from wherever you pasted it and paste the .pub "
            "file instead (for example ~/.ssh/id_ed25519.pub).",
        )
    if len(lines) != 1:
        raise UserError(
            400,
            "Add one key at a time: that text has {lines} lines. Paste the contents of your public key file (for "
            "example ~/.ssh/id_ed25519.pub); make one with `ssh-keygen -t ed25519`.",
            lines=len(lines),
        )
    return lines[0].strip()


def _load(kind: str, data: str):
    """The public key `data` of type `kind`, loaded by `cryptography`: of an accepted type and size."""
    if kind not in TYPES:
        raise _not_accepted(kind)
    try:
        base64.b64decode(data, validate=True)
        key = load_ssh_public_key(f"{kind} {data}".encode())
    except (binascii.Error, ValueError) as e:
        raise UserError(
            400,
            "That public key is damaged (it does not load: {error}). Paste the contents of your public key file "
            "(for example ~/.ssh/id_ed25519.pub); make one with `ssh-keygen -t ed25519`.",
            error=str(e),
        ) from None
    except Exception:  # cryptography's UnsupportedAlgorithm for DSA and the like
        raise _not_accepted(kind) from None
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_BITS:
        raise UserError(
            400,
            "That RSA key has {bits} bits; at least {min_bits} are needed. Use `ssh-keygen -t ed25519`.",
            bits=key.key_size,
            min_bits=MIN_RSA_BITS,
        )
    if not isinstance(key, (rsa.RSAPublicKey, ec.EllipticCurvePublicKey, ed25519.Ed25519PublicKey)):
        raise _not_accepted(kind)
    return key


# -- the records (blocking; the service runs these in threads) -------------------------------------------


def listing(session, owner: str) -> list[dict]:
    return [k.as_dict() for k in session.scalars(select(SshKey).where(SshKey.owner == owner).order_by(SshKey.id))]


def add(session, owner: str, text, comment: str | None = None) -> dict:
    """Register a key for `owner` (the user's 400 on a bad key, 409 on a duplicate or past the limit)."""
    key, print_, found_comment = parse(text)
    if comment is not None:
        if not isinstance(comment, str):
            raise UserError(400, "“comment” must be text, like “my laptop”.")
        found_comment = re.sub(r"[^\x20-\x7e\u00a0-\uffff]", "", comment)[:MAX_COMMENT]
    mine = list(session.scalars(select(SshKey).where(SshKey.owner == owner)))
    if any(k.fingerprint == print_ for k in mine):
        raise UserError(409, "You have registered this key already ({fingerprint}).", fingerprint=print_)
    if len(mine) >= MAX_KEYS:
        raise UserError(
            409,
            "You have {count} keys, the most one person may register; remove one you no longer use.",
            count=len(mine),
        )
    row = SshKey(owner=owner, key=key, fingerprint=print_, comment=found_comment)
    session.add(row)
    session.flush()
    return row.as_dict()


def remove(session, owner: str, key_id) -> dict:
    """Remove one of `owner`'s keys by its id or fingerprint (404 when they have no such key)."""
    q = select(SshKey).where(SshKey.owner == owner)
    if isinstance(key_id, str) and key_id.startswith("SHA256:"):
        q = q.where(SshKey.fingerprint == key_id)
    else:
        try:
            q = q.where(SshKey.id == int(key_id))
        except (TypeError, ValueError):
            raise UserError(400, "Name the key by its number or its SHA256: fingerprint (see `workspace ssh-key ls`).")
    row = session.scalar(q)
    if row is None:
        raise UserError(404, "You have no SSH key {key}.", key=key_id)
    gone = row.as_dict()
    session.delete(row)
    return gone


def authorized_keys(session, owner: str) -> str:
    """The lines of `owner`'s authorized_keys: their keys, canonical, nothing else."""
    rows = session.scalars(select(SshKey).where(SshKey.owner == owner).order_by(SshKey.id))
    return "".join(f"{k.key} {k.fingerprint}\n" for k in rows)


def owner_of(session, blob_fingerprint: str) -> list[str]:
    """The users who registered the key with this fingerprint (the gateway's lookup)."""
    return list(session.scalars(select(SshKey.owner).where(SshKey.fingerprint == blob_fingerprint)))
