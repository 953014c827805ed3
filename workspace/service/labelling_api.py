"""REST API of a course's labelling projects (#36), under /services/workspace/api/courses/{course}/labelling.

    GET  …/labelling                   the course's projects, with the caller's role in each (its members)
    POST …/labelling                   a new project {"title", "dataset", "labels" | "config", "reviewers"}
                                       (who may set the course up); its Label Studio starts
    GET  …/labelling/{key}             one project (its members)
    POST …/labelling/{key}/export      its accepted labels as a new dataset version of the caller's
                                       {"dataset": NAME, "format": "JSON" | "COCO" | …, "accepted_only": true}

The rules are workspace/labelling/'s (who is what, the record, the container, the export); the handlers
parse, call and answer. The Label Studio itself is at …/labelling/{key}/ (labelling_proxy.py).
"""

from __future__ import annotations

import datetime as dt

from workspace import dataset_versions, i18n
from workspace.errors import UserError
from workspace.labelling import exports, projects
from workspace.service.api import APIHandler
from workspace.service.courses_api import CourseActions


class LabellingActions(CourseActions):
    """What the API and the Labelling page share (mixed into an APIHandler or a PageHandler)."""

    def described(self, project, role: str | None, address: str | None = None) -> dict:
        team = self.settings["labelling_team"]
        described = {**project.as_dict(role), "url": team.path(project.key) + "/", "running": address is not None}
        return {**described, "message": i18n.said(self.lang, project.message)}

    async def course_projects(self, course: str) -> list[dict]:
        """The course's projects, each with the caller's role and its address; 404 for one not of the course."""
        found = await self.blocking(projects.listing, self.db, course, self.who(), self.may_manage(course))
        team = self.settings["labelling_team"]
        for p in found:
            if p["role"] == "manager":  # its managers are told why its Label Studio does not start
                reason = await self.blocking(team.trouble, p["key"])
                if reason:
                    p["message"] = i18n.kept("Its Label Studio does not start: {reason}", reason=reason)
            p["message"] = i18n.said(self.lang, p["message"])
        return [{**p, "url": team.path(p["key"]) + "/"} for p in found]

    async def new_project(self, course: str, body: dict) -> dict:
        """Record a project of `course` and start its Label Studio; the user's 4xx otherwise."""
        if not self.may_manage(course):
            raise UserError(
                403, "Only the course's instructors can start a labelling project for {course}.", course=course
            )
        group = await self.service_hub(f"/groups/{course}")
        if group is None:
            raise UserError(404, "There is no course “{course}”: set it up from its roster first.", course=course)
        policy = self.settings["labelling_policy"]
        project = await self.blocking(
            projects.create, self.db, course, body, self.who(), set(group.get("users") or []), policy.max_per_course
        )
        try:
            await self.blocking(self.settings["labelling_team"].ensure, project)
        except UserError as e:
            await self.blocking(projects.set_message, self.db, project.key, e.kept())
            raise
        return self.described(project, "manager")

    async def member_project(self, course: str, key: str):
        """The project and the caller's role in it; the same 404 for one who is not of it as for none."""
        project = await self.blocking(projects.find, self.db, key)
        role = None
        if project is not None and project.course == course:
            role = projects.role_of(project, self.who(), self.may_manage(course))
        if role is None:
            raise UserError(404, "There is no labelling project here, or it is not one of your courses'.")
        return project, role

    async def export_labels(self, course: str, key: str, body: dict | None = None) -> dict:
        """Export the project's labels (its accepted ones unless `body` says otherwise; None: the request's
        JSON, read once the caller is known to manage the project) as a new version of a dataset of the
        caller's (made if they have none of that name): the version; the user's 4xx otherwise."""
        project, role = await self.member_project(course, key)
        if role != "manager":
            raise UserError(403, "Only the course's instructors export a labelling project's labels.")
        if body is None:
            body = self.body()
        name, fmt, accepted_only = exports.parse_request(body)
        address = await self.blocking(self.settings["labelling_addresses"].get, key)
        if address is None:
            raise UserError(
                503, "The Label Studio of “{title}” is starting or stopped; try again in a minute.", title=project.title
            )
        data = await exports.fetch(address, project, fmt, accepted_only)
        caller = self.who()
        when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return await self.blocking(
            dataset_versions.add_files,
            self.db,
            self.settings["workspace_store"],
            self.settings["dataset_rules"],
            (caller.name, name),
            {exports.file_name(project.title, fmt): data},
            "labelling",
            f"{course}/{project.title} ({fmt}, {'accepted' if accepted_only else 'all'}, {when})",
            caller,
        )


class LabellingProjectsHandler(LabellingActions, APIHandler):
    async def get(self, course: str):
        self.write_json(await self.course_projects(course))

    async def post(self, course: str):
        self.write_json(await self.new_project(course, self.body()), status=201)


class LabellingProjectHandler(LabellingActions, APIHandler):
    async def get(self, course: str, key: str):
        project, role = await self.member_project(course, key)
        address = await self.blocking(self.settings["labelling_addresses"].get, key)
        self.write_json(self.described(project, role, address))


class LabellingExportHandler(LabellingProjectHandler):
    async def post(self, course: str, key: str):
        self.write_json(await self.export_labels(course, key), status=201)


def handlers(prefix: str) -> list:
    course, key = r"(?P<course>[^/]+)", r"(?P<key>[0-9a-f]{12})"
    return [
        (rf"{prefix}api/courses/{course}/labelling/?", LabellingProjectsHandler),
        (rf"{prefix}api/courses/{course}/labelling/{key}/?", LabellingProjectHandler),
        (rf"{prefix}api/courses/{course}/labelling/{key}/export/?", LabellingExportHandler),
    ]
