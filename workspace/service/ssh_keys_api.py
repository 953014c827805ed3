"""REST API: SSH (#16): how to connect, and public keys (workspace/ssh_keys.py).

    GET    /api/ssh                           the gateway (host, port, host key to pin) and, for each of my
                                              workspaces, its login, exact command and host key fingerprint
    GET    /api/ssh-keys                      my keys (type, fingerprint, comment, added, last used)
    POST   /api/ssh-keys                      {"key": "ssh-ed25519 AAAA... comment", "comment"?: "my laptop"}
    DELETE /api/ssh-keys/{id or SHA256:...}   remove one (revoked at once)

Keys are their owner's. An administrator may list or remove anyone's (`?user=NAME`: a key that leaked is
revoked without its owner), never add one: a key added for someone would let its holder in as them.
"""

from __future__ import annotations

from workspace import gateway_keys, ssh_directions, ssh_identities, ssh_keys
from workspace.errors import UserError
from workspace.service.api import APIHandler


class KeysOf(APIHandler):
    def whose(self) -> str:
        who = self.who()
        wanted = self.get_argument("user", None)
        if wanted and wanted != who.name:
            if not who.admin or self.request.method == "POST":
                raise UserError(
                    403, "Only your own SSH keys can be changed here; an administrator may list or remove anyone's."
                )
            return wanted
        return who.name


class SshKeysHandler(KeysOf):
    async def get(self):
        owner = self.whose()

        def load():
            with self.db.session() as s:
                return ssh_keys.listing(s, owner)

        self.write_json(await self.blocking(load))

    async def post(self):
        owner, data = self.whose(), self.body()

        def add():
            with self.db.session() as s:
                return ssh_keys.add(s, owner, data.get("key"), data.get("comment"))

        self.write_json(await self.blocking(add), status=201)


class OneSshKeyHandler(KeysOf):
    async def delete(self, key_id):
        owner = self.whose()

        def remove():
            with self.db.session() as s:
                return ssh_keys.remove(s, owner, key_id)

        self.write_json({"removed": await self.blocking(remove)})


class SshHandler(APIHandler):
    async def get(self):
        user = self.who().name
        if self.get_argument("user", user) != user:
            raise UserError(403, "How to connect is said to each user for their own workspaces only.")
        gateway = gateway_keys.gateway_of(self.settings["hub_config"], self.request.host_name)
        if gateway is None:
            self.write_json({"enabled": False, "gateway": None, "workspaces": [], "config": ""})
            return

        def load():
            with self.db.session() as s:
                return ssh_identities.workspaces_of(s, user)

        self.write_json(ssh_directions.directions(gateway, user, await self.blocking(load)))


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}api/ssh/?", SshHandler),
        (rf"{prefix}api/ssh-keys/?", SshKeysHandler),
        (rf"{prefix}api/ssh-keys/([^/]+)", OneSshKeyHandler),
    ]
