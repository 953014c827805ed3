"""A start's progress stream, said in the language of the user who asked for it.

JupyterHub calls `progress()` anew on every page load of the spawn page, so the
events are kept in a list and every call replays it from the start. The
spawner's sentences (`localized`) and its errors (`in_user_language`) are said
in the user's language too.
"""

from __future__ import annotations

import asyncio
import html
from typing import TYPE_CHECKING

from workspace import i18n
from workspace.errors import UserError
from workspace.limits.runtime import runtime_notice

if TYPE_CHECKING:
    from workspace.start_request import StartRequest


def ready_in_users_language(spawner, event: dict) -> dict:
    """The progress stream's last event (the hub's "Server ready at …") in the language the start was asked in."""
    url = event.get("url") or ""
    message = spawner.localized("Your workspace is ready at {url}", url=url)
    return {
        **event,
        "message": message,
        "html_message": html.escape(message).replace(
            html.escape(url), f'<a href="{html.escape(url)}">{html.escape(url)}</a>', 1
        ),
    }


class ProgressMixin:
    """The replayable progress stream, the start's language, and what the stream says of a start: what it
    will have, and its container's start (mixed into WorkspaceMixin)."""

    @property
    def locale(self) -> str:
        """The language of the user who asked for this start (the request's language cookie or
        Accept-Language; the workspace service passes its user's on): its progress is said in it."""
        request = getattr(getattr(self, "handler", None), "request", None)
        if request is not None:
            # kept: JupyterHub lets go of the handler once the start returns, and the progress stream's
            # last event (progress_ready_hook) is said after that
            self._locale = i18n.of_request(request)
        return getattr(self, "_locale", i18n.DEFAULT)

    def localized(self, message: str, **params) -> str:
        """`message` (a literal with `{placeholders}`: Babel's keyword `localized`) in the user's language."""
        return i18n.translate(self.locale, message, **params)

    def in_user_language(self, e: UserError) -> None:
        """Make what JupyterHub shows of `e` (its `jupyterhub_message`: the spawn request's answer, the
        progress stream's failure) the sentence in the user's language."""
        e.jupyterhub_message = e.in_locale(self.locale)

    def say_start_failure(self, e: Exception) -> None:
        """Make the progress page's last line of a failed start the user's language: the hub writes its
        English "Spawn failed: " before `jupyterhub_message`, but shows `jupyterhub_html_message` as it is."""
        if isinstance(e, UserError):
            self.in_user_language(e)
        reason = getattr(e, "jupyterhub_message", None) or str(e) or type(e).__name__
        try:
            e.jupyterhub_html_message = html.escape(
                self.localized("The workspace could not start: {reason}", reason=reason)
            )
        except AttributeError:  # an exception without a __dict__ keeps the hub's words
            pass

    def _reset_progress(self):
        old = getattr(self, "_progress_changed", None)
        self._progress_events = []
        self._progress_changed = asyncio.Event()
        if old is not None:
            # a listener that came before this start began waits on the last one's: it reads this one's
            old.set()

    async def _generate_progress(self):
        """The hub's stream of a start's events, its first one ("Server requested", written by JupyterHub's
        private `Spawner._generate_progress`, which this wraps) said in the user's language."""
        events = super()._generate_progress()
        try:
            async for event in events:
                if event.get("message") == "Server requested":
                    event = {**event, "message": self.localized("Workspace requested")}
                yield event
        finally:
            await events.aclose()

    def emit_progress(self, progress: int, message: str, **extra) -> None:
        """Record a progress event (0-100) and wake up the listeners."""
        if not hasattr(self, "_progress_events"):
            self._reset_progress()
        event = {"progress": progress, "message": message, **extra}
        self._progress_events.append(event)
        self.log.info("%s: %s", self._log_name, message)
        self._progress_changed.set()

    async def progress(self):
        if not hasattr(self, "_progress_events"):
            self._reset_progress()
        events, sent = self._progress_events, 0
        while True:
            if self._progress_events is not events:  # a start began since: its events, from the first
                events, sent = self._progress_events, 0
            while sent < len(events):
                yield events[sent]
                sent += 1
            # JupyterHub stops iterating once the spawn future is done.
            changed = self._progress_changed
            if self._progress_events is events:
                changed.clear()
                await changed.wait()

    # -- what the stream says of a start ------------------------------------------------

    async def _announce(self, request: StartRequest, plan) -> None:
        """The progress events of what this start will have: its execution, cleanup mode, the storage
        warning, its datasets, its resource type and its longest run time."""
        rtype = request.resource_type
        self.emit_progress(5, plan.describe(self.locale))
        if request.cleanup:
            self.emit_progress(
                5,
                self.localized(
                    "Cleanup mode: delete what you no longer need; the home cannot grow, and the "
                    "workspace stops after a short time"
                ),
            )
        if request.storage_warning:
            self.emit_progress(5, request.storage_warning)
        for m in request.mounts:
            if m.get("source") == "output":  # a deployment's replica (#33) serves a saved output
                text = self.localized(
                    "Output {output} will be mounted read-only at {mount}", output=m["ref"], mount=m["mount"]
                )
            else:
                text = self.localized(
                    "Dataset {dataset} will be mounted read-only at {mount}", dataset=m["ref"], mount=m["mount"]
                )
            self.emit_progress(5, text)
        if rtype is not None:
            self.emit_progress(
                5,
                self.localized(
                    "Resource type “{name}”: {summary}", name=rtype.name, summary=rtype.summary(self.locale)
                ),
            )
        if request.serve is not None:  # a deployment's replica (#33) has no maximum run time
            return
        groups, task = {g.name for g in self.user.groups}, request.task is not None
        args = (self.config, self.user.name, groups, rtype, task, self.locale)
        if runtime := await self.run_blocking(runtime_notice, *args):
            self.emit_progress(5, runtime)  # the culler stops it then (#28)

    def _announce_container(self, request: StartRequest, seconds: float) -> None:
        """The container runs: how long it took; a server's start script's lines follow as progress."""
        if request.serve is not None:
            text = self.localized(
                "Container started {seconds:.1f} s after the request; the replica of {deployment} starts",
                seconds=seconds,
                deployment=request.serve.deployment,
            )
        elif request.task is not None:
            text = self.localized("Container started {seconds:.1f} s after the request; the task runs", seconds=seconds)
        else:
            text = self.localized(
                "Container started {seconds:.1f} s after the request; waiting for JupyterLab", seconds=seconds
            )
        self.emit_progress(90, text)
        if request.task is None:
            self._start_script = asyncio.ensure_future(self._show_start_script(self.container_record_id()))
