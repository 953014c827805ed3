"""A course: a JupyterHub group whose members are students, read (never changed) by its instructors.

Who teaches what is JupyterHub RBAC (the custom scope `custom:workspaces:read!group=COURSE`, made from
WORKSPACE_COURSES in jupyterhub_config.py); the members come from the hub. This module turns those members
into what an instructor looks at: each student's workspaces with their latest execution, what runs now,
and their storage as last measured.
"""

from __future__ import annotations

from sqlalchemy import select

from .db import Database, iso
from .executions import UNFINISHED, Workspace
from .quotas import StorageUsage


def overview(db: Database, courses: dict[str, list[str]]) -> list[dict]:
    """[{name, running, students: [{name, workspaces, last_start, running, storage}]}] for
    {course: [member, ...]} (blocking)."""
    students = sorted({name for members in courses.values() for name in members})
    found = {n: {"name": n, "workspaces": [], "last_start": None, "running": 0, "storage": None} for n in students}
    with db.session() as s:
        for ws in s.scalars(select(Workspace).where(Workspace.owner.in_(students)).order_by(Workspace.name)):
            student = found[ws.owner]
            latest = max(ws.executions, key=lambda e: e.number, default=None)
            student["workspaces"].append({
                "name": ws.name,
                "state": latest.state if latest else "new",
                "number": latest.number if latest else None,
                "stop_reason": latest.stop_reason if latest else None,
            })
            if latest is not None:
                started = iso(latest.started)
                student["last_start"] = max(filter(None, (student["last_start"], started)), default=None)
                student["running"] += latest.state in UNFINISHED
        # the last measurement (taken when the student's storage changed and was looked at): a course of
        # hundreds is not walked for one page
        for u in s.scalars(select(StorageUsage).where(StorageUsage.owner.in_(students))):
            found[u.owner]["storage"] = {"bytes": u.bytes, "files": u.files, "measured_at": iso(u.measured_at)}
    return [{"name": course, "running": sum(found[n]["running"] for n in members),
             "students": [found[n] for n in members]} for course, members in courses.items()]
