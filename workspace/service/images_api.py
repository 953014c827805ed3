"""The images a user may choose, with what each holds, and the images users define (#18).

    GET    /api/images                      the site's images [{name, kind: "site", default, available, size,
                                            versions}] and the users' images the caller may see
                                            [{name: "owner/name", kind: "user", state, visibility, ...}]
    POST   /api/images                      build one: {name, from, apt, pip, script, visibility}, or
                                            {name, dockerfile, context (a tar archive, base64), visibility}
                                            (#32, images/dockerfiles.py) -> 202 (the same name again: a rebuild)
    GET    /api/images/{owner}/{name}       one (its state, the step its build is at, its size, versions)
    PATCH  /api/images/{owner}/{name}       {visibility: private | group:NAME | public}
    DELETE /api/images/{owner}/{name}       remove it (its owner or an administrator)
    GET    /api/images/{owner}/{name}/log   its build's log (text; `?follow=1` streams it until the build ends)
    POST   /api/images/{owner}/{name}/approve  {for: public | group:NAME (default: whom it is shared with),
                                            build: the build read (optional; 409 if rebuilt since)}:
                                            its current build may run for them (an administrator; a course's
                                            instructor for the course)
    POST   /api/images/{owner}/{name}/revoke   {for: ...}: that approval removed
    GET    /api/images/pending              the shared images whose current build awaits the caller's approval

A user's image runs for someone other than its owner only once approved for them (image_approvals.py).

The rules are in workspace/images/user.py, the builds in workspace/images/builds.py (run by the service).
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import quote

from jupyterhub.scopes import Scope, parse_scopes

from workspace import i18n, tasks
from workspace.errors import UserError
from workspace.images import approvals as image_approvals
from workspace.images import definitions
from workspace.images import user as user_images
from workspace.limits import quotas
from workspace.service import streams
from workspace.service.api import APIHandler
from workspace.service.courses_api import MANAGE_SCOPE

KEEP_WAIT = 60.0  # how long a follower waits for an ended build's log to be kept


class ImageActions:
    """What the images API and the Images page share (mixed into an APIHandler or a PageHandler)."""

    async def site_images(self) -> list[dict]:
        described = await self.blocking(self.settings["describe_images"], self.settings["images"])
        for info in described:
            info["kind"] = "site"
            info["default"] = info["name"] == self.settings["image"]
        return described

    async def bases(self) -> dict[str, str]:
        """What the caller may build from: the site's images and the built images they may see."""
        who = self.who()
        own = await self.blocking(user_images.choices, self.db, who.name, who.groups)
        return {**self.settings["image_refs"], **own}

    def shareable(self) -> set[str] | None:
        """The courses (groups) the caller may share an image with: theirs and those they teach (None: any)."""
        user = self.caller()
        granted = parse_scopes(user.get("scopes") or []).get(MANAGE_SCOPE)
        if user.get("admin") or granted is Scope.ALL:
            return None
        return set(user.get("groups") or []) | set((granted or {}).get("group", ()))

    def approver(self) -> image_approvals.Approver:
        """The caller as one who approves images: everyone's for an administrator, their courses' for an
        instructor (MANAGE_SCOPE for the course's group), none for a student."""
        user = self.caller()
        granted = parse_scopes(user.get("scopes") or []).get(MANAGE_SCOPE)
        admin = bool(user.get("admin"))
        courses = None if admin or granted is Scope.ALL else frozenset((granted or {}).get("group", ()))
        return image_approvals.Approver(user["name"], frozenset(user.get("groups") or []), admin, courses)

    async def request_build(self, body: dict) -> dict:
        who = self.who()
        if not self.settings["user_images_offered"]:
            raise UserError(
                409,
                "Workspaces here run on a cluster whose nodes do not have images users build; ask your "
                "administrator to add the packages you need to one of the site's images.",
            )
        # blocking: a Dockerfile's context is read (sanitised) here
        definition = await self.blocking(definitions.parse_definition, body, await self.bases(), self.shareable())
        status = await self.blocking(
            quotas.status,
            self.db,
            self.settings["workspace_store"],
            self.settings["storage_quota"],
            who.name,
            who.groups,
        )
        if status.over:
            raise UserError(
                403,
                "Your storage is over its quota ({figures}), so an image build is refused: an image "
                "counts against it. Free space on the Storage page first.",
                figures=status.figures(self.lang),
            )
        builder = self.settings["image_builder"]
        context = definition.pop("context_tar", b"")
        if context:  # kept for the build (which removes it), named by the record
            definition["config"]["context"] = await self.blocking(builder.keep_context, context)
        try:
            image = await self.blocking(
                user_images.request_build, self.db, who.name, definition, builder.max_images, builder.max_queued
            )
        except UserError:
            builder.drop_context(definition.get("config"))
            raise
        self.settings["image_build_wake"].set()
        return image


