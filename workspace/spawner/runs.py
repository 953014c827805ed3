"""A run beside a workspace (#31): a task on a JupyterHub server of its own (`run-<12 hex>`), started
while the workspace is open and beside its other runs, recorded as an execution of that workspace.

The server's options name the workspace (`beside`, read by start_request.workspace_of); the spawner
keeps it in its state (`run_beside`), so a restarted hub still knows whose execution it runs, and every
part of a start that means the workspace asks `workspace_name` (its records, environment, SSH identity,
pre-warmed node) while the engine's names stay the server's own. A run from `now` starts from a
snapshot of the open workspace's home taken at the request (lifecycle.checkpoint), removed once the
run's home holds it.
"""

from __future__ import annotations

from workspace import lifecycle


class RunsMixin:
    # the workspace this server is a run beside (spawner state): empty for a workspace's own server. A plain
    # attribute: this mixin is not a HasTraits class, so a trait here would never be set up
    run_beside: str = ""

    @property
    def workspace_name(self) -> str:
        """The workspace this server starts an execution of: itself, or the one a run is beside (#31)."""
        return self.run_beside or self.name

    @property
    def run_server(self) -> str | None:
        """This server's name when it is a run beside a workspace (None: the workspace's own server)."""
        return self.name if self.run_beside else None

    async def _checkpoint(self, choice) -> str | None:
        """For a run from `now`: the snapshot of the open workspace's home, taken now (None otherwise)."""
        if choice != "now":
            return None
        self.emit_progress(3, self.localized("Taking a snapshot of the open workspace's home"))
        key = await self.run_blocking(lifecycle.checkpoint, self.db, self.store_of, self.user.name, self.workspace_name)
        self.current.checkpoint = key
        return key

    async def _drop_checkpoint(self) -> None:
        """Remove the snapshot of the open home a run from `now` took, once its home holds it, or when the
        run ends before that (failed, or stopped while it waited)."""
        key, self.current.checkpoint = self.current.checkpoint, None
        if key:
            await self.run_blocking(self._discard_checkpoint, key)

    def _discard_checkpoint(self, key: str) -> None:
        try:
            lifecycle.discard_checkpoint(self.db, self.store_of, key, self.execution_store)
        except Exception:  # its record says deleted; a copy left is the store's, not the user's
            self.log.exception("Removing the checkpoint %s failed", key)
