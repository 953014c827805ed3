"""Outputs (executions' saved homes): where one is to be read, deleting one or the old ones of every
workspace at once, and collecting a course's work.

Reading an output's files (listing, download, previews) is workspace/outputs/files.py, its archives
workspace/outputs/archives.py; here is which tree that is (`locate`): the store of record's copy (the central
store), or on a swarm whose nodes' stores are mounted here, the node's own while the copy is on its way.

An output (an execution's snapshot) is what later executions continue from.
Deleting one is refused while something still depends on it: an execution
restored from it that has not finished saving (its save shares the unchanged
files with it). Executions that continued from a deleted output are not
affected (their own outputs are complete trees); a later "continue from" it
restores its nearest earlier output instead, and says so.

The record is marked first, so nothing restores from an output being
removed; then its files go.

Collecting (`collection`, `write_collection`): an instructor's one archive of what each enrolled
student saved at a path of the course's workspace, the latest output (or the latest saved before a
deadline), with a manifest that says for every student what was taken or why nothing was.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sqlalchemy import select

from workspace import courses, i18n
from workspace.db import Database, iso, utcnow
from workspace.deployments import deployment
from workspace.errors import UserError
from workspace.executions import UNFINISHED, Execution, Snapshot, Workspace, execution_by_number, find_workspace
from workspace.outputs import archives
from workspace.store import paths
from workspace.store.homes import HomeStore

log = logging.getLogger("workspace.outputs")


def dependants(session, ex: Execution) -> list[Execution]:
    """The unfinished executions restored from `ex`: their save still needs its output."""
    return list(
        session.scalars(select(Execution).where(Execution.restored_from_id == ex.id, Execution.state.in_(UNFINISHED)))
    )


def _blocker(session, ex: Execution, locale: str = i18n.DEFAULT) -> tuple[str, str] | None:
    """Why the output of `ex` must stay, as (kind, what): ("saving", the executions that continue from it
    and have not finished saving), ("starter", the courses it is the starter of) or ("served", the deployments
    that serve it, #33); None: it may go."""
    users = dependants(session, ex)
    if users:
        return "saving", ", ".join(
            i18n.translate(locale, "#{number} ({state})", number=u.number, state=u.state)
            if u.workspace_id == ex.workspace_id
            else i18n.translate(
                locale, "{owner}'s #{number} ({state})", owner=u.workspace.owner, number=u.number, state=u.state
            )
            for u in users
        )
    taught = courses.starter_of_courses(session, ex)
    if taught:
        return "starter", ", ".join(taught)
    served = deployment.serving_output(session, ex.id)
    if served:
        return "served", ", ".join(served)
    return None


def _why_not(session, ex: Execution, locale: str = i18n.DEFAULT) -> str | None:
    """Why the output of `ex` must stay, in `locale`; None: it may go."""
    blocker = _blocker(session, ex, locale)
    if blocker is None:
        return None
    kind, what = blocker
    if kind == "saving":
        return i18n.translate(
            locale,
            "execution {executions} continues from it and has not finished saving; stop it (and let its save "
            "finish) first",
            executions=what,
        )
    if kind == "served":
        return i18n.translate(
            locale,
            "the deployment {deployments} serves it; give the deployment a new version or delete it first",
            deployments=what,
        )
    return i18n.translate(
        locale,
        "it is the starter of the course {courses}, which students' first starts restore; set another starter first",
        courses=what,
    )


def delete_output(db: Database, store, owner: str, name: str, number: int) -> dict:
    """Delete the output of execution `number` of a workspace; the user's 404/409 otherwise (blocking)."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        ex = execution_by_number(s, ws, number) if ws is not None else None
        if ex is None:
            raise UserError(404, "Workspace “{name}” has no execution #{number}.", name=name, number=number)
        if not ex.has_output:
            raise UserError(
                409, "Execution #{number} of “{name}” has no saved output to delete.", number=number, name=name
            )
        blocker = _blocker(s, ex)
        if blocker is not None and blocker[0] == "saving":
            raise UserError(
                409,
                "The output of #{number} cannot be deleted: execution {executions} continues from it and has not "
                "finished saving; stop it (and let its save finish) first.",
                number=number,
                executions=blocker[1],
            )
        if blocker is not None and blocker[0] == "served":
            raise UserError(
                409,
                "The output of #{number} cannot be deleted: the deployment {deployments} serves it; give the "
                "deployment a new version or delete it first.",
                number=number,
                deployments=blocker[1],
            )
        if blocker is not None:
            raise UserError(
                409,
                "The output of #{number} cannot be deleted: it is the starter of the course {courses}, which "
                "students' first starts restore; set another starter first.",
                number=number,
                courses=blocker[1],
            )
        snap = ex.snapshot
        snap.deleted = utcnow()
        key, size, files = snap.key, snap.bytes, snap.files
    store.delete(key)
    return {"workspace": name, "number": number, "bytes": size, "files": files}


def old_outputs(session, owner: str, keep: int, locale: str = i18n.DEFAULT) -> list[tuple[Execution, str | None]]:
    """Every output of the user's workspaces but the newest `keep` of each, with why it must stay (or None),
    in `locale`."""
    out = []
    for ws in session.scalars(select(Workspace).where(Workspace.owner == owner).order_by(Workspace.name)):
        with_output = [e for e in sorted(ws.executions, key=lambda e: e.number, reverse=True) if e.has_output]
        for ex in with_output[keep:]:
            out.append((ex, _why_not(session, ex, locale)))
    return out


def cleanup(db: Database, store, owner: str, keep: int = 1, locale: str = i18n.DEFAULT) -> dict:
    """Delete the old outputs of every workspace of the user, keeping the newest `keep` of each (blocking);
    why one was kept is said in `locale`."""
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise UserError(400, "“keep” must be a whole number of outputs to keep per workspace, at least 1.")
    with db.session() as s:
        plan = [(ex.workspace.name, ex.number, why) for ex, why in old_outputs(s, owner, keep, locale)]
    deleted, kept = [], []
    for name, number, why in plan:
        if why:
            kept.append({"workspace": name, "number": number, "reason": why})
            continue
        try:
            deleted.append(delete_output(db, store, owner, name, number))
        except UserError as e:  # it changed meanwhile (a new start continues from it)
            kept.append({"workspace": name, "number": number, "reason": e.in_locale(locale)})
    return {"deleted": deleted, "kept": kept}


# -- where an output is read ------------------------------------------------------------------------


def tree_of(store, node_stores, snap: Snapshot, record=None) -> Path | None:
    """The directory of a saved output on this machine, or None: the central store's (where every output
    is, or arrives after its save on a swarm), the store of record's (`record_store_root`, where a swarm
    with one sends them instead), else its node's store where that is mounted here."""
    for whole in (store, record):
        if whole is not None and whole.has_snapshot(snap.key):
            return whole.snapshot_path(snap.key)
    if node_stores is not None and snap.node:
        own = node_stores.of(snap.node)
        # a store agent's node is another machine: its files are not here to read
        if own is not store and isinstance(own, HomeStore) and own.has_snapshot(snap.key):
            return own.snapshot_path(snap.key)
    return None


