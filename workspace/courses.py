"""A course: a JupyterHub group of students, read (never changed) by its instructors, provisioned from a
roster in one step.

Who teaches what is JupyterHub RBAC, made from WORKSPACE_COURSES in jupyterhub_config.py: the custom
scopes `custom:workspaces:read!group=COURSE` (read the students' workspaces) and
`custom:courses:manage!group=COURSE` (set the course up). The members are the hub's group.

Setting a course up (`PUT /api/courses/{name}`, the Course page, `workspace course-setup`) takes the
whole roster and the template, checks everything first, then: creates the users the hub lacks, makes the
group's members exactly the roster, shares the course's datasets with the group, and gives each student
the course's workspace (a record, shown on their Workspaces page). A student's first start of it restores
the starter (an instructor's execution output), with the course's resource type, image and datasets as
its defaults. Students' own data is never touched: one who leaves the roster keeps their workspaces.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from dataclasses import dataclass, field

from sqlalchemy import JSON, DateTime, ForeignKey, String, select
from sqlalchemy.orm import Mapped, mapped_column, relationship

from workspace import datasets, i18n
from workspace.db import Base, Database, iso, utcnow
from workspace.errors import UserError
from workspace.executions import UNFINISHED, WORKSPACE_NAME, Execution, Workspace, execution_by_number, find_workspace
from workspace.limits import resource_types
from workspace.limits.quotas import StorageUsage

# JupyterHub usernames as this deployment uses them in URLs and container names (normalized lower case)
USERNAME = re.compile(r"^[a-z0-9][a-z0-9._@+-]{0,63}$")
MAX_ROSTER = 5000


class Course(Base):
    """The template a course's students get (the members themselves are the hub's group)."""

    __tablename__ = "courses"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    workspace: Mapped[str] = mapped_column(String(255))
    resource_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    image: Mapped[str | None] = mapped_column(String(512), nullable=True)
    datasets: Mapped[list | None] = mapped_column(JSON, nullable=True)  # refs, like "prof/mnist"
    starter_id: Mapped[int | None] = mapped_column(ForeignKey("executions.id"), nullable=True)
    updated_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    updated: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)

    starter: Mapped[Execution | None] = relationship(foreign_keys=[starter_id])

    def template(self) -> dict:
        st = self.starter
        return {
            "workspace": self.workspace,
            "resource_type": self.resource_type,
            "image": self.image,
            "datasets": list(self.datasets or []),
            "starter": {
                "owner": st.workspace.owner,
                "workspace": st.workspace.name,
                "number": st.number,
                "has_output": st.has_output,
            }
            if st
            else None,
            "updated": iso(self.updated),
            "updated_by": self.updated_by,
        }

    def start_defaults(self) -> dict:
        """The user_options a start of the course's workspace gets unless it chooses otherwise."""
        options = {"datasets": list(self.datasets or [])} if self.datasets else {}
        if self.resource_type:
            options["resource_type"] = self.resource_type
        if self.image:
            options["image"] = self.image
        return options


# -- the roster ------------------------------------------------------------------------


def parse_roster(value) -> list[str]:
    """Usernames from a list, or from text: one per line, or CSV whose first column is the username (a
    header `username` and lines starting with # are skipped). Bad input is a 400 naming the line."""
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise UserError(400, "“students” must be a list of usernames.")
        lines = [(i + 1, v) for i, v in enumerate(value)]
    elif isinstance(value, str):
        rows = csv.reader(io.StringIO(value))
        lines = [(i + 1, row[0] if row else "") for i, row in enumerate(rows)]
    else:
        raise UserError(400, "“students” must be a list of usernames, or the roster's text (one per line, or CSV).")
    names: list[str] = []
    for number, raw in lines:
        name = raw.strip().lower()
        if not name or name.startswith("#") or (number == 1 and name in ("username", "user", "name", "login")):
            continue
        if not USERNAME.match(name):
            raise UserError(
                400,
                "Line {line} of the roster, “{text}”, is not a username: use 1–64 "
                "letters, digits, “.”, “_”, “-”, “@” or “+”, starting with a letter or digit.",
                line=number,
                text=raw.strip()[:80],
            )
        if name not in names:
            names.append(name)
    if len(names) > MAX_ROSTER:
        raise UserError(
            400,
            "A roster may name at most {limit} students; this one names {count}.",
            limit=MAX_ROSTER,
            count=len(names),
        )
    return names


