"""Accounting: CPU-hours and GPU-hours per execution and per user, from the records.

An execution's **run time** is from the moment its container ran (`started`)
to the moment it stopped running (the first transition after `running`: to
saving or failed), or now while it runs. From it:

- `cpu_hours`: the cores it was given (its resource type's) × run time, in
  hours; an execution without a CPU limit is charged what it used.
- `cpu_used_hours`: what it used, from the usage samples (one a minute, each
  the average since the one before).
- `gpu_hours`: the GPUs it held × run time.

A report may be limited to a period (`since`, `until`): an execution that
overlaps its edges counts only the part inside.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from sqlalchemy import select

from workspace.db import iso, utcnow
from workspace.errors import UserError
from workspace.executions import Execution, UsageSample, Workspace


def run_period(ex: Execution, now: dt.datetime) -> tuple[dt.datetime, dt.datetime] | None:
    """(start, end) of the time the execution's container ran; None if it never ran."""
    if ex.started is None:
        return None
    end = None
    after = False
    for t in ex.transitions:
        if t.state == "running":
            after = True
        elif after and t.state in ("saving", "failed", "stopped"):
            end = t.at
            break
    if end is None:
        end = ex.stopped if ex.state in ("stopped", "failed") and ex.stopped else now
    return ex.started, max(ex.started, end)


def _overlap(a: dt.datetime, b: dt.datetime, since: dt.datetime | None, until: dt.datetime | None) -> float:
    lo = max(a, since) if since else a
    hi = min(b, until) if until else b
    return max(0.0, (hi - lo).total_seconds())


def cpu_used_seconds(samples: list[UsageSample], started: dt.datetime, since=None, until=None) -> float:
    """Core-seconds used, from samples (each the average CPU % since the previous one)."""
    used, previous = 0.0, started
    for sample in samples:
        if sample.cpu_percent is not None:
            used += sample.cpu_percent / 100 * _overlap(previous, sample.at, since, until)
        previous = sample.at
    return used


def of_execution(ex: Execution, samples: list[UsageSample], now: dt.datetime, since=None, until=None) -> dict:
    period = run_period(ex, now)
    seconds = _overlap(*period, since, until) if period else 0.0
    used = cpu_used_seconds(samples, period[0], since, until) if period else 0.0
    gpus = len(ex.gpu_ids or [])
    return {
        "workspace": ex.workspace.name,
        "owner": ex.workspace.owner,
        "number": ex.number,
        "state": ex.state,
        "resource_type": ex.resource_type,
        "started": iso(period[0]) if period else None,
        "ended": iso(period[1]) if period and ex.state not in ("running",) else None,
        "runtime_s": round(seconds, 1),
        "cpu_cores": ex.cpu,
        "cpu_hours": round((ex.cpu * seconds if ex.cpu else used) / 3600, 4),
        "cpu_used_hours": round(used / 3600, 4),
        "gpus": gpus,
        "gpu_hours": round(gpus * seconds / 3600, 4),
    }


def parse_time(value: str | None, what: str) -> dt.datetime | None:
    """An ISO 8601 time or date from a query (UTC when no zone is given); the user's 400 otherwise."""
    if not value:
        return None
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            400,
            "“{field}” must be a date or time like 2026-12-01 or 2026-12-01T08:00:00Z, not {value!r}.",
            field=what,
            value=value,
        )
    if t.tzinfo is not None:
        t = t.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return t


def report(session, owners: list[str] | None, since=None, until=None) -> dict:
    """Per execution and per user totals; `owners` None: everyone."""
    if since and until and until <= since:
        raise UserError(400, "“until” must be later than “since”.")
    now = utcnow()
    q = (
        select(Execution)
        .join(Workspace, Execution.workspace_id == Workspace.id)
        .where(Execution.started.is_not(None))
        .order_by(Workspace.owner, Workspace.name, Execution.number)
    )
    if owners is not None:
        q = q.where(Workspace.owner.in_(owners))
    if until:
        q = q.where(Execution.started < until)
    executions = list(session.scalars(q))
    samples = defaultdict(list)
    if executions:
        for sample in session.scalars(
            select(UsageSample).where(UsageSample.execution_id.in_([e.id for e in executions])).order_by(UsageSample.at)
        ):
            samples[sample.execution_id].append(sample)
    rows = [of_execution(ex, samples[ex.id], now, since, until) for ex in executions]
    rows = [r for r in rows if r["runtime_s"] > 0 or not (since or until)]
    users: dict[str, dict] = {}
    for r in rows:
        u = users.setdefault(
            r["owner"],
            {
                "user": r["owner"],
                "executions": 0,
                "runtime_s": 0.0,
                "cpu_hours": 0.0,
                "cpu_used_hours": 0.0,
                "gpu_hours": 0.0,
            },
        )
        u["executions"] += 1
        for k in ("runtime_s", "cpu_hours", "cpu_used_hours", "gpu_hours"):
            u[k] = round(u[k] + r[k], 4)
    return {"since": iso(since), "until": iso(until), "users": list(users.values()), "executions": rows}
