"""What a gateway login names: `owner+workspace`, and `owner+workspace+start` to start it first.

JupyterHub user names may hold a `+` (e-mail addresses do); workspace names
(server names, slugs) never do, so the name is read from the right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workspace.errors import UserError
from workspace.i18n import N_

# a JupyterHub server name as the hub makes them (and ssh_directions.HOST_NAME's superset)
WORKSPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")

# what a login that cannot be read is told (an auth banner: before the session, so no locale is known: English)
HOW_TO_LOG_IN = N_(
    "Log in as your user name and the workspace's: ssh -p PORT you+WORKSPACE@HOST (for example ada+thesis)."
)


@dataclass(frozen=True)
class Login:
    owner: str
    workspace: str
    start: bool = False

    @property
    def label(self) -> str:
        return f"{self.owner}/{self.workspace}"


def parse(username: str) -> Login:
    """The login's owner, workspace and flag, or a UserError saying how to write it."""
    if not isinstance(username, str) or len(username) > 512 or any(ord(c) < 32 for c in username):
        raise UserError(400, HOW_TO_LOG_IN)
    parts = username.split("+")
    start = len(parts) >= 3 and parts[-1] == "start"
    if start:
        parts = parts[:-1]
    if len(parts) < 2 or not parts[0] or not WORKSPACE.match(parts[-1]):
        raise UserError(400, HOW_TO_LOG_IN)
    return Login(owner="+".join(parts[:-1]), workspace=parts[-1], start=start)
