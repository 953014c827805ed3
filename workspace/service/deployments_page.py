"""The Deployments pages (#33): /services/workspace/deployments lists the caller's deployments with a form
to make one; /services/workspace/deployments/{name} shows one: its address, state and the controller's
last word, its replicas (state, restarts, node, log), versions, traffic chart (requests a minute, p50 and
p99 latency; static/charts.js from the API's traffic), API keys, and forms to give it a new version,
change its settings, stop, start or delete it, make or revoke a key. Every change is a POST with the XSRF
token; a refusal is said on the page and changes nothing. The rules are workspace/deployments/'s.
"""

from __future__ import annotations

from urllib.parse import quote

from tornado import web

from workspace import i18n
from workspace.deployments import deployment, keys
from workspace.errors import UserError
from workspace.executions import number_of
from workspace.service.deployments_api import DeploymentHandler
from workspace.service.pages import PageHandler

NEW_FIELDS = ("name", "from", "image", "command", "port", "replicas", "resource_type", "ready", "access", "course")
VERSION_FIELDS = ("from", "image", "command", "port", "ready")


def form_body(handler, fields) -> dict:
    """The form's non-empty fields as the API takes them (`idle_seconds` too)."""
    body = {f: handler.get_body_argument(f, "").strip() for f in fields}
    idle = handler.get_body_argument("idle_seconds", "").strip()
    if idle:
        body["idle_seconds"] = idle
    return {k: v for k, v in body.items() if v}


class DeploymentsPage(DeploymentHandler, PageHandler):
    @web.authenticated
    async def get(self, error: str | None = None, form: dict | None = None):
        me = self.who().name
        self.render_page(
            "deployments.html",
            deployments=self.located(await self.blocking(deployment.list_of, self.db, me, self.lang)),
            images=list(self.settings["image_refs"]),
            types=[t.name for t in self.settings["resource_types"]],
            groups=sorted(self.who().groups),
            error=error,
            form=form or {},
            max_replicas=self.policy.max_replicas,
        )

    @web.authenticated
    async def post(self):
        body = form_body(self, NEW_FIELDS)
        try:
            await self.blocking(
                deployment.create, self.db, await self.asker(body), body, self.settings["image_refs"], self.policy
            )
        except UserError as e:
            self.set_status(e.status_code)
            return await self.get(error=e.in_locale(self.lang), form=body)
        self.redirect(f"{self.prefix}deployments/{quote(body['name'], safe='')}", status=303)


class DeploymentPage(DeploymentHandler, PageHandler):
    @web.authenticated
    async def get(self, name: str, message: str | None = None, error: str | None = None, key: dict | None = None):
        me = self.who().name
        d = self.located(await self.blocking(deployment.describe, self.db, me, name, self.lang))
        api = f"{self.prefix}api/deployments/{quote(name, safe='')}"
        self.render_page(
            "deployment.html",
            d=d,
            api=api,
            logs=f"{self.prefix}api/workspaces/{d['workspace']}/executions",
            images=list(self.settings["image_refs"]),
            groups=sorted(self.who().groups),
            max_replicas=self.policy.max_replicas,
            message=message,
            error=error,
            key=key,
        )

    @web.authenticated
    async def post(self, name: str):
        me, action = self.who().name, self.get_body_argument("action", "")
        try:
            message, key = await self.act(me, name, action)
        except UserError as e:
            self.set_status(e.status_code)
            if e.status_code == 404:
                raise
            return await self.get(name, error=e.in_locale(self.lang))
        if action == "delete":
            return self.redirect(f"{self.prefix}deployments", status=303)
        await self.get(name, message=message, key=key)

    async def act(self, me: str, name: str, action: str) -> tuple[str, dict | None]:
        """Do what the form asks; (what the page says of it, a new key to show once)."""
        db, lang = self.db, self.lang
        if action in ("stop", "start"):
            await self.blocking(deployment.set_running, db, me, name, action == "start")
            return (
                i18n.translate(lang, "Stopped: its replicas stop.")
                if action == "stop"
                else i18n.translate(lang, "Started.")
            ), None
        if action == "delete":
            await self.blocking(deployment.delete, db, me, name)
            return "", None
        if action == "version":
            body = form_body(self, VERSION_FIELDS)
            version = await self.blocking(
                deployment.add_version, db, self.who(), me, name, body, self.settings["image_refs"]
            )
            return i18n.translate(lang, "Version {version} is being rolled out.", version=version["version"]), None
        if action == "settings":
            body = form_body(self, ("replicas", "access", "course"))
            if self.get_body_argument("access", "") != "course":
                body.pop("course", None)
            body["idle_seconds"] = self.get_body_argument("idle_seconds", "").strip() or 0
            await self.blocking(deployment.change, db, await self.asker(body), me, name, body, self.policy)
            return i18n.translate(lang, "Saved."), None
        if action == "key":
            made = await self.blocking(keys.make, db, me, name, self.get_body_argument("label", "key"), self.policy)
            return i18n.translate(lang, "A new key: copy it now, it is not shown again."), made
        if action == "revoke":
            await self.blocking(keys.revoke, db, me, name, number_of(self.get_body_argument("key", "0")))
            return i18n.translate(lang, "The key is revoked."), None
        raise UserError(400, "Say what to do: stop, start, delete, version, settings, key or revoke.")


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}deployments/?", DeploymentsPage),
        (rf"{prefix}deployments/([^/]+)/?", DeploymentPage),
    ]
