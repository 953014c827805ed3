"""A user's webhook (#17) in the REST API: the URL called when one of their tasks ends.

    GET    /api/webhook      the caller's webhook (URL, signing secret, the last call's result), 404 if none
    PUT    /api/webhook      {"url": ...}: set it (the secret is made once, and kept when the URL changes)
    DELETE /api/webhook      remove it

The rules (which URLs, how it is called and signed) are in workspace/webhooks.py.
"""

from __future__ import annotations

from workspace import webhooks
from workspace.errors import UserError
from workspace.service.api import APIHandler


class WebhookHandler(APIHandler):
    def me(self) -> str:
        return self.who().name  # one's own only: nobody, an administrator included, sets another's

    async def get(self):
        hook = await self.blocking(webhooks.get, self.db, self.me())
        if hook is None:
            raise UserError(404, 'You have no webhook; PUT {"url": ...} here to have one called when a task ends.')
        self.write_json(hook)

    async def put(self):
        me = self.me()
        url = webhooks.check_url(self.body().get("url"), self.settings["webhook_networks"])
        self.write_json(await self.blocking(webhooks.set_url, self.db, me, url))

    async def delete(self):
        if not await self.blocking(webhooks.remove, self.db, self.me()):
            raise UserError(404, "You have no webhook to remove.")
        self.set_status(204)
        self.finish()


def handlers(prefix: str) -> list:
    return [(rf"{prefix}api/webhook/?", WebhookHandler)]