def why_privileged(name: str, model: dict | None, config: dict[str, dict], locale: str = i18n.DEFAULT) -> str | None:
    """Why a user (the hub's model of them; None: not a user yet) is no student: an instructor of a course
    of `config` (WORKSPACE_COURSES), an administrator, or a holder of a role beyond the default one, in
    `locale`. None for a student.

    A roster may name only students, and an instructor reads only students: enrolling a privileged user
    would give the instructor read access to them."""
    if name in {i for spec in config.values() for i in spec.get("instructors", [])}:
        return i18n.translate(locale, "an instructor")
    if not model:
        return None  # not a user yet: the set-up creates a plain one
    if model.get("admin"):
        return i18n.translate(locale, "an administrator")
    extra = sorted(set(model.get("roles") or ["user"]) - {"user"})
    return i18n.translate(locale, "holds the role {roles}", roles=", ".join(extra)) if extra else None


# -- setting a course up -------------------------------------------------------------------


@dataclass
class Setup:
    """A checked course set-up, ready to apply."""

    course: str
    students: list[str]
    workspace: str
    resource_type: str | None
    image: str | None
    datasets: list[str]
    starter_id: int | None
    by: str
    notes: list[str] = field(default_factory=list)


def check_setup(
    db: Database,
    course: str,
    body: dict,
    caller: str,
    admin: bool,
    types: list[resource_types.ResourceType],
    default_type: str | None,
    images: list[str],
    locale: str = i18n.DEFAULT,
) -> Setup:
    """Check a set-up request (everything, before anything changes); the user's 400/403/404 otherwise.
    Its notes are in `locale`."""
    _check_request(course, body)
    students = parse_roster(body["students"])
    workspace = _workspace_name(body, course)
    rtype, image = _check_choices(body, course, types, default_type, images)
    refs = datasets.parse_refs(body.get("datasets"))
    starter = body.get("starter") or None
    with db.session() as s:
        _check_datasets(s, refs, caller, admin)
        starter_id = _starter_id(s, starter, caller) if starter is not None else None
        taken = _taken(s, workspace, students, course)
    notes = [_taken_note(taken, workspace, locale)] if taken else []
    return Setup(course, students, workspace, rtype, image, [str(r) for r in refs], starter_id, caller, notes)


def _check_request(course: str, body: dict) -> None:
    """The course's name and the request's fields (a roster among them)."""
    if not WORKSPACE_NAME.match(course):
        raise UserError(
            400,
            "“{course}” cannot be a course name: use lower-case letters, digits, “-”, “_” "
            "or “.” (it is the JupyterHub group of its students).",
            course=course,
        )
    unknown = set(body) - {"students", "workspace", "resource_type", "image", "datasets", "starter"}
    if unknown:
        raise UserError(
            400,
            "Unknown field(s) {fields}: a course set-up takes students, "
            "workspace, resource_type, image, datasets and starter.",
            fields=", ".join(sorted(unknown)),
        )
    if "students" not in body:
        raise UserError(400, "Give the roster: “students”, a list of usernames (or the roster's text).")


def _workspace_name(body: dict, course: str) -> str:
    """The students' workspace's name (the course's by default), checked."""
    workspace = body.get("workspace") or course
    if not isinstance(workspace, str) or not WORKSPACE_NAME.match(workspace):
        raise UserError(
            400,
            "“{workspace}” cannot be the course's workspace name: use 1–63 lower-case letters, "
            "digits, “-”, “_” or “.”, starting with a letter or digit (like “cs101-lab1”).",
            workspace=workspace,
        )
    return workspace