@dataclass
class Located:
    """A saved output to read: its tree's directory, and what to call it."""

    root: Path
    workspace: str
    number: int
    saved: str | None
    label: str  # “thesis-3”: the top directory of an archive of all of it


def _output_of(session, ex: Execution, name: str, number: int) -> Snapshot:
    """The execution's snapshot, or the user's 4xx saying why it has none to read."""
    if ex.snapshot is not None and ex.snapshot.deleted is not None:
        raise UserError(
            410,
            "The output of “{name}” #{number} was deleted on {date}.",
            name=name,
            number=number,
            date=iso(ex.snapshot.deleted)[:10],
        )
    if ex.snapshot is None:
        if ex.state in UNFINISHED:
            raise UserError(
                409,
                "“{name}” #{number} is {state}: its output exists once its home is saved.",
                name=name,
                number=number,
                state=ex.state.replace("_", " "),
            )
        raise UserError(
            404,
            "“{name}” #{number} has no saved output (it ended before its home was saved).",
            name=name,
            number=number,
        )
    return ex.snapshot


def locate(db: Database, store, node_stores, owner: str, name: str, number: int, record=None) -> Located:
    """The saved output of execution `number` of the owner's workspace; the user's 404, 409 or 410
    otherwise (blocking)."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        ex = execution_by_number(s, ws, number) if ws is not None else None
        if ex is None:
            if ws is None:
                raise UserError(404, "There is no workspace “{name}”.", name=name)
            raise UserError(404, "Workspace “{name}” has no execution #{number}.", name=name, number=number)
        snap = _output_of(s, ex, name, number)
        root = tree_of(store, node_stores, snap, record)
        if root is None and snap.node:
            raise UserError(
                409,
                "The output of “{name}” #{number} is still being copied from {node} to the "
                "central store; please try again in a minute.",
                name=name,
                number=number,
                node=snap.node,
            )
        if root is None:
            raise UserError(
                409,
                "The output of “{name}” #{number} is still being copied from its node to the "
                "central store; please try again in a minute.",
                name=name,
                number=number,
            )
        return Located(root, name, number, iso(snap.created), f"{name}-{number}")


# -- collecting a course's work ------------------------------------------------------------------------


@dataclass
class Collected:
    """One student's line of a collection's manifest: what was taken, or why nothing was."""

    student: str
    workspace: str
    execution: int | None = None
    saved_at: str | None = None
    path: str = ""
    files: int = 0
    bytes: int = 0
    links: int = 0
    status: str = "missing"  # collected | missing (no output, or not the path) | skipped (no student) | error
    reason: str = ""
    root: Path | None = field(default=None, repr=False)

    def row(self) -> dict:
        row = asdict(self)
        row.pop("root")
        return row


MANIFEST_FIELDS = (
    "student",
    "workspace",
    "execution",
    "saved_at",
    "path",
    "files",
    "bytes",
    "links",
    "status",
    "reason",
)


def course_workspace(db: Database, course: str) -> str:
    """The workspace a course's students work in: its set-up's, or the course's name (blocking)."""
    with db.session() as s:
        c = s.get(courses.Course, course)
        return c.workspace if c is not None else course


