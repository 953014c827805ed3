"""The workspace service's pages (HTML), under /services/workspace/.

    /services/workspace/workspaces           my workspaces: state, start (with the spawn choices), stop, open
    /services/workspace/workspaces/{name}    one workspace: every execution as a timeline, live usage and
                                             save progress, "continue from here" (both: workspaces_page.py)
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
service gave. This module holds what every page shares (`PageHandler`, the templates' environment and
filters) and the smaller pages; a family of pages has its module (workspaces_page, outputs_page,
images_page, ssh_page, language_page).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from urllib.parse import quote

import jinja2
from jupyterhub.scopes import parse_scopes
from markupsafe import Markup
from tornado import web

from workspace import courses, datasets, errors, executions, i18n, lifecycle
from workspace.caller import Caller
from workspace.errors import UserError
from workspace.executions import FINAL
from workspace.images import catalog as image_catalog
from workspace.images import cuda as image_cuda
from workspace.images import user as user_images
from workspace.limits import queue_views, quotas
from workspace.outputs import saved as outputs
from workspace.service import docs_page
from workspace.service.api import READ_SCOPE, APIHandler
from workspace.service.courses_api import CourseActions
from workspace.spawner import form as spawnform

TEMPLATES = Path(__file__).resolve().parent / "templates"

# the service's own templates, and the navigation it shares with the hub's pages (workspace/hub_templates)
HUB_TEMPLATES = Path(__file__).resolve().parents[1] / "hub_templates"
env = jinja2.Environment(
    loader=jinja2.FileSystemLoader([str(TEMPLATES), str(HUB_TEMPLATES)]), autoescape=True, extensions=[i18n.Jinja]
)
env.globals["word"] = executions.word  # `{{ _(word(state)) }}`: a state or stop reason in the page's language


def mb(n: int | None) -> str:
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


env.filters.update(timeline=_timeline, size=quotas.gb, mb=mb, seconds=_seconds, when=_when, ran=_ran)


# the navigation item a page belongs to (the others are named after their template)
CURRENT = {"workspace.html": "workspaces", "output.html": "workspaces", "deployment.html": "deployments"}


class PageHandler(APIHandler):
    """A page for a logged-in user (the hub's login when there is none); errors are pages, not JSON."""

    @property
    def prefix(self) -> str:
        return self.settings["prefix"]

    def render_page(self, template: str, **context) -> None:
        user = self.get_current_user()
        teaches = bool(user and (user.get("admin") or parse_scopes(user.get("scopes") or []).get(READ_SCOPE)))
        html = env.get_template(template).render(
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
        nodes = await self.engine_nodes() if types else []
        html = await self.blocking(
            spawnform.page_form,
            self.db,
            Caller.of(user),
            name,
            selected,
            types=types,
            nodes=nodes,
            images=list(refs),
            image=self.settings["image"],
            default_type=self.settings["default_resource_type"],
            image_labels=await self.image_labels(refs, image_cuda.drivers_by_type(types, nodes)),
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

    async def image_labels(self, refs: dict[str, str], drivers=None) -> dict[str, str] | None:
        """{image: its size and versions} for the form's choice, marked where a GPU type's nodes cannot run
        its CUDA (`drivers`: images.cuda.drivers_by_type) (None: nothing to choose, or no engine)."""
        if len(refs) < 2:
            return None
        try:
            labels = await self.blocking(
                image_catalog.labels, self.settings["describe_images"], list(refs), refs, self.lang, drivers
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
        written = exc.template if isinstance(exc, UserError) else None
        self.finish(
            env.get_template("error.html").render(
                locale=self.lang,
                js_messages=i18n.js_messages(self.lang),
                prefix=self.prefix,
                hub_prefix=self.settings["hub_prefix"],
                user=None,
                status=status_code,
                message=message,
                help=docs_page.help_url(self.prefix, docs_page.section_for(written), self.lang),
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
                    size=mb(d["bytes"]),
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
                        size=mb(sum(d["bytes"] for d in done)),
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
            # a course is pre-warmed before a lecture where nodes have stores of their own (a swarm); one host
            # has every home and image on it already
            prewarm=self.settings["prewarms"] is not None,
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

        running = await self.blocking(queue_views.overview, self.db)
        storage = await self.blocking(quotas.per_user, self.db)
        nodes = await self.blocking(queue_views.node_overview, self.db, await self.engine_nodes())
        self.set_status(status)
        self.render_page(
            "admin.html",
            running=running,
            storage=storage,
            nodes=nodes,
            models=queue_views.by_gpu_model(nodes),
            error=error,
        )

    @web.authenticated
    async def post(self):
        admin = self.admin_only()["name"]
        owner, name = self.get_body_argument("owner", ""), self.get_body_argument("workspace", "")
        # a run beside the workspace (#31) is its own server; anything else named is the workspace's
        run = self.get_body_argument("server", "")
        run = run if executions.RUN_SERVER.match(run) else None
        # the reason goes on the record first, so that the save keeps it
        stopped = i18n.translate(self.lang, "Stopped by the administrator {admin}.", admin=admin)
        execution_id = await self.blocking(
            lifecycle.record_stop_reason, self.db, owner, name, "admin", stopped, None, run
        )
        server = run or name
        code, body = await self.hub_api("DELETE", f"/users/{quote(owner, safe='')}/servers/{quote(server, safe='')}")
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
        (rf"{prefix}datasets/?", DatasetsPage),
        (rf"{prefix}storage/?", StoragePage),
        (rf"{prefix}course/?", CoursePage),
        (rf"{prefix}admin/?", AdminPage),
        (rf"{prefix}static/(.*)", web.StaticFileHandler, {"path": str(Path(__file__).resolve().parent / "static")}),
    ]
