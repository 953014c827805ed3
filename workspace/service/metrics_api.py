"""Prometheus metrics of the platform, beside the hub's own /hub/metrics.

    GET /services/workspace/metrics     text exposition format (workspace/reports/metrics.py says what is in it)

Authentication is the hub's for /hub/metrics: only a caller whose token holds
JupyterHub's `read:metrics` scope (an administrator's API token, or a service
whose role has it), unless `c.WorkspaceService.authenticate_prometheus = False`
opens it to whoever reaches it. `read:metrics` alone is enough (the token needs
no access to the rest of the service), so one Prometheus token scrapes both
endpoints. Anyone else gets a 403 with a sentence and no figure. The metrics
carry no user or workspace names.

A scrape reads the workspace database in a thread (bounded reads, see
workspace/reports/metrics.py) and statvfs of the home store; it walks no tree.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from workspace.errors import UserError
from workspace.limits import queue
from workspace.reports import metrics
from workspace.service.api import APIHandler

# JupyterHub's scope for /hub/metrics (JupyterHub 5+; the admin role has it)
SCOPE = "read:metrics"


class MetricsHandler(APIHandler):
    def initialize(self, authenticate: bool = True):
        self.authenticate = authenticate

    @property
    def hub_scopes(self):
        # Let a token through that may use the service or read metrics; get() then requires the latter.
        return set(self.hub_auth.access_scopes or ()) | {SCOPE}

    async def get(self):
        if self.authenticate:
            user = self.get_current_user()
            if not user or SCOPE not in (user.get("scopes") or ()):
                raise UserError(
                    403,
                    "Reading the metrics needs a JupyterHub token with the “{scope}” scope: an "
                    "administrator's API token, or a service's whose role has it "
                    "(the manual: Administrators, Metrics).",
                    scope=SCOPE,
                )
        body = await self.blocking(generate_latest, self.registry())
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.finish(body)

    def registry(self):
        """The application's one registry (its collector keeps totals between scrapes)."""
        registry = self.settings.get("workspace_metrics")
        if registry is None:
            collector = metrics.WorkspaceCollector(
                self.db,
                store_root=self.settings["workspace_store"].root,
                resource_types=[t.name for t in self.settings.get("resource_types") or ()],
                node=queue.node_name(),
                replication=self.settings.get("record_store") is not None
                or self.settings.get("own_node_stores", False),
                engine_nodes=self.settings.get("engine_nodes"),
                node_stores=self.settings.get("node_stores"),
                followers=self.settings.get("followers"),
            )
            registry = self.settings.setdefault("workspace_metrics", metrics.registry(collector))
        return registry


def handlers(prefix: str, authenticate: bool = True) -> list:
    return [(rf"{prefix}metrics", MetricsHandler, {"authenticate": authenticate})]
