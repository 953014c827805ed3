"""A deployment on its owner's own origin (#33 with per-user origins, workspace/router/hosts.py): its
address is `http://ada.localhost:PORT/serve/ada/NAME/`, the router logs a browser in there through the
hub's login (router/handoff.py), a course's members get in and others do not, and the app's page cannot
read the hub with its visitor's session. A real hub, a task's real output, real Chromium."""

from __future__ import annotations

import requests

from tests.browser.conftest import login
from tests.browser.test_origins import ATTACK
from tests.integration.hub import USER_PASSWORD
from tests.integration.test_deployments import IMAGE, task, wait_serving

APP = "import http.server as h; h.ThreadingHTTPServer(('', 8080), h.SimpleHTTPRequestHandler).serve_forever()"
PAGE = "<title>ada's site</title><p id=app>served</p>"


def open_as(chromium, hub, user: str, url: str) -> tuple[str, str, dict | None]:
    """`user` logs in on the hub's page and opens `url`: where they end, the page's text, and what the
    page's script can read of the hub (None when it is not the app's page)."""
    context = chromium.new_context()
    page = context.new_page()
    try:
        if user:
            login(page, hub, user, USER_PASSWORD)
        response = page.goto(url)
        text = page.inner_text("body")
        seen = page.evaluate(ATTACK, hub.url) if page.query_selector("#app") else None
        return page.url, f"{response.status} {text}", seen
    finally:
        context.close()


def test_a_deployment_is_served_on_its_owners_origin_with_the_hubs_login(start_hub, chromium, docker_client):
    hub = start_hub(WORKSPACE_SUBDOMAIN_HOST="localhost")
    port = hub.settings.port
    token, bob, eve = hub.user_token("ada"), hub.user_token("bob"), hub.user_token("eve")
    assert hub.api("POST", "/groups/cs101", json={"users": ["ada", "bob"]}).status_code == 201
    number = task(hub, token, "site", f'echo "{PAGE}" > index.html; echo "{APP}" > app.py')
    body = {"name": "site", "from": f"site#{number}", "image": IMAGE, "access": "course", "course": "cs101"}
    body.update(port=8080, command="cd /openbayes/output && python app.py")
    r = hub.service_call("POST", "/deployments", token, json=body)
    assert r.status_code == 201, r.text
    address = f"http://ada.localhost:{port}/serve/ada/site/"
    assert r.json()["address"] == address
    wait_serving(hub, token, "site", 1)

    # a program: on ada's host with a token, the app as it is (its own origin, no sandbox)
    on_ada = {"Host": f"ada.localhost:{port}", "Authorization": f"token {bob}"}
    r = requests.get(f"http://127.0.0.1:{port}/serve/ada/site/", headers=on_ada, timeout=30)
    assert r.status_code == 200 and "served" in r.text and "Content-Security-Policy" not in r.headers
    r = requests.get(f"http://127.0.0.1:{port}/serve/ada/site/", headers={**on_ada, "Authorization": f"token {eve}"})
    assert r.status_code == 404
    # on the hub's host: a browser is sent to ada's origin; a program is answered, sandboxed
    r = requests.get(f"{hub.url}/serve/ada/site/index.html?x=1", allow_redirects=False, timeout=30)
    assert r.status_code == 302 and r.headers["Location"] == address + "index.html?x=1"
    r = requests.get(f"{hub.url}/serve/ada/site/", headers={"Authorization": f"token {bob}"}, timeout=30)
    assert r.status_code == 200 and "sandbox" in r.headers["Content-Security-Policy"]
    # on another user's host (eve's, once she has a route there): never ada's deployment
    r = requests.get(f"http://127.0.0.1:{port}/serve/ada/site/", headers={**on_ada, "Host": f"eve.localhost:{port}"})
    assert "served" not in r.text

    # browsers: a member of the course, logged in on the hub's page, opens the address and lands there
    url, text, seen = open_as(chromium, hub, "bob", address)
    assert url == address and "served" in text, (url, text)
    assert seen["page"] == "blocked" and not seen["api"].startswith("read"), seen  # the hub stays out of reach
    # the owner too, from the old address on the hub's host
    url, text, _ = open_as(chromium, hub, "ada", f"{hub.url}/serve/ada/site/")
    assert url == address and "served" in text, (url, text)
    # not eve (not in the course), and nobody without a login (sent to the hub's login)
    url, text, seen = open_as(chromium, hub, "eve", address)
    assert text.startswith("404") and seen is None, (url, text)
    url, text, seen = open_as(chromium, hub, "", address)
    assert "/hub/login" in url and seen is None, (url, text)
