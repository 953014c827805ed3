"""A start's start-up: from its turn to its server answering, within the site's bounds.

A node brings up only so many workspaces at once (`startup_slots`, by default
four a core): each start-up holds a slot of its node from its admission until it
is ready, and a hundred brought up at once on two cores would all be slow and
time out together (#30: 9 of 100 started). The slot is held for exactly the
start-up because this mixin waits for the server to answer inside start()
(JupyterHub's own wait after start() then finds it up at once), and frees it
then (queue.mark_ready) or when the start fails.

A hub that dies during a start-up (a crash, a kill) leaves its execution short of
`running`; the hub that restarts finds it in its record of the server
(record_start) and ends it (start_interrupted): otherwise it stayed `restoring`
for ever, its GPUs and its node's start-up slot held, and the container it may
have made ran with no execution (found by tests/cluster/test_chaos.py).
"""

from __future__ import annotations

import asyncio
import os

from jupyterhub.utils import wait_for_http_server

from workspace import i18n, lifecycle
from workspace.errors import UserError
from workspace.limits import queue
from workspace.store.nodes import Node

INTERRUPTED = i18n.N_(
    "The hub restarted while this workspace was starting; nothing ran, so nothing is lost. Start the workspace again."
)


class StartupMixin:
    """The bounds of a start once admitted, and its readiness (mixed into WorkspaceMixin)."""

    # the execution in the hub's record of this server when this spawner was made from it (load_state):
    # a start of this process has another; the interrupted one is ended once (start_interrupted)
    _loaded_execution: int | None = None
    _interrupted = False

    def record_start(self) -> None:
        """The new execution in the hub's record of this server now, not only once start() returns (when
        JupyterHub stores the spawner's state): a hub that dies during the start-up then finds it there."""
        orm_spawner = getattr(self, "orm_spawner", None)
        if orm_spawner is not None and getattr(self.user, "db", None) is not None:
            orm_spawner.state = self.get_state()
            self.user.db.commit()

    async def start_interrupted(self) -> bool:
        """Whether this server's execution is a start-up its hub died during: the one in the hub's record
        (not a start of this process) and still short of `running`. Then poll() says the server is not
        running, and the hub's stop ends it (run_post_stop_hook: its container removed, nothing saved)."""
        if self.execution_id is None or self.execution_id != self._loaded_execution:
            return False
        state = await self.run_blocking(lifecycle.state_of, self.db, self.execution_id)
        if state not in ("queued", *queue.STARTING):
            self._loaded_execution = None  # it ran (or ended): nothing to ask at the next poll
            return False
        self._interrupted = True
        return True

    def startup_limit(self, cluster: list[Node]) -> queue.StartupLimit:
        """The start-ups each node brings up at once: `node_startup_slots`, else `startup_slots`, else four a
        core (measured on two cores, a burst of 100: 2 slots p95 130 s, 4: 115-130 s, 8: 100 s, 16: 128 s,
        benchmarks/burst.py); a start-up not ready within the start's own bounds frees its slot."""
        slots = {}
        for node in cluster:
            cores = node.cpus or os.cpu_count() or 1
            slots[node.name] = int(
                self.node_startup_slots.get(node.name) or self.startup_slots or max(2, int(4 * cores))
            )
        return queue.StartupLimit(slots, bound_s=self.startup_timeout() + self.http_timeout)

    def startup_timeout(self) -> float:
        """How long an admitted start may take to run its container (JupyterHub's `start_timeout` as
        configured; a start's own, lifted by the queue's wait, is not that)."""
        return getattr(self, "_base_start_timeout", self.start_timeout)

    async def _bounded(self, running):
        """The container's start within `start_timeout` as configured (the queue's wait is not counted)."""
        try:
            return await asyncio.wait_for(running, self.startup_timeout())
        except asyncio.TimeoutError:
            raise UserError(
                503,
                "The workspace did not start within {seconds:g} s of its turn; please try again, and tell "
                "your administrator if it keeps happening.",
                seconds=self.startup_timeout(),
            ) from None

    async def _until_ready(self, plan, result, task: bool) -> None:
        """The start-up is over when the server answers (a task's: when its container runs): its node's
        start-up slot is free then. Waited for here rather than by JupyterHub after start(), so that the
        slot is held for exactly the start-up, and a start's `http_timeout` counts from its turn."""
        # without a Server (a spawner started outside a hub's spawn, as dockerspawner's own tests do) there
        # is no URL to wait on, and nobody waits after start() either
        if not task and self.server is not None:
            url = self.server_url(result)
            try:
                await wait_for_http_server(url, timeout=self.http_timeout)
            except (asyncio.TimeoutError, TimeoutError):
                raise UserError(
                    503,
                    "The workspace's server did not answer within {seconds:g} s of its start; read its log on "
                    "the workspace's page, then start it again.",
                    seconds=self.http_timeout,
                ) from None
            await self._start_script_said()
        await self.run_blocking(queue.mark_ready, self.db, plan.execution_id)

    START_SCRIPT_GRACE = 3.0  # s: the start script's last lines, read after the server answers

    async def _start_script_said(self) -> None:
        """The start script ran before the server, so its last lines ("[start.sh] failed ...") are in the
        log by now; the follower is given a moment to show them, because the progress page stops listening
        once start() returns (found when CI's load made the follower's next read come after the ready)."""
        follower = getattr(self, "_start_script", None)
        if follower is None or follower.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(follower), self.START_SCRIPT_GRACE)
        except (asyncio.TimeoutError, TimeoutError):
            self.log.info("The start script's last lines of %s come after its start", self._log_name)

    def server_url(self, result) -> str:
        """The server's URL from start()'s result ((ip, port) or a URL), as JupyterHub's Server makes it."""
        if isinstance(result, str):
            return result.rstrip("/") + self.server.base_url
        ip, port = result
        return f"http://{ip}:{port}{self.server.base_url}"
