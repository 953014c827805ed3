"""The workspace service's pages (HTML), under /services/workspace/.

    /services/workspace/workspaces           my workspaces: state, start (with the spawn choices), stop, open
    /services/workspace/workspaces/{name}    one workspace: every execution as a timeline, live usage and
                                             save progress, "continue from here"
    /services/workspace/workspaces/{name}/executions/{n}/files/{path}
                                             a saved output: browse, preview, download (outputs_page.py)
    /services/workspace/datasets             mine, shared with me, public: create, upload with progress and
                                             resume, share
    /services/workspace/storage              my storage against my quota, what takes the space, delete an
                                             output, one-click cleanup of old outputs
    /services/workspace/course               instructors: their courses' students, their workspaces (read-only)
                                             and storage
    /services/workspace/admin                administrators: every running execution with its usage, stop
                                             any; storage per user

Pages log in through the hub (HubOAuth) and act with the user's own OAuth
token. JupyterHub gives that token the intersection of the service's
`oauth_client_allowed_scopes` (servers; jupyterhub_config.py) and the user's
own rights: a student's token reaches only their own servers, an admin's all.
The service itself holds no power to start or stop anyone's workspace. They are styled with the hub's own
stylesheet. Errors are shown on the page as the sentence the hub or the
service gave.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from urllib.parse import quote

import jinja2
from jupyterhub.scopes import parse_scopes
from markupsafe import Markup
from tornado import web

from workspace import (
    courses,
    datasets,
    errors,
    executions,
    gateway_keys,
    i18n,
    lifecycle,
    origins,
    ssh_identities,
    tasks,
)
from workspace.db import utcnow
from workspace.errors import UserError
from workspace.executions import FINAL
from workspace.images import catalog as image_catalog
from workspace.images import user as user_images
from workspace.limits import queue, quotas
from workspace.outputs import saved as outputs
from workspace.service.api import READ_SCOPE, APIHandler
from workspace.service.courses_api import CourseActions
from workspace.spawner import form as spawnform

TEMPLATES = Path(__file__).resolve().parent / "templates"

# the service's own templates, and the navigation it shares with the hub's pages (workspace/hub_templates)
HUB_TEMPLATES = Path(__file__).resolve().parents[1] / "hub_templates"
_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader([str(TEMPLATES), str(HUB_TEMPLATES)]), autoescape=True, extensions=[i18n.Jinja]
)
_env.globals["word"] = executions.word  # `{{ _(word(state)) }}`: a state or stop reason in the page's language


def _mb(n: int | None) -> str:
    return "–" if n is None else f"{n / 1e6:,.1f} MB"


def _seconds(s: float | None) -> str:
    if s is None:
        return "–"
    if s < 120:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s // 3600:.0f} h {s % 3600 / 60:.0f} min"


def _when(t: str | None) -> str:
    """An API time (ISO 8601, UTC) as `2026-12-02 19:20:03 UTC`."""
    return "–" if not t else t.replace("T", " ")[:19] + " UTC"


def _ran(ex: dict) -> str:
    """How long an execution ran (until now while it runs)."""
    import datetime as dt

    if not ex.get("started"):
        return "–"
    start = dt.datetime.fromisoformat(ex["started"].rstrip("Z"))
    end = (
        dt.datetime.fromisoformat(ex["stopped"].rstrip("Z"))
        if ex.get("stopped")
        else dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    )
    return _seconds((end - start).total_seconds())


def _timeline(ex: dict) -> list[dict]:
    """An execution's states, each with how long it lasted (the last one: until now, unless it is final)."""
    import datetime as dt

    def parse(t: str) -> dt.datetime:
        return dt.datetime.fromisoformat(t.rstrip("Z"))

    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    steps = ex.get("transitions") or []
    out = []
    for i, t in enumerate(steps):
        end = parse(steps[i + 1]["at"]) if i + 1 < len(steps) else (None if t["state"] in FINAL else now)
        out.append(dict(t, seconds=None if end is None else max(0.0, (end - parse(t["at"])).total_seconds())))
    return out


_env.filters.update(timeline=_timeline, size=quotas.gb, mb=_mb, seconds=_seconds, when=_when, ran=_ran)


# the navigation item a page belongs to (the others are named after their template)
CURRENT = {"workspace.html": "workspaces", "output.html": "workspaces"}


