"""The Labelling page (#36): /services/workspace/labelling lists, for each course of the caller's (a hub group
they are in, or one they may set up), its labelling projects with the caller's role in each and a link that
opens the project's Label Studio. Who may set the course up also finds a form to start a new project and,
per project, one to export its labels as a version of a dataset of theirs. Every change is a POST with the
XSRF token; a refusal is said on the page with its status, the form keeping what was typed. The rules are
workspace/labelling/'s, reached through labelling_api.LabellingActions as the REST API reaches them.
"""

from __future__ import annotations

from tornado import web

from workspace import datasets, i18n
from workspace.errors import UserError
from workspace.labelling.exports import FORMATS
from workspace.service import docs_page
from workspace.service.labelling_api import LabellingActions
from workspace.service.pages import PageHandler

NEW_FIELDS = ("title", "dataset", "labels", "reviewers")
EXPORT_FIELDS = ("dataset", "format")
MANUAL = "students/labelling.html#labelling-course"


class LabellingPage(LabellingActions, PageHandler):
    @web.authenticated
    async def get(
        self, error: str | None = None, status: int = 200, message: str | None = None, form: dict | None = None
    ):
        courses = []
        for course in await self.courses():
            manages = self.may_manage(course)
            courses.append({"name": course, "manage": manages, "projects": await self.course_projects(course)})
        for p in (p for c in courses for p in c["projects"]):
            p["message"] = i18n.said(self.lang, p.get("message"))  # why its Label Studio is not running
        self.set_status(status)
        self.render_page(
            "labelling.html",
            courses=courses,
            mine=await self.own_datasets() if any(c["manage"] for c in courses) else [],
            formats=FORMATS,
            manual=docs_page.help_url(self.prefix, MANUAL, self.lang),
            error=error,
            message=message,
            form=form or {},
        )

    async def courses(self) -> list[str]:
        """The caller's courses: the hub's groups they are in, and those they may set up (an administrator's or
        an instructor's), by name."""
        names = set(self.who().groups)
        try:
            taught = await self.taught_courses()
        except UserError:  # not an instructor: their groups alone
            taught = {}
        names |= {course for course in taught if course and self.may_manage(course)}
        return sorted(names)

    async def own_datasets(self) -> list[str]:
        """The references of the caller's datasets that have a version (the new-project form offers them)."""
        who = self.who()
        found = await self.blocking(datasets.listing, self.db, who.name, set(who.groups))
        return [d["ref"] for d in found["mine"] if d["versions"]]

    @web.authenticated
    async def post(self):
        arg = self.get_body_argument
        action, course = arg("action", ""), arg("course", "").strip()
        form = {"action": action, "course": course, "key": arg("key", "")}
        try:
            if action == "new":
                body = {f: arg(f, "").strip() for f in NEW_FIELDS}
                form.update(body)
                project = await self.new_project(course, body)
                text = i18n.translate(
                    self.lang,
                    "Started the labelling project “{title}”; its Label Studio opens in a minute.",
                    title=project["title"],
                )
            elif action == "export":
                body = {f: arg(f, "").strip() for f in EXPORT_FIELDS}
                every = arg("all", "") == "on"
                form.update(body, all=every)
                version = await self.export_labels(course, form["key"], {**body, "accepted_only": not every})
                text = i18n.translate(
                    self.lang,
                    "Made version {version} of your dataset {dataset}.",
                    version=version["version"],
                    dataset=body["dataset"],
                )
            else:
                raise UserError(400, "Say what to do: new (a labelling project) or export (its labels).")
        except UserError as e:
            return await self.get(error=e.in_locale(self.lang), status=e.status_code, form=form)
        await self.get(message=text)


def handlers(prefix: str) -> list:
    return [(rf"{prefix}labelling/?", LabellingPage)]
