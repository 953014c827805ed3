"""The SSH page (#16), /services/workspace/ssh: my public keys (add, remove) and how to connect to each of
my workspaces (the exact command, the host keys to check, ~/.ssh/config entries for editors)."""

from __future__ import annotations

from tornado import web

from workspace import errors, gateway_keys, i18n, ssh_directions, ssh_identities, ssh_keys
from workspace.errors import UserError
from workspace.service.pages import PageHandler


class SshPage(PageHandler):
    @web.authenticated
    async def get(self, error: str | None = None, status: int = 200, message: str | None = None):
        user = self.get_current_user()["name"]
        gateway = gateway_keys.gateway_of(self.settings["hub_config"], self.request.host_name)

        def load():
            with self.db.session() as s:
                return ssh_keys.listing(s, user), ssh_identities.workspaces_of(s, user)

        keys, workspaces = await self.blocking(load)
        self.set_status(status)
        self.render_page(
            "ssh.html",
            keys=keys,
            ssh=ssh_directions.directions(gateway, user, workspaces) if gateway else None,
            error=error,
            message=message,
        )

    @web.authenticated
    async def post(self):
        user = self.get_current_user()["name"]
        action = self.get_body_argument("action", "")
        lang = self.lang

        def act():
            with self.db.session() as s:
                if action == "add":
                    text, comment = self.get_body_argument("key", ""), self.get_body_argument("comment", "")
                    key = ssh_keys.add(s, user, text, comment or None)  # none typed: the key's own
                    return i18n.translate(
                        lang,
                        "Added your {type} key {fingerprint}: it opens your workspaces now.",
                        type=key["type"],
                        fingerprint=key["fingerprint"],
                    )
                if action == "remove":
                    key = ssh_keys.remove(s, user, self.get_body_argument("key_id", ""))
                    return i18n.translate(
                        lang,
                        "Removed the key {fingerprint}: it no longer opens your workspaces.",
                        fingerprint=key["fingerprint"],
                    )
                raise UserError(400, "Say what to do: add or remove a key.")

        try:
            text = await self.blocking(act)
        except UserError as e:
            return await self.get(error=errors.sentence(e, self.lang), status=e.status_code)
        await self.get(message=text)


def handlers(prefix: str) -> list:
    return [(rf"{prefix}ssh/?", SshPage)]
