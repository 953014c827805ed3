"""The workspaces' pages: my workspaces (state, start with the spawn choices, stop, open), and one
workspace (every execution as a timeline, live usage and save progress, "continue from here", a task,
its SSH directions; an instructor's read-only view of a student's).

    /services/workspace/workspaces           my workspaces
    /services/workspace/workspaces/{name}    one workspace

A start or a stop is asked of the hub with the user's own token (pages.py says why).
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import quote

from tornado import web

from workspace import errors, executions, gateway_keys, i18n, jobs, origins, ssh_identities, sweeps, tasks
from workspace.db import utcnow
from workspace.errors import UserError
from workspace.limits import quotas
from workspace.outputs import saved as outputs
from workspace.service.pages import PageHandler, mb
from workspace.service.sweeps_api import SweepStarts
from workspace.spawner import form as spawnform


def _state_of(server: dict | None, latest: str | None) -> str:
    """What the list shows: running, starting, stopping, saving, or the latest execution's state."""
    if server:
        if server.get("ready"):
            return "running"
        if server.get("pending") == "stop":
            return "stopping"
        return "starting"
    if latest is None:
        return "new"
    return "stopping" if latest == "running" else latest  # no server but still running: on its way down


class WorkspacesPage(PageHandler):
    @web.authenticated
    async def get(self, error: str | None = None, status: int = 200):
        user = self.get_current_user()["name"]
        servers = await self.servers(user)
        form = {"name": self.get_body_argument("name", "")} if self.request.method == "POST" else {}

        rows = await self.blocking(executions.workspaces_of, self.db, user, latest_in_full=True)
        for row in rows:
            row["state"] = _state_of(servers.get(row["name"]), row["latest"]["state"] if row["latest"] else None)
        known = {r["name"] for r in rows}
        for name, server in servers.items():  # started elsewhere, no record yet (a run's is its workspace's)
            if name not in known and not executions.RUN_SERVER.match(name):
                rows.append({"name": name, "state": _state_of(server, None), "latest": None, "executions": 0})
        self.set_status(status)
        self.render_page(
            "workspaces.html",
            workspaces=rows,
            error=error,
            form=form,
            lab_prefix=origins.server_url(self.settings.get("subdomain_host"), user),
            spawn_form=await self.spawn_form(),
            storage_warning=await self.storage_warning(),
            # the tasks that ended in the last day: what a student comes back to see
            finished_tasks=await self.blocking(
                tasks.ended_since, self.db, utcnow() - dt.timedelta(days=1), owner=user, limit=5
            ),
        )

    @web.authenticated
    async def post(self):
        """Create or start a workspace (the form on this page)."""
        name = self.get_body_argument("name", "").strip()
        try:
            executions.check_workspace_name(name)
        except UserError as e:
            return await self.get(error=errors.sentence(e, self.lang), status=e.status_code)
        await start(
            self,
            name,
            self.get_body_argument("continue_from", "latest"),
            self.get_body_argument("datasets", ""),
            on_error=self.get,
        )


async def start(
    handler: PageHandler, name: str, continue_from: str, datasets: str, on_error, resource_type: str | None = None
) -> None:
    """Ask the hub to start `name` with the user's choices; follow to its progress page.

    `resource_type`: the type when the form chose none (continuing keeps the execution's type)."""
    user = handler.get_current_user()["name"]
    fields = {k: handler.get_body_argument(k, "") for k in ("resource_type", "image", "cleanup")}
    options = spawnform.options_from_page(continue_from, datasets, resource_type, fields)
    code, body = await handler.hub_api(
        "POST",
        f"/users/{quote(user, safe='')}/servers/{quote(name, safe='')}",
        {"user_options": options, "display_name": name},
    )
    if code in (201, 202):
        return handler.redirect(
            f"{handler.settings['hub_prefix']}spawn-pending/{quote(user, safe='')}/{quote(name, safe='')}"
        )
    lang = handler.lang
    message = (body or {}).get("message") or i18n.translate(
        lang, "The hub refused to start “{name}” ({code}).", name=name, code=code
    )
    if code == 400 and "already running" in message.lower():
        message = i18n.translate(lang, "“{name}” is already running or starting.", name=name)
    await on_error(error=message, status=code if 400 <= code < 500 else 502)


