"""Issue #28, 1: a link starts a student's workspace with the attacker's choices.

`GET /hub/spawn/VICTIM/NAME?opt-image=…&opt-continue_from=fresh` needed only the victim's login cookie
(JupyterHub checks XSRF on POST only, and starts from a spawn URL's options); the image was remembered
(JupyterHub keeps a start's options as the next one's defaults, dockerspawner keeps its image), so the
victim's own `ssh victim+thesis+start` ran it again. Now a link only opens the start form, nothing of a
start is kept for the next, and the gateway's `+start` says what it wants. SECURITY.md, "Starts".
"""

from __future__ import annotations

import html
import json
import re
import sqlite3
from urllib.parse import urlencode

import pytest
import requests

from tests.integration.hub import ADMIN_PASSWORD, Hub
from tests.integration.test_ssh import Client

SITE_IMAGE = "workspace-base:latest"
OTHER_IMAGE = "workspace-scientific:latest"  # the attacker's (any image the victim may be offered)
TYPES = [{"name": "standard", "cpu": 1, "memory": "1G"}, {"name": "small", "cpu": 0.5, "memory": "512M"}]
HOSTILE = [
    {"opt-image": OTHER_IMAGE, "opt-continue_from": "fresh"},
    {"image": OTHER_IMAGE, "continue_from": "fresh"},  # JupyterHub's older form of a spawn URL's options
]


@pytest.fixture(scope="module")
def hub(start_hub) -> Hub:
    return start_hub(WORKSPACE_IMAGES=f"{SITE_IMAGE},{OTHER_IMAGE}", WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES))


def kept_options(hub: Hub, user: str) -> dict[str, dict]:
    """What JupyterHub keeps in its database as each of `user`'s servers' next start's options."""
    path = hub.settings.hub_db_url.removeprefix("sqlite:///")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT s.name, s.user_options FROM spawners s JOIN users u ON s.user_id = u.id WHERE u.name = ?", (user,)
        ).fetchall()
    return {name: json.loads(options or "{}") for name, options in rows}


def kept_choices(kept: dict[str, dict]) -> dict[str, dict]:
    """Of what the hub keeps, the options that run code or drop data (an image, "fresh", a task, cleanup).
    The spawner forgets every kept option (in the hub's session); the hub writes that at its next commit,
    so a resource type of the owner's own last start may still be read from the file for a moment."""
    risky = ("image", "continue_from", "task", "cleanup", "datasets")
    return {name: o for name, o in kept.items() if any(k in o for k in risky)}


def server(hub: Hub, user: str, name: str) -> dict | None:
    return hub.api("GET", f"/users/{user}").json().get("servers", {}).get(name)


def latest(hub: Hub, user: str, name: str) -> dict:
    return max(hub.executions(user, name), key=lambda e: e["number"])


def saved_once(hub: Hub, user: str, name: str, token: str) -> dict:
    """`name` started and stopped once, with a file in its home: the workspace an attacker aims at."""
    hub.start_workspace(user, name, token, resource_type="small")
    hub.sh(user, name, "echo mine > ~/marker.txt")
    hub.stop_workspace(user, name, token)
    return latest(hub, user, name)


def test_a_link_with_options_starts_nothing_and_keeps_nothing(hub: Hub):
    token = hub.user_token("vic")
    before = saved_once(hub, "vic", "thesis", token)
    victim = hub.browser_login("vic")
    admin = hub.browser_login(hub.settings.admin_user, ADMIN_PASSWORD)
    for who, session in (("the victim", victim), ("an administrator", admin)):
        for query in HOSTILE:
            for path in ("/hub/spawn/vic/thesis", "/hub/spawn/vic/fresh-one", "/hub/spawn"):
                r = session.get(f"{hub.url}{path}?{urlencode(query)}", timeout=60)
                # the start form, with the sentence, and the 400: nothing else happened
                assert r.status_code == 400, (who, path, query, r.status_code, r.url)
                assert "A link cannot start a workspace" in r.text, (who, path, r.text[-2000:])
                assert 'id="spawn_form"' in r.text, (who, path)
    assert server(hub, "vic", "thesis") is None or not (server(hub, "vic", "thesis")["pending"]), server(
        hub, "vic", "thesis"
    )
    assert hub.containers(user="vic") == []
    assert latest(hub, "vic", "thesis")["number"] == before["number"]
    assert hub.executions("vic", "fresh-one") == []
    assert not kept_choices(kept_options(hub, "vic")), kept_options(hub, "vic")
    # without options the link opens the form, as before (the victim starts it with its POST)
    r = victim.get(f"{hub.url}/hub/spawn/vic/thesis", timeout=60)
    assert r.status_code == 200 and 'id="spawn_form"' in r.text, r.status_code
    # the victim's next ordinary start: the workspace's image, continuing from the latest
    r = requests.post(f"{hub.url}/hub/api/users/vic/servers/thesis", headers={"Authorization": f"token {token}"})
    assert r.status_code in (201, 202), r.text
    assert hub.progress("vic", "thesis", token)[-1].get("ready")
    after = latest(hub, "vic", "thesis")
    assert after["image"] == SITE_IMAGE, after
    assert after["restored_from"] == before["number"], after
    assert hub.sh("vic", "thesis", "cat ~/marker.txt") == "mine\n"
    hub.stop_workspace("vic", "thesis", token)
    # the form's own POST, with the XSRF token, starts one (a new name too: the look at its form kept no entry)
    assert "fresh-one" not in kept_options(hub, "vic")
    xsrf = victim.cookies.get("_xsrf", path="/hub/")  # the hub's (the service's pages set one of theirs)
    r = victim.post(f"{hub.url}/hub/spawn/vic/fresh-one", data={"_xsrf": xsrf, "continue_from": "latest"}, timeout=60)
    assert r.status_code == 200 and "/hub/spawn-pending/vic/fresh-one" in r.url, (r.status_code, r.url)
    assert hub.progress("vic", "fresh-one", token)[-1].get("ready")
    assert latest(hub, "vic", "fresh-one")["image"] == SITE_IMAGE
    hub.stop_workspace("vic", "fresh-one", token)


