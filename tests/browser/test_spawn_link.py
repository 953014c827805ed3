"""Issue #28, 1, in Chromium: a page of another origin sends a signed-in student (or an administrator) to a
spawn URL with its choices (`?opt-image=…&opt-continue_from=fresh`). The browser sends the login cookie
with such a navigation; the hub shows the start form with a sentence, starts nothing and keeps nothing.
tests/security/test_spawn_link.py has the same attack with plain requests, and what the next starts get."""

from __future__ import annotations

import http.server
import json
import threading
from urllib.parse import urlencode

import pytest

from tests.browser.conftest import login
from tests.integration.hub import ADMIN_PASSWORD, USER_PASSWORD, Hub
from tests.security.test_spawn_link import (
    HOSTILE,
    OTHER_IMAGE,
    SITE_IMAGE,
    TYPES,
    kept_choices,
    kept_options,
    latest,
    saved_once,
)


@pytest.fixture(scope="module")
def hub(start_hub) -> Hub:
    return start_hub(WORKSPACE_IMAGES=f"{SITE_IMAGE},{OTHER_IMAGE}", WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES))


class AttackerSite:
    """Another origin (`localhost` on a port of its own, where the hub is `127.0.0.1`): its page sends the
    visitor to `target` by itself, as any page may."""

    def __init__(self, target: str):
        body = f"<!doctype html><title>Free GPUs</title><script>location.href = {target!r};</script>".encode()

        class Page(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
        self.url = f"http://localhost:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("who", ["student", "admin"])
def test_a_page_of_another_site_cannot_start_a_workspace(hub: Hub, chromium, who: str):
    victim = f"vic{who[0]}"
    token = hub.user_token(victim)
    before = saved_once(hub, victim, "thesis", token)
    assert hub.url.startswith("http://127.0.0.1:"), hub.url  # the attacker's page is on `localhost`
    target = f"{hub.url}/hub/spawn/{victim}/thesis?{urlencode(HOSTILE[0])}"
    site = AttackerSite(target)
    context = chromium.new_context()
    page = context.new_page()
    try:
        if who == "student":
            login(page, hub, victim, USER_PASSWORD)
        else:
            login(page, hub, hub.settings.admin_user, ADMIN_PASSWORD)
        page.goto(site.url)
        page.wait_for_url(f"{hub.url}/**")  # the attacker's page sent the browser to the hub
        page.wait_for_load_state()
        landed, shown = page.url, page.content()
    finally:
        page.close()
        context.close()
        site.close()
    server = hub.api("GET", f"/users/{victim}").json().get("servers", {}).get("thesis")
    assert server is None or not (server["pending"] or server["ready"]), (server, landed)
    assert hub.containers(user=victim) == []
    # where the link led: the start form, saying why it did not start
    assert landed.startswith(f"{hub.url}/hub/spawn/{victim}/thesis?"), landed
    assert 'id="spawn_form"' in shown and "A link cannot start a workspace" in shown, shown[-2000:]
    assert latest(hub, victim, "thesis")["number"] == before["number"]
    assert not kept_choices(kept_options(hub, victim)), kept_options(hub, victim)
