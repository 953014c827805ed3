"""REST API: accounting (workspace/reports/accounting.py).

    GET    /api/accounting?since=&until=                  CPU-hours and GPU-hours per execution and in total

An admin may add `?user=NAME` for anyone's, or `?all=true` for every user's.
"""

from __future__ import annotations

from workspace.errors import UserError
from workspace.reports import accounting
from workspace.service.api import APIHandler


class AccountingHandler(APIHandler):
    async def get(self):
        admin = self.who().admin
        everyone = self.get_argument("all", "").lower() in ("1", "true", "yes")
        if everyone and not admin:
            raise UserError(403, "Only administrators may see everyone's accounting.")
        owners = None if everyone else [await self.owner()]
        since = accounting.parse_time(self.get_argument("since", None), "since")
        until = accounting.parse_time(self.get_argument("until", None), "until")

        def load():
            with self.db.session() as s:
                return accounting.report(s, owners, since, until)

        self.write_json(await self.blocking(load))


def handlers(prefix: str) -> list:
    return [(rf"{prefix}api/accounting/?", AccountingHandler)]
