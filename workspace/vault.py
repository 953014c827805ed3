"""The key that seals the secrets kept in the workspace database (#28), and the column type that uses it.

The database holds secrets that open students' workspaces: each owner's SSH
private key, each workspace's host key, each user's webhook signing secret,
each execution's report key. Whoever reads the database (a backup, a dump, a
copy of `workspace.sqlite`, a PostgreSQL replica) must not read them, so they
are stored sealed with a key kept apart from the database: a file
(`Settings.secret_key_file`, `WORKSPACE_SECRET_KEY_FILE`; by default
`<data dir>/secrets/workspace.key`, mode 0600, made at the first start, like
JupyterHub's cookie secret). Sealing is `cryptography`'s Fernet
(AES-128-CBC with an HMAC-SHA256, a fresh IV each time), not a cipher put
together here. The file may hold several keys, one per line: the first seals,
any opens (MultiFernet), so a site rotates by putting a new key first.

A sealed value is text `sealed:<Fernet token>`. The `Sealed` column type seals
on write and opens on read, with the vault of the engine the statement runs
on (`attach`), so the models read and write plain values; a row that is not
sealed (written before migration 0019, which seals them) is refused rather
than trusted.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import Text
from sqlalchemy.engine import Engine
from sqlalchemy.types import TypeDecorator

PREFIX = "sealed:"


class VaultError(RuntimeError):
    """The key is missing or wrong for a sealed value (an operator's problem, never a user's)."""


class Vault:
    def __init__(self, keys: list[bytes], source: str = ""):
        if not keys:
            raise VaultError(f"no key in {source or 'the vault'}")
        self.source = source
        self._fernet = MultiFernet([Fernet(k) for k in keys])

    @classmethod
    def from_file(cls, path: str | os.PathLike, create: bool = True) -> "Vault":
        """The vault of the key file at `path`, made (0600, in a 0700 directory) when missing and `create`."""
        path = Path(path)
        if create and not path.exists():
            _create_key_file(path)
        try:
            lines = path.read_text().split()
        except OSError as e:
            raise VaultError(f"cannot read the key of the secrets at rest {path}: {e.strerror}") from e
        return cls([line.encode() for line in lines if line and not line.startswith("#")], str(path))

    def seal(self, value: str) -> str:
        return PREFIX + self._fernet.encrypt(value.encode()).decode()

    def open(self, value: str) -> str:
        if not is_sealed(value):
            raise VaultError("a secret in the workspace database is not sealed (run the migrations)")
        try:
            return self._fernet.decrypt(value[len(PREFIX) :].encode()).decode()
        except InvalidToken:
            raise VaultError(f"a secret in the workspace database does not open with the key {self.source}") from None


def is_sealed(value: str | None) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def _create_key_file(path: Path) -> None:
    """Write a fresh key at `path` unless another process did first (several start at once)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.urandom(8).hex()}.tmp")  # one per writer, threads included
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(new_key() + "\n")
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)  # fails if it exists: the first process's key wins, whole
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def new_key() -> str:
    """A fresh key (for a site that makes its key file itself: `python -m workspace.vault`)."""
    return Fernet.generate_key().decode()


# -- the engines' vaults ----------------------------------------------------------------------------------
# A column type sees only the dialect of the statement's engine; each engine has its own dialect object,
# so the vault is found by it (one process may hold several databases: the tests' hubs).

_vaults: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def attach(engine: Engine, vault: Vault | None) -> None:
    """Seal and open the `Sealed` columns of `engine`'s statements with `vault` (None: refuse them)."""
    if vault is None:
        _vaults.pop(engine.dialect, None)
    else:
        _vaults[engine.dialect] = vault


def of(dialect) -> Vault:
    try:
        return _vaults[dialect]
    except KeyError:
        raise VaultError("this database was opened without the key of the secrets at rest") from None


class Sealed(TypeDecorator):
    """A text column stored sealed with the engine's vault; read and written as plain text."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else of(dialect).seal(value)

    def process_result_value(self, value, dialect):
        return None if value is None else of(dialect).open(value)


if __name__ == "__main__":
    print(new_key())
