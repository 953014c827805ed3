"""The Images page (#18): the site's images with what each holds, the users' images the caller may see, a
form to build one (from packages, or from a Dockerfile and its folder, #32) whose log is followed live, and
(for administrators and instructors) the shared images that wait for their approval (#28). The script uses
the REST API (images_api.py)."""

from __future__ import annotations

from tornado import web

from workspace.images import approvals as image_approvals
from workspace.images import dockerfiles
from workspace.images import user as user_images
from workspace.service.images_api import ImageActions
from workspace.service.pages import PageHandler


class ImagesPage(ImageActions, PageHandler):
    @web.authenticated
    async def get(self):
        who = self.who()
        approver = self.approver()
        # an administrator's, or an instructor's for their courses: the shared builds that wait for them
        approves = approver.public or approver.courses is None or bool(approver.courses)
        pending = await self.blocking(image_approvals.pending, self.db, approver, self.lang) if approves else []
        try:
            site = await self.site_images()
        except Exception:  # the engine does not answer: the names alone
            site = [{"name": n, "available": None, "versions": {}, "kind": "site"} for n in self.settings["images"]]
        self.render_page(
            "images.html",
            site=site,
            images=await self.blocking(user_images.listing, self.db, who, self.lang),
            bases=list(await self.bases()),
            me=who.name,
            groups=sorted(who.groups),
            offered=self.settings["user_images_offered"],
            pending=pending,
            approver=approver,
            context_max=dockerfiles.MAX_CONTEXT_BYTES,
        )


def handlers(prefix: str) -> list:
    return [(rf"{prefix}images/?", ImagesPage)]