class ImagesHandler(ImageActions, APIHandler):
    async def get(self):
        who = self.who()
        site = await self.site_images()
        mine = await self.blocking(user_images.listing, self.db, who, self.lang)
        self.write_json(site + [{**i, "kind": "user"} for i in mine])

    async def post(self):
        image = await self.request_build(self.body())
        self.write_json({**image, "kind": "user", "log_url": log_url(self.settings["prefix"], image["name"])}, 202)


class ImageHandler(ImageActions, APIHandler):
    async def get(self, owner: str, name: str):
        self.write_json(await self.blocking(user_images.describe, self.db, f"{owner}/{name}", self.who(), self.lang))

    async def patch(self, owner: str, name: str):
        who = self.who()
        body = self.body()
        if set(body) != {"visibility"}:
            raise UserError(400, "Only an image's “visibility” can be changed; build it again to change the rest.")
        visibility = definitions.parse_visibility(body["visibility"], self.shareable())
        self.write_json(await self.blocking(user_images.set_visibility, self.db, f"{owner}/{name}", who, visibility))

    async def delete(self, owner: str, name: str):
        image_id, ref = await self.blocking(user_images.remove, self.db, f"{owner}/{name}", self.who())
        builder = self.settings["image_builder"]
        builder.log_path(image_id).unlink(missing_ok=True)
        await self.blocking(builder.remove_image, ref)
        self.set_status(204)
        self.finish()


class ImageApprovalHandler(ImageActions, APIHandler):
    """POST .../approve and .../revoke: a state change, so only a POST (with the XSRF token when by cookie)."""

    async def post(self, owner: str, name: str, action: str):
        body = self.body()
        full, approver = f"{owner}/{name}", self.approver()
        if action == "revoke":
            if set(body) - {"for"}:
                raise UserError(400, "A revocation takes only “for”: “public” or “group:NAME”.")
            revoked = await self.blocking(image_approvals.revoke, self.db, full, approver, body.get("for"), self.lang)
            return self.write_json(revoked)
        if set(body) - {"for", "build"}:
            raise UserError(400, "An approval takes only “for” (“public” or “group:NAME”) and “build”.")
        approved = await self.blocking(
            image_approvals.approve, self.db, full, approver, body.get("for"), body.get("build"), self.lang
        )
        self.write_json(approved)


class PendingImagesHandler(ImageActions, APIHandler):
    async def get(self):
        self.write_json(await self.blocking(image_approvals.pending, self.db, self.approver(), self.lang))


class ImageLogHandler(APIHandler):
    """A build's log: the engine's while it runs, the kept one after; `?follow=1` until the build ends."""

    async def get(self, owner: str, name: str):
        who = self.who()
        full = f"{owner}/{name}"
        image_id, state, build = await self.blocking(user_images.log_of, self.db, full, who)
        follow = self.get_argument("follow", "") in ("1", "true")
        # a follower is one of the caller's few (streams.py), until its client goes
        with self.settings["followers"].held(who.name) if follow else contextlib.nullcontext():
            await self.send_log(full, image_id, state, build, follow)

    async def send_log(self, full: str, image_id: int, state: str, build, follow: bool):
        builder, db = self.settings["image_builder"], self.db
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        if follow and state == "queued":
            queued = i18n.translate(
                self.lang, "[image] {image} is queued: it starts when the builds before it have ended.", image=full
            )
            self.write(queued + "\n")
            await self.flush()
            while state == "queued":
                await asyncio.sleep(1.0)
                if self.closed:
                    return
                state, build = await self.blocking(user_images.state_of, db, image_id)
        if state == "building":
            container = builder.container_name(image_id, build)
            if not follow:
                await self.relay(builder.engine_log(container))
                return self.finish()

            def running() -> bool:
                return user_images.state_of(db, image_id) == ("building", build)

            seen: dict = {}
            await self.relay(
                streams.follow(
                    lambda since: builder.engine_log(container, since), running, self.gone, self.blocking, seen=seen
                )
            )
            # the build ended; the service keeps its log before it records the end: what came after the last
            # line passed on
            loop = asyncio.get_running_loop()
            deadline = loop.time() + KEEP_WAIT
            while (await self.blocking(user_images.state_of, db, image_id))[0] == "building":
                if self.closed or loop.time() > deadline:
                    return self.finish()
                await asyncio.sleep(0.5)
            path = builder.log_path(image_id)
            await self.relay(tasks.read_after(path, seen.get("last")))
            return self.finish()
        path = builder.log_path(image_id)
        await self.relay(tasks.read(path))
        self.finish()


def log_url(prefix: str, full_name: str) -> str:
    owner, _, name = full_name.partition("/")
    return f"{prefix}api/images/{quote(owner, safe='')}/{quote(name, safe='')}/log?follow=1"


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}api/images/?", ImagesHandler),
        (rf"{prefix}api/images/pending/?", PendingImagesHandler),
        (rf"{prefix}api/images/([^/]+)/([^/]+)/(approve|revoke)/?", ImageApprovalHandler),
        (rf"{prefix}api/images/([^/]+)/([^/]+)/log/?", ImageLogHandler),
        (rf"{prefix}api/images/([^/]+)/([^/]+)/?", ImageHandler),
    ]
