"""Deleting outputs: one on request, or the old ones of every workspace at once.

An output (an execution's snapshot) is what later executions continue from.
Deleting one is refused while something still depends on it: an execution
restored from it that has not finished saving (its save shares the unchanged
files with it). Executions that continued from a deleted output are not
affected (their own outputs are complete trees); a later "continue from" it
restores its nearest earlier output instead, and says so.

The record is marked first, so nothing restores from an output being
removed; then its files go.
"""

from __future__ import annotations

from sqlalchemy import select

from . import courses
from .db import Database, utcnow
from .errors import UserError
from .executions import UNFINISHED, Execution, Workspace, execution_by_number, find_workspace


def dependants(session, ex: Execution) -> list[Execution]:
    """The unfinished executions restored from `ex`: their save still needs its output."""
    return list(
        session.scalars(select(Execution).where(Execution.restored_from_id == ex.id, Execution.state.in_(UNFINISHED)))
    )


def _why_not(session, ex: Execution) -> str | None:
    users = dependants(session, ex)
    if users:
        names = ", ".join(
            f"#{u.number} ({u.state})"
            if u.workspace_id == ex.workspace_id
            else f"{u.workspace.owner}'s #{u.number} ({u.state})"
            for u in users
        )
        return (
            f"execution {names} continues from it and has not finished saving; stop it (and let its save finish) first"
        )
    taught = courses.starter_of_courses(session, ex)
    if taught:
        return (
            f"it is the starter of the course {', '.join(taught)}, which students' first starts restore; "
            "set another starter first"
        )
    return None


def delete_output(db: Database, store, owner: str, name: str, number: int) -> dict:
    """Delete the output of execution `number` of a workspace; the user's 404/409 otherwise (blocking)."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        ex = execution_by_number(s, ws, number) if ws is not None else None
        if ex is None:
            raise UserError(404, f"Workspace “{name}” has no execution #{number}.")
        if not ex.has_output:
            raise UserError(409, f"Execution #{number} of “{name}” has no saved output to delete.")
        why = _why_not(s, ex)
        if why:
            raise UserError(409, f"The output of #{number} cannot be deleted: {why}.")
        snap = ex.snapshot
        snap.deleted = utcnow()
        key, size, files = snap.key, snap.bytes, snap.files
    store.delete(key)
    return {"workspace": name, "number": number, "bytes": size, "files": files}


def old_outputs(session, owner: str, keep: int) -> list[tuple[Execution, str | None]]:
    """Every output of the user's workspaces but the newest `keep` of each, with why it must stay (or None)."""
    out = []
    for ws in session.scalars(select(Workspace).where(Workspace.owner == owner).order_by(Workspace.name)):
        with_output = [e for e in sorted(ws.executions, key=lambda e: e.number, reverse=True) if e.has_output]
        for ex in with_output[keep:]:
            out.append((ex, _why_not(session, ex)))
    return out


def cleanup(db: Database, store, owner: str, keep: int = 1) -> dict:
    """Delete the old outputs of every workspace of the user, keeping the newest `keep` of each (blocking)."""
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise UserError(400, "“keep” must be a whole number of outputs to keep per workspace, at least 1.")
    with db.session() as s:
        plan = [(ex.workspace.name, ex.number, why) for ex, why in old_outputs(s, owner, keep)]
    deleted, kept = [], []
    for name, number, why in plan:
        if why:
            kept.append({"workspace": name, "number": number, "reason": why})
            continue
        try:
            deleted.append(delete_output(db, store, owner, name, number))
        except UserError as e:  # it changed meanwhile (a new start continues from it)
            kept.append({"workspace": name, "number": number, "reason": e.jupyterhub_message})
    return {"deleted": deleted, "kept": kept}
