"""REST API of a course's pre-warm, under /services/workspace/api/ (the job itself: workspace/prewarm/).

    GET  /api/courses/{name}/prewarm    its progress: homes on their nodes of all, bytes sent, the image on
                                        each node (state "none": not pre-warmed since the service started)
    POST /api/courses/{name}/prewarm    start it: 202 with its first progress; 409 while one runs; on a
                                        single host 200 at once (everything is on the one node already)

Only the course's instructors (MANAGE_SCOPE for its group) and administrators, for the course's enrolled
students (its group's members that are students). A POST with the login cookie needs the XSRF token
(JupyterHub's check, `APIHandler.caller`); a GET only reads.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from workspace.errors import UserError
from workspace.prewarm import job
from workspace.service.api import APIHandler
from workspace.service.courses_api import CourseActions

log = logging.getLogger("workspace.service")


class PrewarmHandler(CourseActions, APIHandler):
    """A course's pre-warm before a lecture: start it, follow it."""

    def allowed(self, course: str) -> None:
        if not self.may_manage(course):
            raise UserError(
                403, "Only the instructors of “{course}” (and administrators) may pre-warm it.", course=course
            )

    async def get(self, course: str):
        self.allowed(course)
        jobs = self.settings["prewarms"]
        if jobs is None:
            return self.write_json(job.without_job(course, True, self.lang))
        current = jobs.of(course)
        self.write_json(current.status(self.lang) if current is not None else job.without_job(course, False, self.lang))

    async def post(self, course: str):
        self.allowed(course)
        jobs = self.settings["prewarms"]
        if jobs is None:
            return self.write_json(job.without_job(course, True, self.lang))
        students = await self.enrolled(course)
        by = self.caller()["name"]
        started = await self.blocking(jobs.start, course, students, by)
        log.info("%s pre-warms %s: %d student(s) on %d node(s)", by, course, len(students), len(started.images))
        self.write_json(started.status(self.lang), status=202)

    async def enrolled(self, course: str) -> list[str]:
        """The course group's members that are students (an administrator or an instructor put into the group
        is left out, as everywhere a course acts on its students)."""
        group = await self.service_hub(f"/groups/{quote(course, safe='')}")
        if group is None:
            raise UserError(404, "There is no course “{course}” (no group of that name).", course=course)
        members = sorted(group.get("users") or [])
        refused = await self.privileged(members)
        return [m for m in members if m not in refused]


def handlers(prefix: str) -> list:
    return [(rf"{prefix}api/courses/([^/]+)/prewarm/?", PrewarmHandler)]
