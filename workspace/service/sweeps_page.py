"""A sweep's page (#31), /services/workspace/workspaces/{name}/sweeps/{n}: its command and parameters, each
run with its state, place in the queue, exit code, duration and the last line of its log (kept up to
date by static/sweep.js from the API), a Cancel button (a POST with the XSRF token) while runs remain,
and the download of every run's output as one archive. `?user=NAME`: an instructor's (or an
administrator's) read-only view, as on the workspace page.

A sweep is started from the workspace page's "Run beside" form (its sweep lines), as the API's
POST /api/workspaces/{name}/sweeps starts one (sweeps_api.SweepStarts).
"""

from __future__ import annotations

from urllib.parse import quote

from tornado import web

from workspace import i18n, sweeps
from workspace.errors import UserError
from workspace.executions import check_workspace_name, number_of
from workspace.service.pages import PageHandler
from workspace.service.sweeps_api import details, stop_runs


class SweepPage(PageHandler):
    @web.authenticated
    async def get(self, name: str, number: str, message: str | None = None):
        check_workspace_name(name)
        me = self.get_current_user()["name"]
        owner = await self.owner()
        n = number_of(number)
        sweep = await self.blocking(details, self.db, self.settings, owner, name, n)
        query = f"?user={quote(owner, safe='')}" if owner != me else ""
        base = f"workspaces/{quote(name, safe='')}"
        self.render_page(
            "sweep.html",
            name=name,
            owner=owner,
            readonly=owner != me,
            sweep=sweep,
            message=message,
            query=query,
            workspace_page=f"{self.prefix}{base}{query}",
            api=f"{self.prefix}api/{base}/sweeps/{n}",
            outputs=f"{self.prefix}api/{base}/sweeps/{n}/outputs",
            amp=f"&{query[1:]}" if query else "",
        )

    @web.authenticated
    async def post(self, name: str, number: str):
        check_workspace_name(name)
        me = self.get_current_user()["name"]
        if self.get_argument("user", me) != me:
            raise UserError(403, "You can read another user's workspace, not start, stop or change it.")
        if self.get_body_argument("action", "") != "cancel":
            raise UserError(400, "Say what to do: cancel.")
        n = number_of(number)
        servers = await self.blocking(sweeps.cancel, self.db, me, name, n)
        stopped = await stop_runs(self, me, servers)
        message = i18n.translate(
            self.lang,
            "Cancelled sweep #{number}: {count} run(s) stopped; their homes are saved.",
            number=n,
            count=stopped,
        )
        await self.get(name, number, message=message)


def handlers(prefix: str) -> list:
    return [(rf"{prefix}workspaces/([^/]+)/sweeps/(\d+)/?", SweepPage)]