def _check_choices(
    body: dict, course: str, types: list[resource_types.ResourceType], default_type: str | None, images: list[str]
) -> tuple[str | None, str | None]:
    """The resource type and image the course starts with (None: the students choose), checked."""
    rtype = body.get("resource_type") or None
    if rtype is not None:
        if not isinstance(rtype, str):
            raise UserError(400, "“resource_type” must be the name of a resource type.")
        resource_types.choose(types, rtype, default_type, {course})  # the type exists and the course may use it
    image = body.get("image") or None
    if image is not None and image not in images:
        raise UserError(
            400,
            "“{image}” is not an image this course's students may start; choose one of: {images} "
            "(a user's image must first be shared with the course and approved for it, on the Images page).",
            image=image,
            images=", ".join(images),
        )
    return rtype, image


def _check_datasets(s, refs: list, caller: str, admin: bool) -> None:
    """The course's datasets: unversioned, the caller's own (an admin's: any), each with a version."""
    for ref in refs:
        if ref.version is not None:
            raise UserError(
                400,
                "Give the course's datasets without a version ({owner}/{name}): "
                "students get the newest version at each start.",
                owner=ref.owner,
                name=ref.name,
            )
        ds = datasets.find_dataset(s, ref.owner, ref.name)
        if ds is None or (ds.owner != caller and not admin):
            raise UserError(
                403,
                "You can give the course only datasets you own; {owner}/{name} is "
                "not yours (its owner can share it with the group instead).",
                owner=ref.owner,
                name=ref.name,
            )
        if not ds.live_versions():
            raise UserError(400, "The dataset {dataset} has no versions yet: upload one first.", dataset=ds.ref)


def _starter_id(s, starter, caller: str) -> int:
    """The execution whose output each student's first start restores: one of the caller's, with output."""
    if (
        not isinstance(starter, dict)
        or not isinstance(starter.get("workspace"), str)
        or not isinstance(starter.get("number"), int)
        or isinstance(starter.get("number"), bool)
    ):
        raise UserError(
            400,
            '“starter” must be {"workspace": NAME, "number": N}: one of your '
            "executions, whose output each student's first start restores.",
        )
    ws = find_workspace(s, caller, starter["workspace"])
    ex = execution_by_number(s, ws, starter["number"]) if ws is not None else None
    if ex is None:
        raise UserError(
            404,
            "You have no execution #{number} of “{workspace}” to use as the starter.",
            number=starter["number"],
            workspace=starter["workspace"],
        )
    if not ex.has_output:
        raise UserError(
            400,
            "Execution #{number} of “{workspace}” has no saved output to use as the "
            "starter; stop it (so that its home is saved), or choose another.",
            number=ex.number,
            workspace=ws.name,
        )
    return ex.id


def _taken(s, workspace: str, students: list[str], course: str) -> list[str]:
    """The students who have a workspace of that name of their own (not the course's)."""
    return [
        o
        for (o,) in s.execute(
            select(Workspace.owner).where(
                Workspace.name == workspace,
                Workspace.owner.in_(students),
                (Workspace.course.is_(None)) | (Workspace.course != course),
            )
        )
    ]


def _taken_note(taken: list[str], workspace: str, locale: str) -> str:
    """The set-up's note that those students' own workspaces are left as they are (ten named at most)."""
    shown = ", ".join(sorted(taken)[:10])
    if len(taken) > 10:
        return i18n.translate(
            locale,
            "{count} student(s) already have a workspace “{workspace}” of their own, which is left "
            "as it is: {students} ….",
            count=len(taken),
            workspace=workspace,
            students=shown,
        )
    return i18n.translate(
        locale,
        "{count} student(s) already have a workspace “{workspace}” of their own, which is left as it is: {students}.",
        count=len(taken),
        workspace=workspace,
        students=shown,
    )


def apply_setup(db: Database, setup: Setup) -> dict:
    """Record the course's template, give each student its workspace, share the datasets with the group
    (blocking; the hub's users and group are the caller's part)."""
    now = utcnow()
    with db.session() as s:
        c = s.get(Course, setup.course) or Course(name=setup.course, created=now)
        c.workspace, c.resource_type, c.image = setup.workspace, setup.resource_type, setup.image
        c.datasets, c.starter_id, c.updated_by, c.updated = setup.datasets, setup.starter_id, setup.by, now
        s.add(c)
        have = {
            w.owner: w
            for w in s.scalars(
                select(Workspace).where(Workspace.name == setup.workspace, Workspace.owner.in_(setup.students))
            )
        }
        created = []
        for student in setup.students:
            if student not in have:
                s.add(Workspace(owner=student, name=setup.workspace, course=setup.course))
                created.append(student)
        shared = []
        for ref in setup.datasets:
            owner, name = ref.split("/", 1)
            if datasets.share(datasets.find_dataset(s, owner, name), "group", setup.course):
                shared.append(ref)
    return {"workspaces_created": created, "shared": shared}