class PageHandler(APIHandler):
    """A page for a logged-in user (the hub's login when there is none); errors are pages, not JSON."""

    @property
    def prefix(self) -> str:
        return self.settings["prefix"]

    def render_page(self, template: str, **context) -> None:
        user = self.get_current_user()
        teaches = bool(user and (user.get("admin") or parse_scopes(user.get("scopes") or []).get(READ_SCOPE)))
        html = _env.get_template(template).render(
            locale=self.lang,
            js_messages=i18n.js_messages(self.lang),
            native_auth=bool(self.settings.get("template_vars", {}).get("native_auth")),
            prefix=self.prefix,
            user=user,
            hub_prefix=self.settings["hub_prefix"],
            teaches=teaches,
            current_page=CURRENT.get(template, template.rsplit(".", 1)[0]),
            xsrf_token=self.xsrf_token.decode() if isinstance(self.xsrf_token, bytes) else self.xsrf_token,
            **context,
        )
        self.finish(html)

    async def hub_api(self, method: str, path: str, body=None) -> tuple[int, dict | None]:
        """Call the hub's REST API with the user's own token; (status, JSON body)."""
        return await self.hub_fetch(self.hub_auth.get_token(self), method, path, body)

    async def servers(self, user: str) -> dict:
        code, model = await self.hub_api("GET", f"/users/{quote(user, safe='')}")
        return (model or {}).get("servers", {}) if code == 200 else {}

    async def spawn_form(self, name: str | None = None, selected="latest") -> Markup:
        """The spawn choices (the hub's own form fields: continue from, datasets, type, image, cleanup mode),
        prefilled from the chosen execution of workspace `name` (None: a new workspace)."""
        user = self.get_current_user()
        types = self.settings["resource_types"]
        refs = await self.image_choices()
        html = await self.blocking(
            spawnform.page_form,
            self.db,
            user["name"],
            set(user.get("groups") or []),
            bool(user.get("admin")),
            name,
            selected,
            types=types,
            nodes=await self.engine_nodes() if types else [],
            images=list(refs),
            image=self.settings["image"],
            default_type=self.settings["default_resource_type"],
            image_labels=await self.image_labels(refs),
            image_refs=refs,
            locale=self.lang,
        )
        return Markup(html)

    _image_origins: dict[str, str] = {}

    async def image_choices(self) -> dict[str, str]:
        """{name: engine image} of the images the user may start: the site's, their own and the other users'
        approved for them (#28), whose makers image_labels names."""
        refs = dict(self.settings["image_refs"])
        if self.settings["user_images_offered"]:
            user = self.get_current_user()
            groups = set(user.get("groups") or [])
            found = await self.blocking(user_images.startable, self.db, user["name"], groups)
            refs.update({i["name"]: i["ref"] for i in found})
            self._image_origins = {i["name"]: user_images.origin(i, user["name"], self.lang) for i in found}
        return refs

    async def image_labels(self, refs: dict[str, str]) -> dict[str, str] | None:
        """{image: its size and versions} for the form's choice (None: nothing to choose, or no engine)."""
        if len(refs) < 2:
            return None
        try:
            labels = await self.blocking(
                image_catalog.labels, self.settings["describe_images"], list(refs), refs, self.lang
            )
        except Exception:  # the engine does not answer: the names alone (and who made each)
            labels = {name: name for name in refs}
        for name, said in self._image_origins.items():
            if name in labels:
                labels[name] = f"{labels[name]} · {said}"
        return labels

    async def storage_status(self) -> quotas.Status:
        """The user's storage against their quota."""
        user = self.get_current_user()
        return await self.blocking(
            quotas.status,
            self.db,
            self.settings["workspace_store"],
            self.settings["storage_quota"],
            user["name"],
            set(user.get("groups") or []),
        )

    async def storage_warning(self) -> str | None:
        """The user's storage warning (near or over quota), for the top of their pages."""
        return (await self.storage_status()).warning(self.lang)

    def write_error(self, status_code, **kwargs):
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = errors.sentence(exc, self.lang)
        self.finish(
            _env.get_template("error.html").render(
                locale=self.lang,
                js_messages=i18n.js_messages(self.lang),
                prefix=self.prefix,
                hub_prefix=self.settings["hub_prefix"],
                user=None,
                status=status_code,
                message=message,
            )
        )


class NotFoundPage(PageHandler):
    """Any address the service has no handler for: a page for a browser, JSON under api/."""

    def prepare(self):
        raise UserError(404, "There is nothing at this address; start again from the Workspaces page.")

    def write_error(self, status_code, **kwargs):
        if "/api/" in self.request.path:
            return APIHandler.write_error(self, status_code, **kwargs)
        return super().write_error(status_code, **kwargs)


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
        for name, server in servers.items():  # started elsewhere, no record yet
            if name not in known:
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


