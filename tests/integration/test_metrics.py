"""GET /services/workspace/metrics on a real hub: a token with `read:metrics` scrapes what a real start
and stop recorded; a student, another service and a stranger get a 403 and not one figure, and no
scrape names a user."""

from __future__ import annotations

import socket

import requests
from prometheus_client.parser import text_string_to_metric_families

from .hub import ADMIN_PASSWORD, Hub

STUDENT, ATTACKER = "metrics-ada", "metrics-eve"


def scrape(hub: Hub, token: str | None = None, path: str = "/services/workspace/metrics", scheme="token", **kwargs):
    headers = {"Authorization": f"{scheme} {token}"} if token else {}
    return requests.get(f"{hub.url}{path}", headers=headers, timeout=30, allow_redirects=False, **kwargs)


def samples(text: str) -> dict:
    """{(name, sorted labels): value}; parsing it is the first check."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict, name: str, **labels) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def test_a_read_metrics_token_scrapes_executions_of_a_real_start_and_stop(hub: Hub):
    token = hub.user_token(STUDENT)
    admin = hub.user_token(hub.settings.admin_user, ADMIN_PASSWORD)
    before = samples(scrape(hub, admin).text)
    hub.start_workspace(STUDENT, "lab", token)

    r = scrape(hub, admin)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/plain")
    running = samples(r.text)
    assert value(running, "workspace_executions", state="running") >= 1
    restores = value(running, "workspace_restore_duration_seconds_count")
    assert restores >= value(before, "workspace_restore_duration_seconds_count") + 1
    node = socket.gethostname()
    assert value(running, "workspace_store_size_bytes", node=node) > 0
    assert (
        0
        < value(running, "workspace_store_used_bytes", node=node)
        <= value(running, "workspace_store_size_bytes", node=node)
    )

    hub.stop_workspace(STUDENT, "lab", token)
    stopped = samples(scrape(hub, admin).text)
    assert (
        value(stopped, "workspace_executions", state="stopped")
        >= value(before, "workspace_executions", state="stopped") + 1
    )
    assert (
        value(stopped, "workspace_save_duration_seconds_count")
        >= value(before, "workspace_save_duration_seconds_count") + 1
    )
    assert value(stopped, "workspace_save_duration_seconds_bucket", le="+Inf") == value(
        stopped, "workspace_save_duration_seconds_count"
    )

    # what a Prometheus service holds: a token with read:metrics and nothing else scrapes the hub's
    # /hub/metrics and this endpoint alike, without access to the rest of the workspace service
    r = hub.api("POST", f"/users/{hub.settings.admin_user}/tokens", token=admin, json={"scopes": ["read:metrics"]})
    assert r.status_code == 201, r.text
    prometheus = r.json()["token"]
    assert scrape(hub, prometheus, path="/hub/metrics").status_code == 200
    r = scrape(hub, prometheus)
    assert r.status_code == 200 and "workspace_executions" in r.text, r.text
    assert hub.service_api("/workspaces", prometheus).status_code == 403


def test_a_student_another_service_or_a_stranger_gets_403_and_no_figure(hub: Hub):
    student = hub.user_token(ATTACKER)
    browser = hub.browser_login(ATTACKER)
    victim = {"user": STUDENT, "name": "lab", "owner": STUDENT}
    attempts = [
        ("student", lambda **kw: scrape(hub, student, **kw)),
        ("student, bearer", lambda **kw: scrape(hub, student, scheme="Bearer", **kw)),
        # workspace-admin: admin:users, admin:servers ... but no read:metrics
        ("operator service", lambda **kw: scrape(hub, hub.admin_token, **kw)),
        ("no token", lambda **kw: scrape(hub, **kw)),
        ("forged token", lambda **kw: scrape(hub, "0" * 32, **kw)),
        (
            "the student's browser",
            lambda **kw: browser.get(f"{hub.url}/services/workspace/metrics", timeout=30, allow_redirects=False, **kw),
        ),
    ]
    for who, get in attempts:
        for params in ({}, victim):
            r = get(params=params)
            assert r.status_code in (401, 403) or 300 <= r.status_code < 400, (who, r.status_code)
            assert "workspace_" not in r.text and STUDENT not in r.text, (who, r.text[:300])
        if r.status_code == 403:
            assert "read:metrics" in r.json()["message"], who


def test_no_scrape_names_a_user_or_a_workspace(hub: Hub):
    token = hub.user_token(STUDENT)
    hub.start_workspace(STUDENT, "secret-thesis", token)
    try:
        admin = hub.user_token(hub.settings.admin_user, ADMIN_PASSWORD)
        r = scrape(hub, admin, params={"user": STUDENT, "name": "secret-thesis"})
        assert r.status_code == 200, r.text
        families = list(text_string_to_metric_families(r.text))
        labels = {name for f in families for s in f.samples for name in s.labels}
        assert labels <= {"state", "resource_type", "node", "le"}, labels
        assert all(f.name.startswith("workspace_") for f in families)
        for secret in (STUDENT, ATTACKER, "secret-thesis", hub.settings.admin_user):
            assert f'"{secret}"' not in r.text and secret not in {
                v for f in families for s in f.samples for v in s.labels.values()
            }
    finally:
        hub.stop_workspace(STUDENT, "secret-thesis", token)
