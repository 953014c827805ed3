"""An execution's log: kept when its container is removed, and followed for its start script's lines.

The hub keeps the tail of every ended execution's log (a task's output; a
server's log with its start script's output) under `execution_log_root`; while a
server starts, the lines of the home's start script are shown as progress.
"""

from __future__ import annotations

import asyncio
import errno
import threading
import time
from pathlib import Path

from workspace import lifecycle, tasks
from workspace.store import paths


def may_have_start_script(home: Path) -> bool:
    """Whether the restored home may hold a start script (~/.workspace/start.sh, which the image's
    workspace-start runs): False only when it certainly has none, looked at without following a link a
    student made. A link on the way, a home not on this host (another node's store) or any doubt: True.
    A class starting at once then does not ask the engine for each server's log every second, with a
    new client each time, for lines that never come."""
    try:
        tree = paths.Tree(home)
    except OSError:
        return True  # not on this host
    with tree:
        try:
            tree.lstat(".workspace/start.sh")  # never through a link: one on the way is ELOOP or EXDEV
        except OSError as e:
            return e.errno != errno.ENOENT
    return True


class ExecutionLogsMixin:
    """What is kept of an execution's container before it is removed, and its start script's lines as
    progress (mixed into WorkspaceMixin)."""

    @classmethod
    def engine_log(cls, options, record_id: str, since: float | None = None, tail: int | None = None):
        """The log of the container (or service) `record_id` with the engine's times, from `since` (UNIX
        time) to now, as a blocking iterator of byte chunks; engine-specific (see DockerWorkspaceSpawner).
        `options`: a spawner, or the `SpawnerOptions` of a process that only reads; `tail`: only its last
        lines (a sweep's page shows a run's last one). To follow a log: tasks.follow."""
        return iter(())

    async def container_exit_code(self) -> int | None:
        """The exit code of the current execution's stopped container (engine-specific)."""
        return None

    async def keep_log(self) -> None:
        """Before an execution's container is removed: keep the tail of its log (a task's output; a
        server's log and its start script's output) and record its exit code. The engines call this
        from their removal; a failure here never blocks the save."""
        execution_id, record_id = self.execution_id, self.container_record_id()
        if not record_id or execution_id is None:
            return
        if await self.run_blocking(lifecycle.log_kept, self.db, execution_id):
            return  # kept already: a second removal (a stop, then the post-stop hook) finds nothing to keep
        try:
            code = await self.container_exit_code()
            path = tasks.log_path(self.execution_log_root, execution_id)
            kept = await self.run_blocking(
                lambda: tasks.keep(self.engine_log(self, record_id), path, self.execution_log_limit)
            )
            if code is None:
                code = kept.exit_code
            await self.run_blocking(
                lifecycle.record_log, self.db, execution_id, code, max(kept.total, kept.wrote or 0), kept.kept
            )
        except Exception:
            self.log.exception("Keeping the log of %s failed", self._log_name)

    START_SCRIPT_LINES = 200  # shown as progress at most (the rest is in the execution's log)

    async def _show_start_script(self, record_id: str) -> None:
        """While the hub waits for the server: the home's start script's lines (`[start.sh] ...`, written by
        the image's workspace-start) as progress events. What a student's script prints is theirs: each
        line is cut to 300 characters, and the page shows it as text."""
        if not await self.run_blocking(may_have_start_script, self.home_dir):
            return
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.http_timeout
        done = threading.Event()
        shown = [0]
        # said now: the hub forgets the start's request once start() has returned
        rest = self.localized("[start.sh] … (the rest is in this execution's log)")

        def show(text: str) -> None:
            if shown[0] < self.START_SCRIPT_LINES:
                self.emit_progress(92, text[:300])
            elif shown[0] == self.START_SCRIPT_LINES:
                self.emit_progress(92, rest)
            shown[0] += 1

        def waiting() -> bool:
            return time.monotonic() < deadline and not done.is_set() and getattr(self, "_spawn_pending", False)

        def follow() -> None:
            lines = tasks.follow(lambda since: self.engine_log(self, record_id, since), waiting, done.is_set)
            for line in lines:
                text = line.decode(errors="replace").rstrip("\n").partition(" ")[2]
                if not text.startswith("[start.sh] "):
                    continue
                loop.call_soon_threadsafe(show, text)
                if text.startswith(("[start.sh] done", "[start.sh] failed", "[start.sh] stopped")):
                    done.set()

        # a thread of its own: a class starting at once must not hold the shared pool's threads while waiting
        finished: asyncio.Future = loop.create_future()

        def run() -> None:
            try:
                follow()
                loop.call_soon_threadsafe(finished.set_result, None)
            except Exception as e:
                loop.call_soon_threadsafe(finished.set_exception, e)

        threading.Thread(target=run, name="workspace-start-script", daemon=True).start()
        try:
            await finished
        except Exception as e:  # the progress page only misses the script's lines; its log keeps them
            self.log.warning("Could not follow the start script of %s: %s", self._log_name, e)
