"""Which node each student of a course gets at a lecture, and what their start will restore there.

A pre-warm chooses, for every student whose next start restores a saved home, one node that takes
work, spread by load: each goes to the node with the least work for its size (the executions it holds
now and the students given to it so far, over its cores), ties to the first by name, so the same course
on the same nodes gets the same plan. The choice is recorded (`PrewarmedHome`, with the snapshot that
was brought): admission prefers the nodes that hold a start's snapshot (limits/queue.py `place`), and of
those the spawner names the recorded one first (`noted_node`), so each student's start goes where their
home is, and the class's burst spreads as planned. A record whose snapshot is not the one a start
restores (the student saved again since) is never used.

What a start restores is what `lifecycle.begin` would choose with the default choice ("latest"): the
workspace's newest saved output, else (a course's workspace never saved) the course's starter; nothing
(an empty home) for a workspace that does not exist yet or saved nothing and has no starter.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import DateTime, String, select
from sqlalchemy.orm import Mapped, mapped_column

from workspace import courses
from workspace.db import Base, Database, utcnow
from workspace.errors import UserError
from workspace.executions import UNFINISHED, Workspace, find_workspace, plan_continuation
from workspace.limits.resource_types import ResourceType
from workspace.store.nodes import Node


class PrewarmedHome(Base):
    """Where a course's pre-warm brought a student's home: the node their next start is placed on."""

    __tablename__ = "prewarmed_homes"

    owner: Mapped[str] = mapped_column(String(255), primary_key=True)
    workspace: Mapped[str] = mapped_column(String(255), primary_key=True)
    course: Mapped[str] = mapped_column(String(255))
    node: Mapped[str] = mapped_column(String(255))
    snapshot: Mapped[str] = mapped_column(String(64))  # the saved home brought there
    at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


@dataclass
class Home:
    """A student's home as a pre-warm sees it: what their next start restores, and the node chosen."""

    student: str
    workspace: str
    snapshot: str | None  # the saved home the next start restores (None: an empty home, nothing to bring)
    bytes: int | None = None  # its recorded size
    node: str | None = None
    running: bool = False  # the workspace runs now: its next start restores what its stop will save


@dataclass
class Plan:
    """A course's pre-warm, planned: its homes (each with its node), the nodes and the image to bring."""

    course: str
    workspace: str
    image: str | None  # the name the course starts with (None: the site's default)
    homes: list[Home]
    nodes: list[Node]  # those that may take its starts


def eligible(nodes: list[Node], rtype: ResourceType | None) -> list[Node]:
    """The nodes a start of the course's type may be placed on (Node.takes), and for a GPU type those with
    as many GPUs as one start takes."""
    gpus = rtype.gpus if rtype is not None else 0
    model = rtype.gpu_model if rtype is not None and gpus else None
    root = rtype is not None and rtype.root
    return [n for n in nodes if n.takes(model, root) and len(n.gpus) >= gpus]


def assign(homes: list[Home], nodes: list[Node], load: dict[str, int]) -> list[Home]:
    """Give each home with something to bring a node (in place; returned): in the students' order, the node
    with the least work per core, counting `load` ({node: executions it holds now}) and the homes given to
    it so far; ties to the first by name. Cores unknown on any node: each counts as one."""
    weights = {n.name: n.cpus for n in nodes} if all(n.cpus > 0 for n in nodes) else {n.name: 1.0 for n in nodes}
    given = {name: 0 for name in weights}
    for home in sorted(homes, key=lambda h: h.student):
        if home.snapshot is None or home.running or not given:
            continue
        home.node = min(given, key=lambda n: ((load.get(n, 0) + given[n] + 1) / weights[n], n))
        given[home.node] += 1
    return homes


def next_restore(session, ws: Workspace | None) -> tuple[str | None, int | None]:
    """(snapshot key, its bytes) of what the next start of `ws` restores by default; (None, None): an empty
    home (as lifecycle.begin decides with the choice "latest")."""
    if ws is None:
        return None, None  # its first start makes a workspace of no course: an empty home
    _, source = plan_continuation(session, ws, "latest")
    if source is None:
        source = courses.starter_for(session, ws)
    if source is None or not source.has_output:
        return None, None
    return source.snapshot.key, source.snapshot.bytes


def plan(
    db: Database, course: str, students: list[str], nodes_for: Callable[[str | None], list[Node]], load: dict[str, int]
) -> Plan:
    """The pre-warm of `course` for `students` over the nodes that may take its starts (`nodes_for(its
    resource type)`), with the nodes' `load` now (blocking); the user's 404 for a course never set up."""
    with db.session() as s:
        c = s.get(courses.Course, course)
        if c is None:
            raise UserError(
                404,
                "The course “{course}” is not set up yet: set its roster and workspace up first, then pre-warm it.",
                course=course,
            )
        homes = []
        for student in students:
            ws = find_workspace(s, student, c.workspace)
            key, size = next_restore(s, ws)
            running = ws is not None and ws.latest is not None and ws.latest.state in UNFINISHED
            homes.append(Home(student, c.workspace, key, size, running=running))
        workspace, image, rtype = c.workspace, c.image, c.resource_type
    nodes = nodes_for(rtype)
    return Plan(course, workspace, image, assign(homes, nodes, load), nodes)


def record(db: Database, course: str, home: Home) -> None:
    """Note that `home`'s snapshot is now on its node (blocking): its owner's next start goes there."""
    with db.session() as s:
        note = s.get(PrewarmedHome, (home.student, home.workspace)) or PrewarmedHome(
            owner=home.student, workspace=home.workspace
        )
        note.course, note.node, note.snapshot, note.at = course, home.node, home.snapshot, utcnow()
        s.add(note)


def noted_node(db: Database, owner: str, workspace: str, snapshot: str | None) -> str | None:
    """The node a pre-warm brought `snapshot` of owner/workspace to (None: none did, or it brought another
    snapshot, since saved over) (blocking)."""
    if not snapshot:
        return None
    with db.session() as s:
        return s.scalar(
            select(PrewarmedHome.node).where(
                PrewarmedHome.owner == owner,
                PrewarmedHome.workspace == workspace,
                PrewarmedHome.snapshot == snapshot,
            )
        )