# (what the image's versions name, the button's title, its path under the server) of tools an image may hold
WEB_TOOLS = (("label-studio", "Label Studio", "label-studio/"),)


class WorkspacePage(SweepStarts, PageHandler):
    """One workspace's executions; with `?user=NAME` an instructor's (or an administrator's) read-only view
    of a student's workspace."""

    @web.authenticated
    async def get(self, name: str, error: str | None = None, status: int = 200, message: str | None = None):
        me = self.get_current_user()["name"]
        owner = await self.owner()
        readonly = owner != me
        server = None if readonly else (await self.servers(me)).get(name)

        history = await self.blocking(jobs.history, self.db, owner, name)
        runs = None if history is None else history[::-1]  # newest first
        if runs is None and server is None:
            if readonly:
                raise UserError(404, "{owner} has no workspace “{name}”.", owner=owner, name=name)
            raise UserError(404, "You have no workspace “{name}”.", name=name)
        # the workspace's own newest execution: runs beside it (#31) never make it look running
        latest = next((r for r in runs or [] if not r.get("beside")), None)
        ssh = None if readonly else await self.ssh_directions(owner, name)
        # another's servers are not the caller's to read: the records say what runs
        state = (
            (latest["state"] if latest else "new")
            if readonly
            else _state_of(server, latest["state"] if latest else None)
        )
        server_url = origins.server_url(self.settings.get("subdomain_host"), me, name)
        self.set_status(status)
        self.render_page(
            "workspace.html",
            name=name,
            owner=owner,
            readonly=readonly,
            executions=runs or [],
            current=latest,
            error=error,
            message=message,
            state=state,
            lab_url=server_url + "lab",
            tools=[] if readonly or state != "running" else await self.web_tools(latest, server_url),
            api=f"{self.prefix}api/workspaces/{quote(name, safe='')}",
            datasets_api=f"{self.prefix}api/datasets",
            query=f"?user={quote(owner, safe='')}" if readonly else "",
            spawn_form=None if readonly else await self.spawn_form(name),
            storage_warning=None if readonly else await self.storage_warning(),
            ssh=ssh,
            sweeps=await self.blocking(sweeps.listing, self.db, owner, name),
        )

    async def web_tools(self, execution: dict | None, server_url: str) -> list[dict]:
        """The running execution's web tools beside JupyterLab, as its image holds them (the labelling
        image's Label Studio, #36): [{title, url, id}]."""
        if not execution or not execution.get("image"):
            return []
        (info,) = await self.blocking(self.settings["describe_images"], [execution["image"]])
        versions = info.get("versions") or {}
        return [
            {"title": title, "url": server_url + path, "id": key} for key, title, path in WEB_TOOLS if versions.get(key)
        ]

    async def ssh_directions(self, owner: str, name: str) -> dict | None:
        """The command that connects to this workspace, its host key and the gateway's (None: no gateway)."""
        gateway = gateway_keys.gateway_of(self.settings["hub_config"], self.request.host_name)
        if gateway is None:
            return None

        def load():
            with self.db.session() as s:
                return ssh_identities.workspaces_of(s, owner)

        mine = next((w for w in await self.blocking(load) if w["name"] == name), {})
        return {
            "command": gateway.command(owner, name),
            "host_key_fingerprint": mine.get("host_key_fingerprint"),
            "gateway_fingerprint": gateway.fingerprint,
        }

    @web.authenticated
    async def post(self, name: str):
        action = self.get_body_argument("action", "")
        user = self.get_current_user()["name"]
        if self.get_argument("user", user) != user:  # a read-only view has no actions
            raise UserError(403, "You can read another user's workspace, not start, stop or change it.")
        if action == "stop":
            code, body = await self.hub_api("DELETE", f"/users/{quote(user, safe='')}/servers/{quote(name, safe='')}")
            if code not in (202, 204):
                return await self.get(
                    name,
                    error=(body or {}).get("message")
                    or i18n.translate(self.lang, "The hub refused the stop ({code}).", code=code),
                    status=code if 400 <= code < 500 else 502,
                )
            return self.redirect(f"{self.prefix}workspaces/{quote(name, safe='')}")
        if action == "start":
            choice = self.get_body_argument("continue_from", "latest")
            refs, rtype = await self.blocking(spawnform.continued, self.db, user, name, choice)
            datasets = self.get_body_argument("datasets", None)
            if datasets is None:  # the same datasets as the execution continued from (their latest versions)
                datasets = ", ".join(refs)
            return await start(
                self, name, choice, datasets, on_error=lambda **kw: self.get(name, **kw), resource_type=rtype
            )
        if action == "task":
            return await self.run_task(name, user)
        if action == "run":
            return await self.run_beside(name, user)
        if action == "delete-output":
            number = self.get_body_argument("number", "")
            try:
                deleted = await self.blocking(
                    outputs.delete_output,
                    self.db,
                    self.settings["workspace_store"],
                    user,
                    name,
                    int(number) if number.isdigit() else 0,
                )
            except UserError as e:
                return await self.get(name, error=errors.sentence(e, self.lang), status=e.status_code)
            quotas.measure_soon(self.db, self.settings["workspace_store"], user)
            return await self.get(
                name,
                message=i18n.translate(
                    self.lang,
                    "Deleted the output of #{number} ({size}, {files:,} files).",
                    number=deleted["number"],
                    size=mb(deleted["bytes"]),
                    files=deleted["files"],
                ),
            )
        raise UserError(400, "Say what to do: start, task, run, stop or delete-output.")

    async def run_task(self, name: str, user: str) -> None:
        """The form's choices with a command: a task (workspace/tasks.py); back to this page, where its log shows."""
        try:
            command = tasks.parse_command(self.get_body_argument("command", ""))
        except UserError as e:
            return await self.get(name, error=errors.sentence(e, self.lang), status=e.status_code)
        busy = i18n.translate(
            self.lang,
            "“{name}” is running or starting; stop it first, or run the task in another workspace.",
            name=name,
        )
        if name in await self.servers(user):  # the hub would answer a second start with the first's 202
            return await self.get(name, error=busy, status=409)
        fields = {k: self.get_body_argument(k, "") for k in ("resource_type", "image", "cleanup")}
        options = spawnform.options_from_page(
            self.get_body_argument("continue_from", "latest"), self.get_body_argument("datasets", ""), None, fields
        )
        code, body = await self.hub_api(
            "POST",
            f"/users/{quote(user, safe='')}/servers/{quote(name, safe='')}",
            {"user_options": {**options, "task": {"command": command}}, "display_name": name},
        )
        if code not in (201, 202):
            message = (body or {}).get("message") or i18n.translate(
                self.lang, "The hub refused to run the task ({code}).", code=code
            )
            if code == 400 and "already" in message.lower():
                message = busy
            return await self.get(name, error=message, status=code if 400 <= code < 500 else 502)
        self.redirect(f"{self.prefix}workspaces/{quote(name, safe='')}")

    async def run_beside(self, name: str, user: str) -> None:
        """A command run beside the open workspace (#31), from its home now or its latest output; back to
        this page, where the run's card and log show."""
        try:
            command = tasks.parse_command(self.get_body_argument("command", ""))
        except UserError as e:
            return await self.get(name, error=errors.sentence(e, self.lang), status=e.status_code)
        choice = self.get_body_argument("from", "now")
        if self.get_body_argument("sweep", "").strip():  # one run per combination of its lines (#31)
            try:
                params = sweeps.parse_params(self.get_body_argument("sweep"))
                number = await self.launch(user, name, command, params, {"continue_from": choice})
            except UserError as e:
                return await self.get(name, error=errors.sentence(e, self.lang), status=e.status_code)
            except web.HTTPError as e:  # the hub's refusal of the first run, in its own words
                return await self.get(name, error=e.log_message, status=e.status_code)
            return self.redirect(f"{self.prefix}workspaces/{quote(name, safe='')}/sweeps/{number}")
        server, spawn = tasks.run_spawn(name, command, {"continue_from": choice})
        code, body = await self.hub_api("POST", f"/users/{quote(user, safe='')}/servers/{server}", spawn)
        if code not in (201, 202):
            message = (body or {}).get("message") or i18n.translate(
                self.lang, "The hub refused to start the run ({code}).", code=code
            )
            return await self.get(name, error=message, status=code if 400 <= code < 500 else 502)
        self.redirect(f"{self.prefix}workspaces/{quote(name, safe='')}")


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}workspaces/?", WorkspacesPage),
        (rf"{prefix}workspaces/([^/]+)/?", WorkspacePage),
    ]
