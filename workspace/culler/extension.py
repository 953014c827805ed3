"""The workspace extension as the culler speaks to it: its activity report, and the notices it shows.

Every call carries the execution's own report key, never a hub credential (see `_extension`).
`WorkspaceExtension` is mixed into the Culler (workspace/culler/app.py), which gives it `http`,
`request_timeout`, `clock`, `_semaphore` (at most `concurrency` asked at once) and `_unrouted`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from urllib.parse import urlencode

from tornado.httpclient import HTTPClientError, HTTPRequest

from workspace.culler.hub_api import Server
from workspace.culler.idle import Verdict
from workspace.culler.report import REPORT_SCHEME, clean_report

log = logging.getLogger("workspace.culler")


class WorkspaceExtension:
    """Asking a workspace for its activity, and showing (or withdrawing) a notice in it."""

    async def _extension(self, server: Server, method: str, path: str, body=None, query=None):
        """Call the workspace's extension with the execution's report key: never a hub credential.

        Whatever answers on the workspace's port is the student's to choose,
        so it gets nothing it could use elsewhere; no redirect is followed.
        """
        if not server.report_key:
            raise HTTPClientError(403, message="this execution has no report key")
        url = f"{server.url.rstrip('/')}/api/workspace/{path}"
        if query:
            url += "?" + urlencode(query)
        req = HTTPRequest(
            url,
            method=method,
            headers={"Authorization": f"{REPORT_SCHEME} {server.report_key}"},
            body=None if body is None else json.dumps(body),
            request_timeout=self.request_timeout,
            allow_nonstandard_methods=True,
            follow_redirects=False,
        )
        resp = await self.http.fetch(req, raise_error=False)
        if resp.code >= 400 or resp.code == 599:
            raise HTTPClientError(resp.code, response=resp)
        return json.loads(resp.body) if resp.body else None

    async def activity(self, server: Server) -> dict | None:
        """The extension's report, or None when the workspace cannot tell (old image, not answering)."""
        if server.url is None:
            # said once per execution: a server the proxy's table does not show is judged by the hub's last
            # activity, which lags by minutes (#28: a route key of the wrong form hid every open tab)
            if server.execution_id not in self._unrouted:
                self._unrouted.add(server.execution_id)
                log.warning("%s: not in the proxy's table; judged by the hub's last activity", server.label)
            return None
        async with self._semaphore:
            try:
                report = clean_report(await self._extension(server, "GET", "activity"), self.clock())
            except Exception as e:  # anything a hostile server answers: this workspace only
                log.info("%s: no activity report (%s); using the hub's last activity", server.label, e)
                return None
            if report is None:
                log.info("%s: its activity report is malformed; using the hub's last activity", server.label)
            return report

    async def notify(self, server: Server, verdict: Verdict, notice_id: str) -> None:
        if verdict.action == "warn":
            stop_at = dt.datetime.fromtimestamp(verdict.stop_at, dt.timezone.utc).isoformat()
            await self.show_notice(server, notice_id, verdict.message, "", stop_at=stop_at)
        else:
            await self.show_notice(server, notice_id, None, verdict.message)

    async def show_notice(self, server: Server, notice_id: str, message: str | None, withdrawn: str, **extra) -> bool:
        """Post `message` as a notice in the workspace (with `extra` fields), or with None withdraw it,
        telling `withdrawn`; False if it did not arrive."""
        if server.url is None:
            return True
        try:
            if message:
                body = {"id": notice_id, "level": "warning", "message": message, **extra}
                await self._extension(server, "POST", "report/notices", body=body)
            else:
                await self._extension(server, "DELETE", "report/notices", query={"id": notice_id, "message": withdrawn})
        except Exception as e:
            log.warning("%s: the notice %s did not reach the workspace: %s", server.label, notice_id, e)
            return False
        return True
