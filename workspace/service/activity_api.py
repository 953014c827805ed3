"""GET /api/activity: how many executions ran and waited over the last hours (administrators only).

?hours=24&step=300  ->  {"at": [ISO, ...], "running": [n, ...], "queued": [n, ...], "step": 300}
"""

from __future__ import annotations

from workspace.errors import UserError
from workspace.reports import activity
from workspace.service.api import APIHandler


class ActivityHandler(APIHandler):
    async def get(self):
        if not self.who().admin:
            raise UserError(403, "Only administrators may see the platform's activity.")
        hours, step = activity.window(self.get_query_argument("hours", None), self.get_query_argument("step", None))
        self.write_json(await self.blocking(activity.series, self.db, hours, step))


def handlers(prefix: str) -> list:
    return [(rf"{prefix}api/activity/?", ActivityHandler)]