def starter_for(session, ws: Workspace) -> Execution | None:
    """The output a first start of a course's workspace restores (None: none, or it was deleted)."""
    if not ws.course:
        return None
    c = session.get(Course, ws.course)
    return c.starter if c is not None and c.starter is not None and c.starter.has_output else None


def start_defaults(db: Database, owner: str, name: str) -> dict:
    """The course's defaults for a start of this workspace ({} for a workspace of no course)."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        c = s.get(Course, ws.course) if ws is not None and ws.course else None
        return c.start_defaults() if c is not None else {}


def starter_of_courses(session, ex: Execution) -> list[str]:
    """The courses whose starter is this execution (its output must stay)."""
    return list(session.scalars(select(Course.name).where(Course.starter_id == ex.id)))


def setup_choices(db: Database, caller: str, locale: str = i18n.DEFAULT) -> dict:
    """What the caller can give a course: their datasets with a version, and their outputs as starters
    (labelled in `locale`)."""
    with db.session() as s:
        owned = s.scalars(
            select(datasets.Dataset).where(datasets.Dataset.owner == caller).order_by(datasets.Dataset.name)
        )
        refs = [ds.ref for ds in owned if ds.live_versions()]
        starters = []
        for ws in s.scalars(select(Workspace).where(Workspace.owner == caller).order_by(Workspace.name)):
            for ex in sorted(ws.executions, key=lambda e: e.number, reverse=True):
                if ex.has_output:
                    starters.append(
                        {
                            "value": f"{ws.name}:{ex.number}",
                            "label": i18n.translate(
                                locale,
                                "{workspace} #{number}, saved {saved}",
                                workspace=ws.name,
                                number=ex.number,
                                saved=iso(ex.stopped)[:16].replace("T", " ") if ex.stopped else "",
                            ),
                        }
                    )
        return {"datasets": refs, "starters": starters}


# -- what an instructor looks at ---------------------------------------------------------------


def overview(db: Database, courses: dict[str, list[str]]) -> list[dict]:
    """[{name, running, template, students: [{name, workspaces, last_start, running, storage}]}] for
    {course: [member, ...]} (blocking)."""
    students = sorted({name for members in courses.values() for name in members})
    found = {n: {"name": n, "workspaces": [], "last_start": None, "running": 0, "storage": None} for n in students}
    with db.session() as s:
        for ws in s.scalars(select(Workspace).where(Workspace.owner.in_(students)).order_by(Workspace.name)):
            student = found[ws.owner]
            latest = ws.latest
            student["workspaces"].append(
                {
                    "name": ws.name,
                    "state": latest.state if latest else "new",
                    "number": latest.number if latest else None,
                    "stop_reason": latest.stop_reason if latest else None,
                }
            )
            if latest is not None:
                started = iso(latest.started)
                student["last_start"] = max(filter(None, (student["last_start"], started)), default=None)
                student["running"] += latest.state in UNFINISHED
        # the last measurement (taken when the student's storage changed and was looked at): a course of
        # hundreds is not walked for one page
        for u in s.scalars(select(StorageUsage).where(StorageUsage.owner.in_(students))):
            found[u.owner]["storage"] = {"bytes": u.bytes, "files": u.files, "measured_at": iso(u.measured_at)}
        templates = {c.name: c.template() for c in s.scalars(select(Course).where(Course.name.in_(list(courses))))}
    return [
        {
            "name": course,
            "running": sum(found[n]["running"] for n in members),
            "template": templates.get(course),
            "students": [found[n] for n in members],
        }
        for course, members in courses.items()
    ]
