"""A start's options as a user gives them: the start form, its images, and the rule that only a POST starts.

The hub's spawn page shows the same fields as the service's "New workspace" and
"Start" (spawner/form.py); a start gets only what its own request says
(SECURITY.md, "Starts"), never options a link or an earlier start left behind.
"""

from __future__ import annotations

import workspace.spawner.form as spawnform
from workspace.caller import Caller
from workspace.errors import UserError
from workspace.executions import find_workspace
from workspace.images import catalog as image_catalog
from workspace.images import cuda as image_cuda


class StartOptionsMixin:
    """The start form and the options a start may come with (mixed into WorkspaceMixin)."""

    async def _render_options_form(self, spawner) -> str:
        # the very fields and defaults of the service's "New workspace" and "Start" (spawnform.page_form):
        # one start form, whichever page a student starts from
        await self.drop_entry_made_by_a_look()
        caller = Caller(self.user.name, {g.name for g in self.user.groups}, bool(self.user.admin))
        types = self.parsed_resource_types()
        await self.load_user_images()
        images = self.image_choices()
        nodes = await self.run_blocking(self.cluster_nodes) if types else []
        drivers = image_cuda.drivers_by_type(types, nodes)
        return await self.run_blocking(
            spawnform.page_form,
            self.db,
            caller,
            self.name,
            types=types,
            nodes=nodes,
            images=images,
            image=self.site_image,
            default_type=self.default_resource_type,
            image_labels=await self.run_blocking(self.image_labels, images, drivers) if len(images) > 1 else None,
            image_refs=self.image_refs() or {i: i for i in images},
            locale=self.locale,
        )

    async def load_user_images(self) -> None:
        """Read the images users defined that this user may start (engine-specific: none here)."""

    def image_choices(self) -> list[str]:
        """Images the user may choose from (engine-specific)."""
        return [self.image]

    def image_refs(self) -> dict[str, str]:
        """{name a user chooses: the engine's image} where the two differ (engine-specific)."""
        return {}

    def image_labels(self, images: list[str], drivers=None) -> dict[str, str]:
        """{image: its size and versions} for a form, marked where a GPU type's nodes cannot run its CUDA
        (`drivers`: images.cuda.drivers_by_type) (blocking)."""
        return image_catalog.labels(
            lambda names: self.describe_images(self, names), images, self.image_refs(), self.locale, drivers
        )

    @classmethod
    def describe_images(cls, options, names: list[str]) -> list[dict]:
        """What each image holds (image_catalog.describe; blocking; engine-specific: nothing known here).
        `options`: a spawner, or the `SpawnerOptions` of a process that only shows them."""
        return [{"name": n, "available": True, "size": None, "created": None, "versions": {}} for n in names]

    @property
    def site_image(self) -> str:
        """The image configured for this spawner, which a start that names none runs (its course's aside):
        dockerspawner keeps a start's chosen image in `image`, where a later start would find it again."""
        if not hasattr(self, "_site_image"):
            self._site_image = self.image  # read before any start changed it
        return self._site_image

    def forget_start_options(self) -> None:
        """Drop the options JupyterHub keeps in its database as the next start's defaults (it hands them to a
        start that names none): a start gets only what its own request says, and the workspace's defaults
        (its course's, the site's) for the rest, so an image or "fresh" chosen once never comes back."""
        orm = getattr(self, "orm_spawner", None)
        if orm is not None and orm.user_options:
            orm.user_options = {}

    async def drop_entry_made_by_a_look(self) -> None:
        """JupyterHub adds a named server to the user's list when its start form is only looked at (a GET of
        /hub/spawn/OWNER/NAME), so a page of another site that sends a student there adds names to their
        list (and uses up their `named_server_limit_per_user`). Such an entry (no workspace of that name, no
        server) is removed again once its form is shown; the form's POST makes it anew."""
        request = getattr(getattr(self, "handler", None), "request", None)
        orm = getattr(self, "orm_spawner", None)
        if not self.name or orm is None or orm.server is not None or request is None or request.method != "GET":
            return
        if await self.run_blocking(self._has_workspace_record):
            return
        self.user.spawners.pop(self.name, None)
        self.user.db.delete(orm)
        self.user.db.commit()

    def _has_workspace_record(self) -> bool:
        with self.db.session() as s:
            return find_workspace(s, self.user.name, self.name) is not None

    def options_from_query(self, query_data):
        # JupyterHub starts a server from a spawn URL's arguments (`/hub/spawn/u/w?opt-image=…`) on a GET,
        # which needs only the login cookie: any page could start a student's workspace with its choices.
        # A link only opens the start form (JupyterHub shows it with this sentence and the 400), whose POST
        # carries the XSRF token.
        e = UserError(400, "A link cannot start a workspace: check the choices on this form, then press Start.")
        self.in_user_language(e)
        raise e

    def spawn_method(self) -> str | None:
        """The HTTP method of the request that asks for this start (None: a start asked without one); only a
        POST may start (start_request.refuse_start_by_link)."""
        request = getattr(getattr(self, "handler", None), "request", None)
        return request.method if request is not None else None
