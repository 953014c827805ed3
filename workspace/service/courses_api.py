"""REST API of courses, under /services/workspace/api/ (the model and its checks: workspace/courses.py).

    GET /api/courses            the courses the caller teaches: each student's workspaces, what runs now,
                                their storage (administrators: every group)
    PUT /api/courses/{name}     set a course up from its roster in one step

An instructor holds, for their course's JupyterHub group, READ_SCOPE (read the students' objects) and
MANAGE_SCOPE (set the course up); both are made from WORKSPACE_COURSES in jupyterhub_config.py. The
members are the hub's: the set-up changes them with the service's own token (its role may create users
and groups), after courses.check_setup found nothing wrong.
"""

from __future__ import annotations

from urllib.parse import quote

from jupyterhub.scopes import Scope, parse_scopes

from workspace import courses, i18n
from workspace.errors import UserError
from workspace.images import user as user_images
from workspace.service.api import READ_SCOPE, APIHandler

# Set a course up (its roster and template): instructors hold it for their course's group
# (`custom:courses:manage!group=cs101`).
MANAGE_SCOPE = "custom:courses:manage"


class CourseActions:
    """What the course API and the Course page share (mixed into an APIHandler or a PageHandler)."""

    async def taught_courses(self) -> dict[str, list[str]]:
        """The students the caller may read, by course (JupyterHub group): every group for an administrator
        or a holder of READ_SCOPE unfiltered, the scope's groups for an instructor, and the users the
        scope names one by one under "". 403 for one who reads nobody else."""
        user = self.caller()
        granted = parse_scopes(user.get("scopes") or []).get(READ_SCOPE)
        if user.get("admin") or granted is Scope.ALL:
            groups, offset = [], 0
            while True:  # the hub pages its lists
                page = await self.service_hub(f"/groups?offset={offset}&limit=200") or []
                groups += page
                offset += len(page)
                if len(page) < 200:
                    break
            return {g["name"]: sorted(g.get("users") or []) for g in groups}
        if not granted:
            raise UserError(
                403,
                "Courses are for instructors: ask an administrator to make you one "
                "(WORKSPACE_COURSES); your own workspaces are on the Workspaces page.",
            )
        found = {}
        for name in sorted(granted.get("group", ())):
            found[name] = sorted((await self.service_hub(f"/groups/{quote(name, safe='')}") or {}).get("users") or [])
        if granted.get("user"):
            found[""] = sorted(granted["user"])
        return found

    def may_manage(self, course: str) -> bool:
        """Whether the caller may set `course` up: an administrator, or a holder of MANAGE_SCOPE for its group."""
        user = self.caller()
        granted = parse_scopes(user.get("scopes") or []).get(MANAGE_SCOPE)
        return bool(user.get("admin")) or granted is Scope.ALL or bool(granted and course in granted.get("group", ()))

    async def set_up_course(self, course: str, body: dict) -> dict:
        """Check a course set-up, then make the hub's users and group match the roster and record the
        template (courses.py); what changed, with a sentence."""
        setup = await self.checked_setup(course, body)
        group, members = await self.course_group(course)
        created = await self.create_students(setup.students)
        added, removed = sorted(set(setup.students) - members), sorted(members - set(setup.students))
        await self.change_members(course, group, added, removed)
        applied = await self.blocking(courses.apply_setup, self.db, setup)
        return {
            "course": course,
            "students": setup.students,
            "created_users": created,
            "added": added,
            "removed": removed,
            **applied,
            "notes": setup.notes,
            "message": self.setup_message(course, setup, created, added, removed, applied),
        }

    async def checked_setup(self, course: str, body: dict) -> courses.Setup:
        """The set-up `body` asks for, checked (courses.check_setup): 403 for one who may not set the course
        up, or for a roster that names someone who is not a student."""
        if not self.may_manage(course):
            raise UserError(
                403, "Only the instructors of “{course}” (and administrators) may set it up.", course=course
            )
        user = self.caller()
        images = list(self.settings["images"])
        if self.settings["user_images_offered"]:
            # the users' images every student of the course may start: shared with it (or public) and approved
            # for it (#28)
            images += list(await self.blocking(user_images.choices, self.db, "", {course}))
        setup = await self.blocking(
            courses.check_setup,
            self.db,
            course,
            body,
            user["name"],
            bool(user.get("admin")),
            self.settings["resource_types"],
            self.settings["default_resource_type"],
            images,
            self.lang,
        )
        # a roster names students only: enrolling an administrator or an instructor would give this
        # instructor read access to them (and plant a workspace restoring this instructor's starter)
        refused = await self.privileged(setup.students)
        if refused:
            shown = "; ".join(f"{n} ({why})" for n, why in sorted(refused.items())[:10])
            raise UserError(
                403,
                "A roster may name only students; these are not: {names}. Remove them from the "
                "roster and send it again (nothing was changed).",
                names=shown,
            )
        return setup

    async def course_group(self, course: str) -> tuple[str, set[str]]:
        """The course's group in the hub (made if there is none): its API path and its members now."""
        group = f"/groups/{quote(course, safe='')}"
        code, model = await self.service_hub_call("GET", group)
        if code == 404:
            code, model = await self.service_hub_call("POST", group)
        if code not in (200, 201):
            raise UserError(502, "The hub refused to create the group “{course}” ({code}).", course=course, code=code)
        return group, set((model or {}).get("users") or [])

    async def create_students(self, students: list[str]) -> list[str]:
        """Make the hub's users of the roster that it does not have yet; their names."""
        created: list[str] = []
        if students:
            code, made = await self.service_hub_call("POST", "/users", {"usernames": students})
            if code == 201:
                created = sorted(u["name"] for u in made or [])
            elif code == 400:
                raise UserError(
                    400,
                    "The hub refused a name of the roster: {reason}",
                    reason=(made or {}).get("message") or i18n.translate(self.lang, "invalid username"),
                )
            elif code != 409:  # 409: all exist already
                raise UserError(502, "The hub refused to create the roster's users ({code}).", code=code)
        return created

    async def change_members(self, course: str, group: str, added: list[str], removed: list[str]) -> None:
        """Add and remove the course group's members (`group`: its API path)."""
        for method, names in (("POST", added), ("DELETE", removed)):
            if names:
                code, _ = await self.service_hub_call(method, f"{group}/users", {"users": names})
                if code != 200:
                    raise UserError(
                        502, "The hub refused to change the members of “{course}” ({code}).", course=course, code=code
                    )

    def setup_message(
        self, course: str, setup: courses.Setup, created: list, added: list, removed: list, applied: dict
    ) -> str:
        """What the set-up did, in a sentence (the caller's language)."""
        message = i18n.translate(
            self.lang,
            "{course}: {students} student(s) ({created} new user(s), {added} added, "
            "{removed} removed from the group); workspace “{workspace}” given to {given} more.",
            course=course,
            students=len(setup.students),
            created=len(created),
            added=len(added),
            removed=len(removed),
            workspace=setup.workspace,
            given=len(applied["workspaces_created"]),
        )
        if applied["shared"]:
            message += " " + i18n.translate(
                self.lang, "Shared {datasets} with the group.", datasets=", ".join(applied["shared"])
            )
        if setup.notes:
            message += " " + " ".join(setup.notes)
        return message


class CoursesHandler(CourseActions, APIHandler):
    """The courses the caller teaches: each student's workspaces, what runs now, their storage."""

    async def get(self):
        self.write_json(await self.blocking(courses.overview, self.db, await self.taught_courses()))


class CourseHandler(CourseActions, APIHandler):
    """PUT: set a course up from its roster in one step (courses.py)."""

    async def put(self, name: str):
        self.write_json(await self.set_up_course(name, self.body()))


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}api/courses/?", CoursesHandler),
        (rf"{prefix}api/courses/([^/]+)/?", CourseHandler),
    ]
