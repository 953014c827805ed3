"""The platform's activity over time: how many executions ran and how many waited in the queue, at evenly
spaced moments of the last hours (the admin page's chart; GET /api/activity).

Read from what the executions recorded: an execution waits from its creation until its first
transition out of "queued" (admission; or its end, if it never got a place) and runs from `started` until
`stopped` (or now). A moment counts what was so at that instant, as a sample would have seen it.
"""

from __future__ import annotations

import datetime as dt
import math

from sqlalchemy import func, or_, select

from workspace.db import Database, iso, utcnow
from workspace.errors import UserError
from workspace.executions import Execution, Transition

MAX_HOURS = 24 * 14
# at most this many moments in a series: a chart has no use for more, and it bounds the work
MAX_POINTS = 1000


def window(hours_text: str | None, step_text: str | None) -> tuple[float, int]:
    """(hours, step in seconds) from a request's ?hours= and ?step= (defaults: the last day, every 5 min)."""
    try:
        hours = float(hours_text) if hours_text not in (None, "") else 24.0
        step = int(step_text) if step_text not in (None, "") else 300
    except ValueError:
        raise UserError(400, "“hours” and “step” must be numbers, like ?hours=24&step=300.") from None
    if not (math.isfinite(hours) and 0 < hours <= MAX_HOURS):
        raise UserError(400, "“hours” must be more than 0 and at most {most}.", most=MAX_HOURS)
    if step < 10:
        raise UserError(400, "“step” must be at least 10 seconds.")
    if hours * 3600 / step > MAX_POINTS:
        raise UserError(
            400,
            "{hours} hours in steps of {step} s are more than {most} moments; choose a larger “step”.",
            hours=f"{hours:g}",
            step=step,
            most=MAX_POINTS,
        )
    return hours, step


def series(db: Database, hours: float = 24.0, step: int = 300, now: dt.datetime | None = None) -> dict:
    """{"at": [ISO moments, oldest first, the last one now], "running": [...], "queued": [...]} (blocking)."""
    now = now or utcnow()
    n = int(hours * 3600 // step)
    start = now - dt.timedelta(seconds=n * step)
    with db.session() as s:
        rows = s.execute(
            select(Execution.id, Execution.created, Execution.started, Execution.stopped).where(
                Execution.created <= now, or_(Execution.stopped.is_(None), Execution.stopped >= start)
            )
        ).all()
        ids = [r.id for r in rows]
        admitted = {}
        for chunk in range(0, len(ids), 500):
            admitted.update(
                s.execute(
                    select(Transition.execution_id, func.min(Transition.at))
                    .where(Transition.execution_id.in_(ids[chunk : chunk + 500]), Transition.state != "queued")
                    .group_by(Transition.execution_id)
                ).all()
            )

    def index(moment: dt.datetime) -> int:
        """The first moment at or after `moment` (0 .. n+1)."""
        return min(n + 1, max(0, math.ceil((moment - start).total_seconds() / step)))

    running, queued = [0] * (n + 2), [0] * (n + 2)
    for r in rows:
        end = r.stopped or now + dt.timedelta(seconds=step)  # still so now: counted at the last moment
        waited_until = admitted.get(r.id) or end
        for counts, since, until in ((queued, r.created, waited_until), (running, r.started, end)):
            if since is None or until <= since:
                continue
            counts[index(since)] += 1
            counts[index(until)] -= 1
    out = {"at": [], "running": [], "queued": [], "step": step}
    run = wait = 0
    for k in range(n + 1):
        run, wait = run + running[k], wait + queued[k]
        out["at"].append(iso(start + dt.timedelta(seconds=k * step)))
        out["running"].append(run)
        out["queued"].append(wait)
    return out
