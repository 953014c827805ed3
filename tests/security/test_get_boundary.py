"""The boundary as a property (issue #28): no GET changes state, on any route of the hub or the service.

Every route, as this deployment configures them (tests/security/routes.py: JupyterHub's handlers with our
authenticator's and `extra_handlers`, the workspace service's), is filled with plausible arguments (a real
owner, a stopped workspace with saved outputs, a running one, their executions) and GET, with and without
a start's options in the query (as a link another site shows would carry them), by the owner signed in
and by an administrator: a browser sends the login cookie with such a GET, and nothing else. The servers,
what JupyterHub keeps for their next start, the workspace database and the engine's containers must be
the same after every GET as before it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from urllib.parse import urlencode

import pytest
import requests
import sqlalchemy as sa

from tests.integration.hub import ADMIN_PASSWORD, Hub
from tests.security import routes

OWNER, STOPPED, RUNNING, NEVER, COURSE = "gina", "thesis", "live", "never", "cs101"
DEPLOYMENT = "demo"  # serving STOPPED's output (#33): a GET of its stop, start or key routes must not act
OTHER_IMAGE = "workspace-scientific:latest"
START_OPTIONS = {"opt-image": OTHER_IMAGE, "opt-continue_from": "fresh", "opt-cleanup": "on"}

# What a GET may change, and why it is not the state this test guards:
SKIPPED = {
    "/hub/logout": "ends the session of whoever GETs it (JupyterHub's; nothing of a workspace changes)",
}
# tables written in the background (the culler's samples, measurements of storage), whatever the requests
BACKGROUND_TABLES = {"usage_samples", "storage_usage", "deployment_replicas", "deployment_traffic"}
# the record columns the hub and the culler update in the background (leases, sizes, usage)
RECORD_COLUMNS = {
    "executions": ("id", "workspace_id", "number", "state", "image", "resource_type", "cleanup", "restored_from_id"),
    "snapshots": ("id", "key", "deleted"),
    # a deployment's controller holds a lease in its record, the router counts its requests there (#33)
    "deployments": ("id", "name", "running", "access", "course", "replicas", "serving", "rolling", "deleted"),
    "deployment_keys": ("id", "revoked"),
}


def arguments(ws: str) -> list[tuple[str, str]]:
    """(the path so far, as a regex: the argument's value), the first match wins (routes.fill)."""
    return [
        (r"^$", "/nothing-here"),  # the hub's catch-all
        (r"^/$", "user"),  # /(user|services)/NAME
        (r"/hub/user/[^/]+$", f"/{ws}/lab"),  # the rest of a /hub/user/OWNER/... path
        (r"/user-redirect/$", f"{ws}/lab"),
        (r"/error/$", "503"),
        (r"/authorizations/cookie/$", "jupyterhub-session-id"),
        (r"/authorizations/(cookie/[^/]+|token)/$", "x"),
        (r"/hub/api/$", "nothing"),
        (r"/tokens/$", "0"),
        (r"/groups/$", COURSE),
        (r"/hub/api/services/$", "workspace"),
        (r"/datasets/[^/]+/[^/]+/shares/$", "user"),
        (r"/datasets/[^/]+/[^/]+/shares/user/$", "eve"),
        (r"/(spawn|spawn-pending|shares|share-codes|shared)/[^/]+/$", ws),
        (r"/(user|users|spawn|spawn-pending|shares|share-codes|shared|datasets|images)/$", OWNER),
        (r"/servers/$", ws),
        (r"/workspaces/$", ws),
        (r"/executions/$", "1"),
        (r"/sweeps/$", "1"),
        (r"/files/$", "notes.txt"),
        (r"/datasets/[^/]+/$", "data"),
        (r"/images/[^/]+/$", "img"),
        (r"/images/[^/]+/[^/]+/$", "approve"),  # approve|revoke: a POST only (a GET must change nothing)
        (r"/versions/$", "1"),
        (r"/uploads/$", "0123abcd"),
        (r"/courses/$", COURSE),
        (r"/ssh-keys/$", "1"),
        (r"/deployments/$", DEPLOYMENT),
        (r"/deployments/[^/]+/$", "stop"),  # stop|start: a POST only
        (r"/keys/$", "1"),
        (r"/labelling/$", "0123456789ab"),  # a course's labelling project (#36): none of that key
        (r"/labelling/[0-9a-f]{12}/$", "projects/"),  # ... its Label Studio, through the service's proxy
        (r"/language/$", "zh_CN"),
        (r"/docs/(en|zh_CN)/$", "students/index.html"),  # the manual (#35): files, read-only
        (r"/docs/$", "students/errors.html"),  # ... and the redirect to the reader's language
        (r"/static/$", "nothing.css"),
    ]


def urls(hub: Hub) -> list[str]:
    """Every route of the hub and the service as a URL of the owner's things (each workspace, both states),
    and the paths of a workspace's own server (JupyterHub sends one that is not running to the hub)."""
    listed = routes.listed(hub.env)
    out: list[str] = []
    for ws in (STOPPED, RUNNING, NEVER):
        for pattern in listed["hub"] + listed["service"]:
            path = routes.fill(pattern, arguments(ws))
            if path is not None and path not in out:
                out.append(path)
        out += [f"/user/{OWNER}/{ws}/lab", f"/user/{OWNER}/{ws}/", f"/user/{OWNER}/{ws}/api/status", "/"]
    assert any(p.startswith("/hub/spawn/") for p in out) and any(p.startswith("/services/workspace/api/") for p in out)
    return list(dict.fromkeys(p for p in out if p not in SKIPPED))


def state(hub: Hub) -> dict:
    """What a GET must not change: the servers, JupyterHub's kept options, the workspace records, the
    containers."""
    servers = {
        u["name"]: {
            n: (s.get("ready"), s.get("pending"), s.get("stopped")) for n, s in (u.get("servers") or {}).items()
        }
        for u in hub.api("GET", "/users", params={"include_stopped_servers": "1"}).json()
    }
    path = hub.settings.hub_db_url.removeprefix("sqlite:///")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        kept = sorted(db.execute("SELECT user_id, name, user_options, server_id FROM spawners").fetchall())
        hub_users = sorted(db.execute("SELECT name, admin FROM users").fetchall())
        groups = sorted(db.execute("SELECT name FROM groups").fetchall())
    records = {}
    engine = sa.create_engine(hub.settings.db_url)
    try:
        with engine.connect() as c:
            for table in sa.inspect(engine).get_table_names():
                if table in BACKGROUND_TABLES or table == "alembic_version":
                    continue
                columns = RECORD_COLUMNS.get(table)
                query = f"SELECT {', '.join(columns) if columns else '*'} FROM {table}"
                records[table] = sorted((tuple(map(str, row)) for row in c.execute(sa.text(query))))
    finally:
        engine.dispose()
    containers = sorted((c.name, c.status) for c in hub.containers())
    return {
        "servers": servers,
        "kept": kept,
        "users": hub_users,
        "groups": groups,
        "records": records,
        "containers": containers,
    }


def settled(hub: Hub, timeout: float = 180) -> dict:
    """The state once no server is starting or stopping any more."""
    deadline = time.monotonic() + timeout
    while True:
        now = state(hub)
        busy = any(pending for servers in now["servers"].values() for _, pending, _ in servers.values())
        if not busy or time.monotonic() > deadline:
            return now
        time.sleep(1)


def changed(before: dict, after: dict) -> dict:
    out = {}
    for key in before:
        if key == "records":
            for table in set(before[key]) | set(after[key]):
                if before[key].get(table) != after[key].get(table):
                    out[table] = (before[key].get(table), after[key].get(table))
        elif before[key] != after[key]:
            out[key] = (before[key], after[key])
    return out


@pytest.fixture(scope="module")
def hub(start_hub) -> Hub:
    hub = start_hub(WORKSPACE_COURSES=json.dumps({COURSE: {"instructors": ["prof"]}}))
    token = hub.user_token(OWNER)
    hub.start_workspace(OWNER, STOPPED, token)
    hub.sh(OWNER, STOPPED, "echo notes > ~/notes.txt")
    hub.stop_workspace(OWNER, STOPPED, token)
    hub.start_workspace(OWNER, RUNNING, token)
    body = {"name": DEPLOYMENT, "from": f"{STOPPED}#1", "image": hub.settings.image, "port": 8080}
    r = hub.service_call("POST", "/deployments", token, json={**body, "command": "python3 -m http.server 8080"})
    assert r.status_code == 201, r.text
    assert hub.service_call("POST", f"/deployments/{DEPLOYMENT}/keys", token, json={}).status_code == 201
    deadline = time.monotonic() + 120
    while hub.service_call("GET", f"/deployments/{DEPLOYMENT}", token).json()["status"] != "serving":
        assert time.monotonic() < deadline, hub.log_tail(40)
        time.sleep(0.5)
    return hub


@pytest.mark.parametrize("who", ["owner", "admin"])
def test_no_get_changes_state(hub: Hub, who: str):
    if who == "owner":
        session = hub.browser_login(OWNER)
    else:
        session = hub.browser_login(hub.settings.admin_user, ADMIN_PASSWORD)
    walked, failures = 0, []
    before = state(hub)
    for path in urls(hub):
        for query in ("", "?" + urlencode(START_OPTIONS)):
            url = f"{hub.url}{path}{query}"
            try:
                with session.get(url, timeout=20, stream=True) as r:
                    r.raw.read(256 << 10)  # a stream (a progress, a log) is read a little, then left
            except requests.RequestException as e:
                failures.append(f"GET {path}{query}: {e}")
                continue
            walked += 1
            after = state(hub)
            difference = changed(before, after)
            if difference:
                failures.append(f"GET {path}{query} ({r.status_code}) changed {json.dumps(difference, default=str)}")
                before = settled(hub)  # a start it began goes on: the next GET is not blamed for its end
    assert walked > 150, walked
    assert not failures, f"{len(failures)} GET(s) changed state or failed:\n" + "\n".join(failures)
    # the walk was signed in all along (a GET that ended the session would make the rest anonymous)
    r = session.get(f"{hub.url}/hub/home", timeout=20)
    assert r.status_code == 200 and "/hub/login" not in r.url, r.url
