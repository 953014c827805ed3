"""Telling a task's end (workspace/task_news.py): once, also across the culler's restarts. A real database;
the running workspace a notice goes to and its extension are stand-ins (the culler's own, in its tests)."""

from __future__ import annotations

import asyncio
import datetime as dt
from types import SimpleNamespace

from workspace import tasks
from workspace.db import move_clock
from workspace.executions import Execution, get_or_create_workspace, new_execution
from workspace.task_news import TaskNews


def ended_task(db, owner: str, name: str, code: int) -> int:
    with db.session() as s:
        ex = new_execution(s, get_or_create_workspace(s, owner, name), None, None)
        ex.kind, ex.command = "task", "exit 0"
        for state in ("preparing", "restoring", "running", "saving"):
            ex.to(s, state)
        ex.exit_code, ex.stop_reason = code, "completed"
        ex.to(s, "stopped")
        return ex.id


def announce(db, servers) -> list[tuple]:
    """One culler cycle of a culler just (re)started: the notices it showed."""
    shown = []

    async def show_notice(server, notice_id, message, withdrawn, **extra):
        shown.append((server.user, notice_id, extra["level"]))

    asyncio.run(TaskNews(lambda: db, []).announce(servers, show_notice))
    return shown


def test_an_end_is_told_once_even_when_it_came_while_the_culler_was_away(database):
    open_ws = SimpleNamespace(user="ada", task=False, execution_id=7)
    first = ended_task(database, "ada", "train", 0)  # ended before this culler's first look (it was away)
    assert announce(database, [open_ws]) == [("ada", f"task-{first}", "success")]
    assert announce(database, [open_ws]) == []  # another culler (a restart): told already
    second = ended_task(database, "ada", "eval", 3)
    other = ended_task(database, "bo", "sweep", 0)  # bo has no workspace open: told (webhook) but not shown
    assert announce(database, [open_ws]) == [("ada", f"task-{second}", "error")]
    with database.session() as s:
        assert all(s.get(Execution, i).news_told is not None for i in (first, second, other))


def test_an_end_older_than_a_day_is_not_told_any_more(database):
    ended_task(database, "ada", "old", 0)
    move_clock(tasks.NEWS_WITHIN + dt.timedelta(hours=1))
    try:
        assert tasks.untold_ends(database) == []
    finally:
        move_clock(-(tasks.NEWS_WITHIN + dt.timedelta(hours=1)))
    assert [t["workspace"] for t in tasks.untold_ends(database)] == ["old"]
