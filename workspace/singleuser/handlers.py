"""HTTP handlers of the workspace extension (see workspace/singleuser/__init__.py)."""

from __future__ import annotations

import hmac
import os
import time

from jupyter_server.base.handlers import APIHandler
from tornado import web

from workspace import usage
from workspace.singleuser.notices import LEVELS


class _Handler(APIHandler):
    # The culler's calls must not count as activity of the user (jupyter_server
    # reports api_last_activity to the hub).
    _track_activity = False

    @property
    def activity(self):
        return self.settings["workspace_activity"]

    @property
    def notices(self):
        return self.settings["workspace_notices"]


class Usage:
    """CPU (between two readings, percent of one core), memory and GPUs of this container."""

    def __init__(self):
        self.cgroup = usage.OwnCgroup()
        self.meter = usage.CpuMeter(self.cgroup)
        self.meter.sample()
        self.cpu_percent: float | None = None
        self.sampled = time.monotonic()

    def report(self) -> dict:
        if time.monotonic() - self.sampled >= 1.0:
            value = self.meter.sample()
            self.sampled = time.monotonic()
            if value is not None:
                self.cpu_percent = round(value, 1)
        return {
            "cpu_percent": self.cpu_percent,
            "memory_bytes": self.cgroup.memory_bytes(),
            "memory_limit_bytes": self.cgroup.memory_limit_bytes(),
            "gpu": usage.gpu_usage(),
        }


class _ReportHandler(_Handler):
    """What the culler calls. It shows this execution's report key, never a hub token.

    The key is in this container's environment (WORKSPACE_REPORT_KEY): the
    workspace's own secret, worth nothing elsewhere. A browser cannot send
    this header cross-site without a CORS preflight this server refuses, so
    the XSRF check (meant for cookies) does not apply.
    """

    SCHEME = "workspace-report "

    def prepare(self):
        key = os.environ.get("WORKSPACE_REPORT_KEY", "")
        given = self.request.headers.get("Authorization", "")
        if (
            not key
            or not given.startswith(self.SCHEME)
            or not hmac.compare_digest(given[len(self.SCHEME) :].encode(), key.encode())
        ):
            raise web.HTTPError(403, "This address is for the workspace culler.")
        return super().prepare()

    def check_xsrf_cookie(self):
        return

    def get_current_user(self):
        return None


class ActivityHandler(_ReportHandler):
    def get(self):
        report = self.activity.report(self.application)
        report["usage"] = self.settings["workspace_usage"].report()
        report["notices"] = self.notices.list()
        self.finish(report)


class ReportNoticesHandler(_ReportHandler):
    def post(self):
        body = self.get_json_body() or {}
        message, notice_id = body.get("message"), body.get("id")
        level = body.get("level", "warning")
        if not isinstance(message, str) or not message.strip() or not isinstance(notice_id, str) or not notice_id:
            raise web.HTTPError(400, "A notice needs an 'id' and a 'message' (text).")
        if level not in LEVELS:
            raise web.HTTPError(400, f"'level' must be one of {', '.join(LEVELS)}.")
        notice = self.notices.post(notice_id, message.strip(), level, body.get("stop_at"))
        self.set_status(201)
        self.finish(notice)

    def delete(self):
        notice_id = self.get_argument("id", None)
        if not notice_id:
            raise web.HTTPError(400, "Say which notice to withdraw: ?id=...")
        found = self.notices.withdraw(notice_id, self.get_argument("message", None))
        self.set_status(204 if found else 404)
        self.finish()


class UsageHandler(_Handler):
    @web.authenticated
    def get(self):
        self.finish(self.settings["workspace_usage"].report())


class NoticesHandler(_Handler):
    """The notices, for the JupyterLab plugin (the user's own session)."""

    @web.authenticated
    def get(self):
        self.finish({"notices": self.notices.list()})


def handlers(base_url: str) -> list:
    prefix = base_url.rstrip("/") + "/api/workspace"
    return [
        (prefix + "/activity", ActivityHandler),
        (prefix + "/usage", UsageHandler),
        (prefix + "/notices", NoticesHandler),
        (prefix + "/report/notices", ReportNoticesHandler),
    ]
