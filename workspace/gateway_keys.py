"""The gateway's own two keys, kept as files in its directory (mode 0600, made once).

- `host_key`: what users' ssh clients see and pin (`workspace ssh-config`
  prints it); stable across restarts.
- `client_key`: what the gateway logs into workspaces with. Its public half
  is in every workspace's authorized_keys (limited to the gateway's address);
  the private half never leaves the hub host: no hub credential goes into a
  workspace.

The hub, the workspace service and the culler all read the hub's
configuration, which calls `ensure`, possibly at the same moment: a key is
written to a temporary file and linked into place, so the first writer wins
and every process reads the same key.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workspace.ssh_directions import Gateway
from workspace.ssh_identities import new_key_pair, public_of
from workspace.ssh_keys import parse


@dataclass(frozen=True)
class GatewayKeys:
    directory: Path

    @property
    def host_key(self) -> Path:
        return self.directory / "host_key"

    @property
    def client_key(self) -> Path:
        return self.directory / "client_key"

    def client_public(self) -> str:
        """The client key's public line, canonical (what authorized_keys receives)."""
        return parse(public_of(self.client_key.read_text()))[0]

    def host_public(self) -> tuple[str, str]:
        """(public key line, fingerprint) of the host key."""
        canonical, print_, _ = parse(public_of(self.host_key.read_text()))
        return canonical, print_


def ensure(directory: Path) -> GatewayKeys:
    """The gateway's keys in `directory`, made if missing."""
    keys = GatewayKeys(Path(directory))
    keys.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    for path, comment in ((keys.host_key, "workspace gateway host key"), (keys.client_key, "workspace gateway")):
        if not path.exists():
            _write_once(path, new_key_pair(comment)[0])
    return keys


def _write_once(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        try:
            os.link(tmp, path)  # fails if another process made it first: theirs is kept
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def gateway_of(config, request_host: str) -> Gateway | None:
    """The gateway as this deployment configures it (c.SshGateway), named as the user reached the
    hub (`request_host`) unless `public_host` says otherwise; None where there is none."""
    section = config.SshGateway if "SshGateway" in config else {}
    port, keys_dir = section.get("port", 0), section.get("keys_dir", "")
    if not port or not keys_dir or not GatewayKeys(Path(keys_dir)).host_key.exists():
        return None
    key, print_ = GatewayKeys(Path(keys_dir)).host_public()
    return Gateway(host=section.get("public_host") or request_host, port=int(port), host_key=key, fingerprint=print_)
