"""A user's image runs for someone else only once approved for them (#28), against a real hub, engine and
build: with a public image any student could publish, another student's workspace ran the publisher's code
as that student. Here Bob cannot start Alice's public image until an administrator approves it (on the Images
page, by a POST with the XSRF token); after Alice rebuilds it he cannot again; a course's instructor approves
it for the course's students only. One image, built twice, serves the module (builds are slow)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from .hub import ADMIN_PASSWORD, Hub
from .test_user_images import WORKSPACE, wait_image

COURSE = "cs101"


@pytest.fixture(scope="module")
def approval_hub(start_hub) -> Hub:
    return start_hub(WORKSPACE_COURSES=json.dumps({COURSE: {"instructors": ["prof"]}}))


@pytest.fixture(scope="module")
def alice_image(approval_hub: Hub) -> dict:
    """Alice's public image `tools`, built once: a script that leaves a mark of its version."""
    hub = approval_hub
    alice = f"alice{uuid.uuid4().hex[:6]}"
    token = hub.user_token(alice)
    build(hub, token, "v1")
    return {"owner": alice, "token": token, "name": f"{alice}/tools"}


def build(hub: Hub, token: str, version: str, visibility: str = "public") -> dict:
    body = {
        "name": "tools",
        "from": "workspace-base:latest",
        "script": f"echo {version} > /opt/tools-version\n",
        "visibility": visibility,
    }
    r = hub.service_call("POST", "/images", token, json=body)
    assert r.status_code == 202, r.text
    record = wait_image(hub, token, r.json()["name"])
    assert record["state"] == "ready", record
    return record


def refused_start(hub: Hub, user: str, token: str, server: str, image: str) -> str:
    """A start naming `image`, refused before anything runs: its sentence."""
    r = hub.spawn(user, server, token, {"image": image})
    if r.status_code in (201, 202):  # the hub answered before the check: the refusal ends the progress
        events = hub.progress(user, server, token)
        assert events[-1].get("failed"), f"the start of {image} was not refused: {events[-1]}"
        hub.wait_stopped(user, server)
        return events[-1]["message"]
    assert r.status_code == 403, r.text
    return r.json()["message"]


def listed(hub: Hub, token: str, name: str) -> dict:
    (image,) = [i for i in hub.service_call("GET", "/images", token).json() if i["name"] == name]
    return image


def test_bob_starts_alices_public_image_only_once_an_administrator_approved_this_build(
    approval_hub: Hub, alice_image: dict
):
    hub, name = approval_hub, alice_image["name"]
    bob = f"bob{uuid.uuid4().hex[:6]}"
    tb = hub.user_token(bob)

    # public: a start of it by bob (the attack: its code would run as him) is refused with a sentence
    message = refused_start(hub, bob, tb, "attack", name)
    assert f"was built by {alice_image['owner']}" in message and "not approved for you" in message, message
    assert not hub.containers(user=bob), "nothing of the refused start runs"
    # he sees it, and who built it, but neither the API nor the form offers it to start
    image = listed(hub, tb, name)
    assert image["owner"] == alice_image["owner"] and image["startable"] is False and image["approvals"] == []
    browser = hub.browser_login(bob)
    form = browser.get(f"{hub.url}/hub/spawn/{bob}/attack", timeout=30)
    assert form.status_code == 200 and name not in form.text, form.text[-2000:]
    # nor may he build on it (his own image would run its code as him)
    r = hub.service_call("POST", "/images", tb, json={"name": "mine", "from": name, "apt": "cowsay"})
    assert r.status_code == 400 and "you may use" in r.json()["message"], r.text

    # neither bob nor an instructor approves for everyone; a cookie without the XSRF token changes nothing
    r = hub.service_call("POST", f"/images/{name}/approve", tb, json={})
    assert r.status_code == 403 and "Only an administrator" in r.json()["message"], r.text
    r = hub.service_call("POST", f"/images/{name}/approve", hub.user_token("prof"), json={"for": "public"})
    assert r.status_code == 403 and "Only an administrator" in r.json()["message"], r.text
    admin_name = hub.settings.admin_user
    admin = hub.browser_login(admin_name, password=ADMIN_PASSWORD)
    page = admin.get(f"{hub.url}/services/workspace/images", timeout=30)
    assert page.status_code == 200 and 'id="pending-images"' in page.text and f'data-name="{name}"' in page.text
    api = f"{hub.url}/services/workspace/api/images/{name}/approve"
    r = admin.post(api, json={"for": "public"}, timeout=30)
    assert r.status_code == 403 and "X-XSRFToken" in r.json()["message"], r.text
    assert listed(hub, tb, name)["startable"] is False
    # the administrator's approval, as the page's button sends it
    xsrf = admin.cookies.get("_xsrf", path="/services/workspace/")
    r = admin.post(api, json={"for": "public", "build": 1}, headers={"X-XSRFToken": xsrf}, timeout=30)
    assert r.status_code == 200, r.text
    (approval,) = r.json()["approvals"]
    assert approval["by"] == admin_name and approval["current"] and approval["build"] == 1, approval

    # now bob's form offers it, saying who built it and who approved it, and it starts
    said = f"built by {alice_image['owner']}, approved by {admin_name}"
    form = browser.get(f"{hub.url}/hub/spawn/{bob}/approved", timeout=30)
    assert said in form.text, form.text[-3000:]
    page = browser.get(f"{hub.url}/services/workspace/workspaces", timeout=30)  # its New-workspace form
    assert said in page.text, page.text[-3000:]
    hub.start_workspace(bob, "approved", tb, image=name)
    assert hub.sh(bob, "approved", "cat /opt/tools-version").strip() == "v1"
    hub.stop_workspace(bob, "approved", tb)

    # alice rebuilds it: new code, which runs for nobody else until approved again
    rebuilt = build(hub, alice_image["token"], "v2")
    assert rebuilt["build"] == 2
    (stale,) = listed(hub, tb, name)["approvals"]
    assert stale["build"] == 1 and stale["current"] is False
    message = refused_start(hub, bob, tb, "after-rebuild", name)
    assert "not approved for you" in message, message
    assert name not in browser.get(f"{hub.url}/hub/spawn/{bob}/after-rebuild", timeout=30).text
    assert f'value="{name}"' not in browser.get(f"{hub.url}/services/workspace/workspaces", timeout=30).text
    # the page approved build 1; build 2 needs its own reading
    r = admin.post(api, json={"for": "public", "build": 1}, headers={"X-XSRFToken": xsrf}, timeout=30)
    assert r.status_code == 409 and "rebuilt since you looked" in r.json()["message"], r.text
    # alice, its owner, always may
    hub.start_workspace(alice_image["owner"], "own", alice_image["token"], image=name)
    assert hub.sh(alice_image["owner"], "own", "cat /opt/tools-version").strip() == "v2"
    hub.stop_workspace(alice_image["owner"], "own", alice_image["token"])


