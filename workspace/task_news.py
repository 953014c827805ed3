"""Telling owners that their tasks ended (#17): a notice in each of their running workspaces, and a call
of their webhook, if they set one (workspace/webhooks.py).

What ended is read from the records (`tasks.untold_ends`) and marked told there: told once, also
across the culler's restarts (before, what ended while the culler started again was never told). The
culler's loop drives it: once a cycle it hands over the running workspaces it found (the hub's list,
with their executions) and its way of showing a notice in one (the workspace's extension, reached with
the execution's own report key), both of which it has for its own warnings. The news itself (what is
told, to whom) is this module's.
"""

from __future__ import annotations

import asyncio
import logging

from workspace import tasks, webhooks

log = logging.getLogger("workspace.culler")  # the culler's process tells it: its log says it

# what a task's webhook call says (tasks.untold_ends' fields)
TASK_FIELDS = ("owner", "workspace", "number", "exit_code", "stop_reason", "stopped_at", "message")


class TaskNews:
    """The tasks that ended, told to their owners' workspaces and webhooks."""

    def __init__(self, db, networks: list):
        self.db = db  # () -> the workspace database (made on first use, as the culler's)
        self.networks = networks  # the hub's networks a webhook may reach after all (webhooks.networks)
        self._calls: set = set()  # webhook calls under way (kept, so that they are not collected)

    async def announce(self, servers: list, show_notice) -> None:
        """Tell each owner's running workspaces (`servers`, the culler's) of their tasks that ended and
        were not told yet (#17), by `show_notice(server, notice_id, message, withdrawn, **extra)`; and their
        webhooks. Each end is marked told first: told once (a crash mid-way loses a notice, never repeats one)."""
        loop = asyncio.get_running_loop()
        try:
            ended = await loop.run_in_executor(None, tasks.untold_ends, self.db())
            if ended:
                await loop.run_in_executor(None, tasks.mark_told, self.db(), [t["execution_id"] for t in ended])
        except Exception as e:
            log.warning("could not read the tasks that ended: %s", e)
            return
        if not ended:
            return
        shows = [
            show_notice(
                server, f"task-{t['execution_id']}", t["message"], "", level="success" if t["success"] else "error"
            )
            for t in ended
            for server in servers
            if server.user == t["owner"] and not server.task and server.execution_id is not None
        ]
        # webhooks are strangers' servers: called beside the cycle, so a slow one never delays culling
        call = asyncio.ensure_future(self.call_webhooks(ended))
        self._calls.add(call)
        call.add_done_callback(self._calls.discard)
        await asyncio.gather(*shows, return_exceptions=True)

    async def call_webhooks(self, ended: list[dict]) -> None:
        """POST each ended task to its owner's webhook, if they set one (workspace/webhooks.py)."""
        loop, db = asyncio.get_running_loop(), self.db()
        hooks = await loop.run_in_executor(None, webhooks.of_owners, db, {t["owner"] for t in ended})
        for t in ended:
            if t["owner"] not in hooks:
                continue
            url, secret = hooks[t["owner"]]
            payload = {"event": "task.ended", **{k: t[k] for k in TASK_FIELDS}}
            result = await webhooks.deliver(url, secret, payload, self.networks)
            log.info("%s: the webhook for task %s #%s: %s", t["owner"], t["workspace"], t["number"], result)
            await loop.run_in_executor(None, webhooks.record, db, t["owner"], result)
