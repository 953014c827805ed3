"""A sweep's outputs as one archive (#31): each run's saved home under `TOP/runs/NN_name=value_…/`, then
`TOP/runs.csv` and `TOP/sweep.json` saying, per run, its parameters, how it ended and what was taken
(or why nothing was: it failed before its save, it is still running, its output was deleted).

The trees are read as a course's collection reads its students' (saved.collect_one): through
store.paths, never following a link out of the output, links and pipes left out and counted.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable

from workspace import i18n, sweeps
from workspace.db import Database
from workspace.executions import ACTIVE, Execution
from workspace.outputs.saved import Collected, collect_one, tree_of

FIELDS = ("run", "params", "execution", "state", "exit_code", "status", "files", "bytes", "links", "reason")
_ODD = re.compile(r"[^A-Za-z0-9._=+-]")


def folder(view: sweeps.RunView) -> str:
    """`03_lr=0.1_seed=1`: a run's folder, from its index and parameters (odd characters as `_`)."""
    name = f"{view.index:02d}_" + "_".join(f"{k}={v}" for k, v in view.params.items())
    return _ODD.sub("_", name)[:120]


def collect(db: Database, store, node_stores, owner: str, name: str, number: int, record=None, locale: str = "en"):
    """(the sweep, [(its run, what to take of its output)]): the user's 404 when there is no such sweep
    (blocking)."""
    sweep, runs = sweeps.summary(db, owner, name, number)
    items = []
    with db.session() as s:
        for view in runs:
            item = Collected(folder(view), name, view.number)
            ex = s.get(Execution, view.execution_id) if view.execution_id else None
            if ex is None or ex.snapshot is None or ex.snapshot.deleted is not None:
                item.reason = _why_none(view, ex, locale)
            else:
                item.saved_at = ex.snapshot.created.isoformat()
                item.root = tree_of(store, node_stores, ex.snapshot, record)
                if item.root is None:
                    item.reason = i18n.translate(locale, "its output is still being copied to the central store")
            items.append((view, item))
    return sweep, items


def _why_none(view: sweeps.RunView, ex: Execution | None, locale: str) -> str:
    if ex is not None and ex.snapshot is not None:
        return i18n.translate(locale, "its output was deleted")
    if view.state in ("refused", "cancelled", "starting", *ACTIVE):
        return i18n.translate(locale, "it has no saved output ({state})", state=view.state)
    return i18n.translate(locale, "it ended before its home was saved")


def write(w, sweep: dict, items: list, top: str, check: Callable[[], None] | None = None, locale: str = "en") -> None:
    """Write each run's output into the archive writer `w`, then the manifests (blocking)."""
    for _view, item in items:
        if item.root is not None:
            collect_one(w, item, b"", f"{top}/runs/{item.student}", check, locale)
    rows = [
        {
            "run": view.index,
            "params": sweeps.label(view.params),
            "execution": view.number,
            "state": view.state,
            "exit_code": view.exit_code,
            "status": item.status,
            "files": item.files,
            "bytes": item.bytes,
            "links": item.links,
            "reason": item.reason,
        }
        for view, item in items
    ]
    text = io.StringIO()
    out = csv.DictWriter(text, fieldnames=FIELDS, lineterminator="\n")
    out.writeheader()
    out.writerows(rows)
    w.data(f"{top}/runs.csv", text.getvalue().encode())
    w.data(f"{top}/sweep.json", json.dumps({**sweep, "runs": rows}, indent=2).encode())