def test_a_course_instructor_approves_it_for_the_course_students_only(approval_hub: Hub, alice_image: dict):
    hub, name = approval_hub, alice_image["name"]
    student, outsider = f"stud{uuid.uuid4().hex[:6]}", f"out{uuid.uuid4().hex[:6]}"
    hub.create_user(student)
    if hub.api("GET", f"/groups/{COURSE}").status_code == 404:
        assert hub.api("POST", f"/groups/{COURSE}").status_code == 201
    # alice shares with her course; the student is in it, the outsider not
    r = hub.api("POST", f"/groups/{COURSE}/users", json={"users": [student, alice_image["owner"]]})
    assert r.status_code == 200, r.text
    # tokens made after the change (the service keeps what a token's user was for a while)
    ts, to, tp = hub.user_token(student), hub.user_token(outsider), hub.user_token("prof")
    ta = hub.user_token(alice_image["owner"])

    r = hub.service_call("PATCH", f"/images/{name}", ta, json={"visibility": f"group:{COURSE}"})
    assert r.status_code == 200, r.text
    assert "not approved for you" in refused_start(hub, student, ts, "course", name)
    assert listed(hub, ts, name)["startable"] is False
    # the instructor sees what waits for them, and approves it for the course (not for everyone), here from
    # the command line
    pending = hub.service_call("GET", "/images/pending", tp).json()
    assert [i["name"] for i in pending] == [name], pending
    assert hub.service_call("GET", "/images/pending", ts).json() == []
    r = hub.service_call("POST", f"/images/{name}/approve", tp, json={"for": "public"})
    assert r.status_code == 409, r.text
    env = dict(os.environ, WORKSPACE_URL=hub.url, WORKSPACE_TOKEN=tp)
    env.pop("JUPYTERHUB_API_TOKEN", None)
    p = subprocess.run([WORKSPACE, "image", "pending"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0 and name in p.stdout, (p.stdout, p.stderr)
    p = subprocess.run([WORKSPACE, "image", "approve", name], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0 and f"approved for group:{COURSE} by prof" in p.stdout, (p.stdout, p.stderr)
    assert listed(hub, ts, name)["startable"] is True
    form = hub.browser_login(student).get(f"{hub.url}/hub/spawn/{student}/course", timeout=30)
    assert f"built by {alice_image['owner']}, approved by prof" in form.text, form.text[-3000:]
    # outside the course: made public, the outsider sees it, and the course's approval is not theirs
    r = hub.service_call("PATCH", f"/images/{name}", ta, json={"visibility": "public"})
    assert r.status_code == 200, r.text
    assert listed(hub, to, name)["startable"] is False
    assert "not approved for you" in refused_start(hub, outsider, to, "course", name)
    assert listed(hub, ts, name)["startable"] is True
    # revoked: the course's students are refused again
    r = hub.service_call("POST", f"/images/{name}/revoke", tp, json={"for": f"group:{COURSE}"})
    assert r.status_code == 200, r.text
    assert "not approved for you" in refused_start(hub, student, ts, "course", name)
