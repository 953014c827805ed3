"""The records of a course's labelling projects, and who is what in one.

A project labels one dataset version with one label set, in its own Label Studio (team.py). Its people
are the course's (the hub's group, never a list of its own): its managers are whoever may set the course
up (the instructor who made it among them), the students it names are its reviewers, every other member
labels. Who is what is decided at each request from the hub's groups and the project's reviewers, so a
student who leaves the course loses it at once and a reviewer named later is one at their next click.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, String, Text, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from workspace import datasets
from workspace.caller import Caller
from workspace.db import Base, Database, iso, utcnow
from workspace.errors import UserError
from workspace.vault import Sealed

from .labels import config_of

FIELDS = {"title", "dataset", "labels", "config", "reviewers"}
KEY = re.compile(r"^[0-9a-f]{12}$")


def new_key() -> str:
    return secrets.token_hex(6)


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class LabellingProject(Base):
    __tablename__ = "labelling_projects"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(12), unique=True, default=new_key)
    course: Mapped[str] = mapped_column(String(255), index=True)
    title: Mapped[str] = mapped_column(String(50))
    creator: Mapped[str] = mapped_column(String(255))
    dataset: Mapped[str] = mapped_column(String(512))  # "owner/name:N", as it was chosen
    dataset_version_id: Mapped[int] = mapped_column(ForeignKey("dataset_versions.id"), index=True)
    dataset_key: Mapped[str] = mapped_column(String(64))  # the version's files in the store
    config: Mapped[str] = mapped_column(Text)
    reviewers: Mapped[list] = mapped_column(JSON, default=list)
    # what the service's proxy sends with each request, and the only thing Label Studio trusts a name from
    secret: Mapped[str] = mapped_column(Sealed, default=new_secret)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)  # why its Label Studio is not running
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    deleted: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)

    def as_dict(self, role: str | None = None) -> dict:
        return {
            "id": self.id,
            "key": self.key,
            "course": self.course,
            "title": self.title,
            "creator": self.creator,
            "dataset": self.dataset,
            "reviewers": list(self.reviewers or []),
            "role": role,
            "message": self.message,
            "created": iso(self.created),
        }


def role_of(project: LabellingProject, caller: Caller, manages: bool) -> str | None:
    """What `caller` is in `project`: manager (may set its course up), reviewer (a member it names),
    annotator (any other member of its course), or None (nobody of the course)."""
    if manages:
        return "manager"
    if project.course not in caller.groups:
        return None
    return "reviewer" if caller.name in (project.reviewers or []) else "annotator"


def by_key(session: Session, key: str) -> LabellingProject | None:
    if not KEY.match(key or ""):
        return None
    return session.scalar(
        select(LabellingProject).where(LabellingProject.key == key, LabellingProject.deleted.is_(None))
    )


def find(db: Database, key: str) -> LabellingProject | None:
    """The project of `key`, detached from its session (blocking)."""
    with db.session() as s:
        project = by_key(s, key)
        if project is not None:
            s.expunge(project)
        return project


def all_projects(session: Session) -> list[LabellingProject]:
    """Every project (detached: its container is looked after outside the session)."""
    found = list(session.scalars(select(LabellingProject).where(LabellingProject.deleted.is_(None))))
    for project in found:
        session.expunge(project)
    return found


def of_course(session: Session, course: str) -> list[LabellingProject]:
    return list(
        session.scalars(
            select(LabellingProject)
            .where(LabellingProject.course == course, LabellingProject.deleted.is_(None))
            .order_by(LabellingProject.id)
        )
    )


def labelling_dataset_version(session: Session, version_id: int) -> list[str]:
    """The projects that label a dataset version ("course/title"): its files are their tasks' images."""
    return [
        f"{p.course}/{p.title}"
        for p in session.scalars(
            select(LabellingProject).where(
                LabellingProject.dataset_version_id == version_id, LabellingProject.deleted.is_(None)
            )
        )
    ]


def _title(value) -> str:
    title = value.strip() if isinstance(value, str) else ""
    if not 3 <= len(title) <= 50 or any(ord(c) < 32 for c in title):
        raise UserError(400, "A labelling project's “title” has 3–50 characters, like “Pets: boxes”.")
    return title


def _reviewers(value, members: set[str]) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s]+", value) if v]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(400, '“reviewers” must be a list of the course\'s students, like ["ana", "bo"].')
    names = sorted({v.strip().lower() for v in value if v.strip()})
    outside = [n for n in names if n not in members]
    if outside:
        raise UserError(
            400,
            "Reviewers must be students of the course; {names} is not.",
            names=", ".join(outside),
        )
    return names


def create(db: Database, course: str, body: dict, caller: Caller, members: set[str], most: int) -> LabellingProject:
    """Check a request for a new project of `course` (by one who may set it up; `members`: its students;
    `most`: how many the course may have) and record it; the user's 400/403/409 otherwise (blocking). Its
    Label Studio is started by the caller."""
    if not isinstance(body, dict):
        raise UserError(400, "The request body must be a JSON object.")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise UserError(
            400,
            "Unknown field(s) {fields}: a labelling project takes title, dataset, labels (or config) and reviewers.",
            fields=", ".join(unknown),
        )
    title = _title(body.get("title"))
    config = config_of(body)
    reviewers = _reviewers(body.get("reviewers"), members)
    refs = datasets.parse_refs([body["dataset"]] if isinstance(body.get("dataset"), str) else body.get("dataset"))
    if len(refs) != 1:
        raise UserError(400, "Give the one dataset to label, like “prof/pets” or “prof/pets:2”.")
    with db.session() as s:
        (plan,) = datasets.resolve(s, refs, caller)
        existing = of_course(s, course)
        if len(existing) >= most:
            raise UserError(
                409,
                "The course {course} has {count} labelling projects, the most it may have.",
                course=course,
                count=len(existing),
            )
        if any(p.title == title for p in existing):
            raise UserError(
                409, "The course {course} has a labelling project “{title}” already.", course=course, title=title
            )
        project = LabellingProject(
            course=course,
            title=title,
            creator=caller.name,
            dataset=plan["ref"],
            dataset_version_id=plan["version_id"],
            dataset_key=plan["key"],
            config=config,
            reviewers=reviewers,
        )
        s.add(project)
        s.flush()
        s.expunge(project)
        return project


def listing(db: Database, course: str, caller: Caller, manages: bool) -> list[dict]:
    """The course's projects with the caller's role in each; the user's 404 for one who is not of it."""
    with db.session() as s:
        found = of_course(s, course)
        out = [p.as_dict(role_of(p, caller, manages)) for p in found]
    if not manages and course not in caller.groups:
        raise UserError(404, "There is no course “{course}” of yours.", course=course)
    return out


def set_message(db: Database, key: str, message: str | None) -> None:
    with db.session() as s:
        project = by_key(s, key)
        if project is not None:
            project.message = message