def collection(
    db: Database,
    store,
    node_stores,
    students: list[str],
    workspace: str,
    before: dt.datetime | None,
    not_collected: dict[str, str] | None = None,
    record=None,
    locale: str = i18n.DEFAULT,
) -> list[Collected]:
    """For each of `students` (a course's enrolled students, nobody else), their latest saved output of
    `workspace` (saved at or before `before`, when given), or why there is none (in `locale`);
    `not_collected`: members left out, with why (blocking)."""
    out = []
    not_collected = not_collected or {}
    with db.session() as s:
        for student in sorted(set(students) | set(not_collected)):
            item = Collected(student, workspace)
            out.append(item)
            if student in not_collected:
                item.status, item.reason = "skipped", not_collected[student]
                continue
            ws = find_workspace(s, student, workspace)
            if ws is None:
                item.reason = i18n.translate(locale, "has no workspace “{workspace}”", workspace=workspace)
                continue
            saved = [e for e in ws.executions if e.has_output and (before is None or e.snapshot.created <= before)]
            if not saved:
                started = any(e.has_output for e in ws.executions)
                item.reason = (
                    i18n.translate(
                        locale,
                        "saved nothing of “{workspace}” before {before}",
                        workspace=workspace,
                        before=iso(before),
                    )
                    if before is not None and started
                    else i18n.translate(locale, "has no saved output of “{workspace}” yet", workspace=workspace)
                )
                continue
            ex = max(saved, key=lambda e: e.snapshot.created)
            item.execution, item.saved_at = ex.number, iso(ex.snapshot.created)
            item.root = tree_of(store, node_stores, ex.snapshot, record)
            if item.root is None:
                item.reason = i18n.translate(
                    locale, "its output #{number} is still being copied to the central store", number=ex.number
                )
    return out


def write_collection(
    w,
    items: list[Collected],
    rel: bytes,
    top: str,
    check: Callable[[], None] | None = None,
    locale: str = i18n.DEFAULT,
) -> list[Collected]:
    """Write each collected student's `rel` into the archive writer `w` under `TOP/students/NAME/`, then
    `TOP/manifest.csv` and `TOP/manifest.json` (what each got, or why not, in `locale`); the items,
    completed (blocking: it reads the outputs)."""
    shown = rel.decode("utf-8", "replace")
    for item in items:
        item.path = shown
        if item.root is None:
            continue
        folder = item.student.replace("/", "_").replace("\\", "_")
        folder = f"_{folder}" if folder in (".", "..") else folder
        name = f"{top}/students/{folder}" + (f"/{os.fsdecode(rel)}" if rel else "")
        collect_one(w, item, rel, name, check, locale)
    _write_manifest(w, items, top)
    return items


def collect_one(w, item: Collected, rel: bytes, name: str, check: Callable[[], None] | None, locale: str) -> None:
    """Write one student's `rel` into `w` as `name`; `item` says what was collected, or why not."""
    try:
        with paths.Tree(item.root) as tree:
            reason = _not_collectable(tree, rel, item, locale)
            if reason is not None:
                item.reason = reason
                return
            got = archives.add_tree(w, tree, rel, name, check)
    except archives.Cancelled:
        raise
    except (OSError, paths.Escape) as e:
        log.warning("collecting %s's %s #%s: %s", item.student, item.workspace, item.execution, e)
        item.status = "error"
        item.reason = i18n.translate(locale, "its output could not be read whole; what was read is in the archive")
        return
    item.status, item.files, item.bytes, item.links = "collected", got.files, got.bytes, got.links
    if len(got.skipped) == 1:
        item.reason = i18n.translate(locale, "{count} entry left out (links, pipes)", count=1)
    elif got.skipped:
        item.reason = i18n.translate(locale, "{count} entries left out (links, pipes)", count=len(got.skipped))


def _not_collectable(tree: paths.Tree, rel: bytes, item: Collected, locale: str) -> str | None:
    """Why `rel` of this output is not collected (through a link, missing, neither file nor directory);
    None: it is."""
    shown = item.path
    try:
        st = tree.lstat(rel)
    except paths.Escape:
        return i18n.translate(locale, "“{path}” leads through a link in the output; links are not followed", path=shown)
    except (FileNotFoundError, NotADirectoryError):
        return i18n.translate(locale, "there is no “{path}” in output #{number}", path=shown, number=item.execution)
    if archives.kind_of(st) not in ("file", "dir"):
        return i18n.translate(
            locale,
            "“{path}” is a {kind} in output #{number}, not collected",
            path=shown,
            kind=archives.kind_of(st),
            number=item.execution,
        )
    return None


def _write_manifest(w, items: list[Collected], top: str) -> None:
    """`TOP/manifest.csv` and `TOP/manifest.json`: a row per student."""
    rows = [item.row() for item in items]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=MANIFEST_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    w.data(f"{top}/manifest.csv", text.getvalue().encode())
    w.data(f"{top}/manifest.json", json.dumps(rows, indent=2).encode())