def preselected_image(session: requests.Session, hub: Hub, user: str, name: str) -> str | None:
    """The image the hub's start form of `name` has selected (what a press of Start would post)."""
    form = session.get(f"{hub.url}/hub/spawn/{user}/{name}", timeout=60).text
    select = re.search(r'<select[^>]*name="image"[^>]*>(.*?)</select>', form, re.S)
    chosen = re.search(r'<option value="([^"]*)"[^>]* selected', select.group(1)) if select else None
    return html.unescape(chosen.group(1)) if chosen else None


def test_what_one_start_chose_is_not_the_next_starts(hub: Hub):
    """An image and "fresh" chosen by one start (here the owner's own, by the API; before the fix also the
    link's) are not what a later start that names nothing gets. The start form shows the image the
    workspace ran last, preselected: the owner's choice stays a press of Start away, and only that POST
    starts it."""
    token = hub.user_token("ada")
    saved_once(hub, "ada", "thesis", token)
    browser = hub.browser_login("ada")
    assert preselected_image(browser, hub, "ada", "thesis") == SITE_IMAGE
    hub.start_workspace("ada", "thesis", token, image=OTHER_IMAGE, continue_from="fresh")
    chosen = latest(hub, "ada", "thesis")
    assert chosen["image"] == OTHER_IMAGE and chosen["restored_from"] is None, chosen
    hub.sh("ada", "thesis", "echo second > ~/marker.txt")
    hub.stop_workspace("ada", "thesis", token)
    assert preselected_image(browser, hub, "ada", "thesis") == OTHER_IMAGE
    # a start with no options at all (JupyterHub would hand it the kept ones), and one with empty options
    for body in (None, {"user_options": {}, "display_name": "thesis"}):
        r = requests.post(
            f"{hub.url}/hub/api/users/ada/servers/thesis", headers={"Authorization": f"token {token}"}, json=body
        )
        assert r.status_code in (201, 202), r.text
        assert hub.progress("ada", "thesis", token)[-1].get("ready")
        started = latest(hub, "ada", "thesis")
        assert started["image"] == SITE_IMAGE, (body, started)
        assert started["restored_from"] == started["number"] - 1, (body, started)
        assert hub.sh("ada", "thesis", "cat ~/marker.txt") == "second\n"
        hub.stop_workspace("ada", "thesis", token)
    assert not kept_choices(kept_options(hub, "ada")), kept_options(hub, "ada")


def test_the_gateways_start_says_its_options(hub: Hub, tmp_path):
    """`ssh owner+ws+start` continues from the latest with that execution's resource type, and the
    workspace's own image, whatever an earlier start chose or JupyterHub kept."""
    ben = Client(hub, tmp_path / "ben", "ben")
    ben.register()
    before = saved_once(hub, "ben", "thesis", ben.token)
    assert before["resource_type"] == "small", before
    # an earlier start chose another image (the owner's, or an administrator's for them)
    hub.start_workspace("ben", "thesis", hub.admin_token, image=OTHER_IMAGE, resource_type="small")
    hub.stop_workspace("ben", "thesis")
    r = ben.ssh("thesis+start", "cat ~/marker.txt; echo execution $WORKSPACE_EXECUTION")
    assert r.stdout.split()[:1] == ["mine"], r.stdout + r.stderr
    started = latest(hub, "ben", "thesis")
    assert started["image"] == SITE_IMAGE, started
    assert started["resource_type"] == "small", started
    assert started["restored_from"] == started["number"] - 1, started
    hub.stop_workspace("ben", "thesis")