class WorkspacePage(PageHandler):
    """One workspace's executions; with `?user=NAME` an instructor's (or an administrator's) read-only view
    of a student's workspace."""

    @web.authenticated
    async def get(self, name: str, error: str | None = None, status: int = 200, message: str | None = None):
        me = self.get_current_user()["name"]
        owner = await self.owner()
        readonly = owner != me
        server = None if readonly else (await self.servers(me)).get(name)

        history = await self.blocking(executions.history, self.db, owner, name)
        runs = None if history is None else history[::-1]  # newest first
        if runs is None and server is None:
            if readonly:
                raise UserError(404, "{owner} has no workspace “{name}”.", owner=owner, name=name)
            raise UserError(404, "You have no workspace “{name}”.", name=name)
        latest = runs[0] if runs else None
        ssh = None if readonly else await self.ssh_directions(owner, name)
        # another's servers are not the caller's to read: the records say what runs
        state = (
            (latest["state"] if latest else "new")
            if readonly
            else _state_of(server, latest["state"] if latest else None)
        )
        self.set_status(status)
        self.render_page(
            "workspace.html",
            name=name,
            owner=owner,
            readonly=readonly,
            executions=runs or [],
            error=error,
            message=message,
            state=state,
            lab_url=origins.server_url(self.settings.get("subdomain_host"), me, name) + "lab",
            api=f"{self.prefix}api/workspaces/{quote(name, safe='')}",
            datasets_api=f"{self.prefix}api/datasets",
            query=f"?user={quote(owner, safe='')}" if readonly else "",
            spawn_form=None if readonly else await self.spawn_form(name),
            storage_warning=None if readonly else await self.storage_warning(),
            ssh=ssh,
        )

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
                    size=_mb(deleted["bytes"]),
                    files=deleted["files"],
                ),
            )
        raise UserError(400, "Say what to do: start, task, stop or delete-output.")

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


class DatasetsPage(PageHandler):
    """Mine, shared with me, public; create, upload (progress, resume), share. The script uses the REST API."""

    @web.authenticated
    async def get(self):
        user = self.get_current_user()
        groups = await self.blocking(datasets.listing, self.db, user["name"], set(user.get("groups") or []))
        self.render_page("datasets.html", groups=groups, api=f"{self.prefix}api")


class StoragePage(PageHandler):
    """My storage against my quota, biggest first; delete an output; delete old outputs in one click."""

    @web.authenticated
    async def get(self, error: str | None = None, status: int = 200, message: str | None = None):
        st = await self.storage_status()
        storage = dict(st.as_dict(), items=st.largest_first())
        self.set_status(status)
        self.render_page(
            "storage.html",
            storage=storage,
            figures=st.figures(self.lang),
            error=error,
            message=message,
            storage_warning=None,
        )

    @web.authenticated
    async def post(self):
        user = self.get_current_user()["name"]
        store = self.settings["workspace_store"]
        action = self.get_body_argument("action", "")
        try:
            if action == "delete-output":
                number = self.get_body_argument("number", "")
                d = await self.blocking(
                    outputs.delete_output,
                    self.db,
                    store,
                    user,
                    self.get_body_argument("workspace", ""),
                    int(number) if number.isdigit() else 0,
                )
                text = i18n.translate(
                    self.lang,
                    "Deleted the output of “{workspace}” #{number} ({size}, {files:,} files).",
                    workspace=d["workspace"],
                    number=d["number"],
                    size=_mb(d["bytes"]),
                    files=d["files"],
                )
            elif action == "cleanup":
                keep = self.get_body_argument("keep", "1")
                result = await self.blocking(
                    outputs.cleanup, self.db, store, user, int(keep) if keep.isdigit() else -1, locale=self.lang
                )
                done = result["deleted"]
                text = (
                    i18n.translate(
                        self.lang,
                        "Deleted {count} old output(s) ({size}).",
                        count=len(done),
                        size=_mb(sum(d["bytes"] for d in done)),
                    )
                    if done
                    else i18n.translate(self.lang, "There were no old outputs to delete.")
                )
                if result["kept"]:
                    kept = "; ".join(f"“{k['workspace']}” #{k['number']} ({k['reason']})" for k in result["kept"])
                    text += " " + i18n.translate(self.lang, "Kept: {outputs}.", outputs=kept)
            else:
                raise UserError(400, "Say what to do: delete-output or cleanup.")
        except UserError as e:
            return await self.get(error=errors.sentence(e, self.lang), status=e.status_code)
        # measured now (not off the request): the page shows what the deletion freed
        await self.blocking(quotas.measure, self.db, store, user)
        await self.get(message=text)


class CoursePage(CourseActions, PageHandler):
    """Instructors: the students of each course they teach (its JupyterHub group), their workspaces (each
    opens read-only), what runs now and their storage. Administrators see every group."""

    @web.authenticated
    async def get(
        self, error: str | None = None, status: int = 200, message: str | None = None, form: dict | None = None
    ):
        listing = await self.blocking(courses.overview, self.db, await self.taught_courses())
        for c in listing:
            c["manage"] = self.may_manage(c["name"])
        me = self.get_current_user()["name"]
        self.set_status(status)
        self.render_page(
            "course.html",
            courses=listing,
            error=error,
            message=message,
            form=form or {},
            choices=await self.blocking(courses.setup_choices, self.db, me, self.lang),
            types=self.settings["resource_types"],
            # a user's image must be shared with the course (or public) and approved for it for its students
            # to start it (set_up_course checks that)
            images=list(await self.image_choices()),
        )

    @web.authenticated
    async def post(self):
        """Set a course up from the form: the roster's text and the template."""
        arg = self.get_body_argument
        course = arg("course", "").strip()
        body = {
            "students": arg("roster", ""),
            "workspace": arg("workspace", "").strip() or None,
            "resource_type": arg("resource_type", "") or None,
            "image": arg("image", "") or None,
            "datasets": self.get_body_arguments("datasets"),
        }
        workspace, _, number = arg("starter", "").rpartition(":")
        if number.isdigit():
            body["starter"] = {"workspace": workspace, "number": int(number)}
        body = {k: v for k, v in body.items() if v is not None}
        try:
            done = await self.set_up_course(course, body)
        except web.HTTPError as e:
            return await self.get(
                error=errors.sentence(e, self.lang),
                status=e.status_code,
                form={"course": course, **body},
            )
        await self.get(message=done["message"])


class AdminPage(PageHandler):
    """Administrators: every execution that waits in the queue (with its place), runs or saves, with its
    usage; stop any; storage per user."""

    def admin_only(self) -> dict:
        user = self.get_current_user()
        if not user.get("admin"):
            raise UserError(403, "Only administrators may see the admin page.")
        return user

    @web.authenticated
    async def get(self, error: str | None = None, status: int = 200):
        self.admin_only()

        running = await self.blocking(queue.overview, self.db)
        storage = await self.blocking(quotas.per_user, self.db)
        nodes = await self.blocking(queue.node_overview, self.db, await self.engine_nodes())
        self.set_status(status)
        self.render_page(
            "admin.html", running=running, storage=storage, nodes=nodes, models=queue.by_gpu_model(nodes), error=error
        )

    @web.authenticated
    async def post(self):
        admin = self.admin_only()["name"]
        owner, name = self.get_body_argument("owner", ""), self.get_body_argument("workspace", "")
        # the reason goes on the record first, so that the save keeps it
        stopped = i18n.translate(self.lang, "Stopped by the administrator {admin}.", admin=admin)
        execution_id = await self.blocking(lifecycle.record_stop_reason, self.db, owner, name, "admin", stopped)
        code, body = await self.hub_api("DELETE", f"/users/{quote(owner, safe='')}/servers/{quote(name, safe='')}")
        if code not in (202, 204):
            if execution_id is not None:
                await self.blocking(lifecycle.record_stop_reason, self.db, owner, name, None, None, execution_id)
            return await self.get(
                error=(body or {}).get("message")
                or i18n.translate(
                    self.lang, "The hub refused to stop {owner}/{name} ({code}).", owner=owner, name=name, code=code
                ),
                status=code if 400 <= code < 500 else 502,
            )
        self.redirect(f"{self.prefix}admin")


class RootPage(PageHandler):
    """The service's home: browsers go to their workspaces, API clients get a pointer to the API."""

    def get(self):
        if "text/html" in self.request.headers.get("Accept", ""):
            return self.redirect(f"{self.prefix}workspaces")
        self.set_header("Content-Type", "application/json")
        self.finish(
            {"service": "workspace", "api": f"{self.prefix}api/workspaces", "pages": f"{self.prefix}workspaces"}
        )


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}?", RootPage),
        (rf"{prefix}workspaces/?", WorkspacesPage),
        (rf"{prefix}workspaces/([^/]+)/?", WorkspacePage),
        (rf"{prefix}datasets/?", DatasetsPage),
        (rf"{prefix}storage/?", StoragePage),
        (rf"{prefix}course/?", CoursePage),
        (rf"{prefix}admin/?", AdminPage),
        (rf"{prefix}static/(.*)", web.StaticFileHandler, {"path": str(Path(__file__).resolve().parent / "static")}),
    ]
