"""A course's labelling team (#36): one Label Studio for the course, signed in with the hub's accounts, the
instructor its manager, a reviewer who accepts, students who label the tasks split between them, and the
accepted labels exported as a dataset version. Attack tests: other courses, outsiders, forged names and
roles, cross-site requests, and what each role may not do."""

from __future__ import annotations

import json
import time

import pytest
import requests

from .hub import Hub
from .test_datasets import upload
from .test_labelling import images_tar, labelling, png  # noqa: F401  (fixture)

COURSES = {"vision": {"instructors": ["prof"]}, "other": {"instructors": ["prof2"]}}


@pytest.fixture(scope="module")
def team_hub(start_hub) -> Hub:
    return start_hub(WORKSPACE_COURSES=json.dumps(COURSES))


def as_user(hub: Hub, name: str) -> requests.Session:
    s = requests.Session()
    s.headers["Authorization"] = f"token {hub.user_token(name)}"
    return s


def wait_for(s: requests.Session, url: str, timeout: float = 300) -> requests.Response:
    began, r = time.monotonic(), None
    while time.monotonic() - began < timeout:
        r = s.get(url, timeout=60)
        if r.status_code == 200:
            return r
        time.sleep(1)
    raise AssertionError(f"{url} did not answer in {timeout} s: {r and (r.status_code, r.text[:300])}")


def test_a_course_labels_reviews_and_exports_together(team_hub: Hub, labelling):  # noqa: F811
    hub = team_hub
    prof, prof2 = hub.user_token("prof"), hub.user_token("prof2")
    for token, course, students in ((prof, "vision", ["ann", "ben", "rita"]), (prof2, "other", ["oz"])):
        r = hub.service_call("PUT", f"/courses/{course}", token, json={"students": students})
        assert r.status_code == 200, r.text
    assert hub.service_call("POST", "/datasets", prof, json={"name": "pets"}).status_code == 201
    pictures = {"pets/cat.png": png(40, 30, (220, 30, 30)), "pets/dog.png": png(30, 40, (30, 30, 220))}
    assert upload(hub, prof, "prof/pets", "pets.tar.gz", images_tar(pictures), unpack=True).status_code == 201

    def new(token, course="vision", **body):
        return hub.service_call("POST", f"/courses/{course}/labelling", token, json=body)

    good = {"title": "Pets", "dataset": "prof/pets", "labels": ["cat", "dog"], "reviewers": ["rita"]}
    # bad input: a sentence each, and no project
    assert new(hub.user_token("ann"), **good).status_code == 403
    r = new(prof, **{**good, "reviewers": ["oz"]})
    assert r.status_code == 400 and "must be students of the course" in r.json()["message"], r.text
    assert new(prof, **{**good, "title": "x"}).status_code == 400
    assert new(prof, **{**good, "labels": []}).status_code == 400
    assert new(prof, **{**good, "labels": ["<b>"]}).status_code == 400
    assert new(prof, **{**good, "dataset": "prof2/nothing"}).status_code == 403
    assert new(prof, **{**good, "owner": "x"}).status_code == 400
    assert hub.service_call("GET", "/courses/vision/labelling", prof).json() == []

    began = time.monotonic()
    r = new(prof, **good)
    assert r.status_code == 201, r.text
    project = r.json()
    key, base = project["key"], hub.url + project["url"]
    assert project["url"] == f"/services/workspace/labelling/{key}/" and project["role"] == "manager"

    people = {name: as_user(hub, name) for name in ("prof", "ann", "ben", "rita", "oz")}
    wait_for(people["prof"], base + "api/projects/")
    print(f"the course's Label Studio answered {time.monotonic() - began:.1f} s after the project was made")
    (ls_project,) = people["prof"].get(base + "api/projects/", timeout=60).json()["results"]
    pid = ls_project["id"]
    assert ls_project["title"] == "Pets"
    # each is who the hub says, in the role the course gives
    for name, role in (("ann", "annotator"), ("rita", "reviewer"), ("prof", "manager")):
        me = people[name].get(base + "api/current-user/whoami", timeout=60)
        assert me.status_code == 200 and me.json()["username"] == name, me.text
        listed = hub.service_call("GET", "/courses/vision/labelling", hub.user_token(name)).json()
        assert [(p["key"], p["role"]) for p in listed] == [(key, role)], listed

    # the tasks are split: the label stream gives two students two different images
    tasks = {}
    for name in ("ann", "ben"):
        nxt = people[name].get(base + f"api/projects/{pid}/next/", timeout=60)
        assert nxt.status_code == 200, nxt.text
        tasks[name] = nxt.json()
    assert tasks["ann"]["id"] != tasks["ben"]["id"], tasks
    annotations = {}
    for name, label in (("ann", "cat"), ("ben", "dog")):
        value = {"x": 5, "y": 5, "width": 50, "height": 50, "rotation": 0, "rectanglelabels": [label]}
        result = [{"from_name": "box", "to_name": "image", "type": "rectanglelabels", "value": value}]
        r = people[name].post(base + f"api/tasks/{tasks[name]['id']}/annotations/", json={"result": result}, timeout=60)
        assert r.status_code == 201, r.text
        annotations[name] = r.json()["id"]

    # a labeller may not accept, edit another's work, change the project, add a source or export
    ann = people["ann"]
    assert ann.patch(base + f"api/annotations/{annotations['ann']}/", json={"ground_truth": True}).status_code == 403
    assert ann.patch(base + f"api/annotations/{annotations['ben']}/", json={"result": []}).status_code == 403
    assert ann.patch(base + f"api/projects/{pid}/", json={"title": "Mine"}).status_code == 403
    storage = {"project": pid, "path": "/etc", "use_blob_urls": True}
    assert ann.post(base + "api/storages/localfiles/", json=storage).status_code == 403
    assert ann.get(base + f"api/projects/{pid}/export?exportType=JSON").status_code == 403
    r = hub.service_call(
        "POST", f"/courses/vision/labelling/{key}/export", hub.user_token("ann"), json={"dataset": "x"}
    )
    assert r.status_code == 403, r.text
    # a name or a role the client sends is not taken
    forged = {"X-Workspace-User": "prof", "X-Workspace-Role": "manager", "X-Workspace-Proxy-Secret": "guess"}
    me = ann.get(base + "api/current-user/whoami", headers=forged, timeout=60)
    assert me.json()["username"] == "ann", me.text
    assert ann.patch(base + f"api/projects/{pid}/", json={"title": "Mine"}, headers=forged).status_code == 403
    # the login cookie does not count for a request another site makes
    browser = hub.browser_login("ben")
    cross = browser.patch(
        base + f"api/annotations/{annotations['ben']}/", json={"result": []}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert cross.status_code in (302, 403), cross.status_code
    page = browser.get(base + "projects/", timeout=60)
    assert page.status_code == 200, page.text[-1500:]  # the same cookie reads its pages

    # the Labelling page's forms: without the XSRF token nothing is posted; with it, a student starts and
    # exports nothing
    pages = f"{hub.url}/services/workspace/labelling"
    assert browser.get(pages, timeout=60).status_code == 200
    xsrf = browser.cookies.get("_xsrf", path="/services/workspace/")
    start = {"action": "new", "course": "vision", "title": "Mine", "dataset": "prof/pets", "labels": "a"}
    assert browser.post(pages, data=start, timeout=60).status_code == 403
    r = browser.post(pages, data={**start, "_xsrf": xsrf}, timeout=60)
    assert r.status_code == 403 and "can start a labelling project" in r.text, r.status_code
    export = {"action": "export", "course": "vision", "key": key, "dataset": "stolen", "_xsrf": xsrf}
    r = browser.post(pages, data=export, timeout=60)
    assert r.status_code == 403 and "export a labelling project" in r.text, r.status_code
    assert [p["title"] for p in hub.service_call("GET", "/courses/vision/labelling", prof).json()] == ["Pets"]

    # an export before anything is accepted says so
    r = hub.service_call("POST", f"/courses/vision/labelling/{key}/export", prof, json={"dataset": "pets-labels"})
    assert r.status_code == 409 and "accepted" in r.json()["message"], r.text
    # the reviewer accepts both: one by marking it ground truth (the API), one by pressing Update on it in
    # Label Studio (the community edition's interface has no accept button; a reviewer's update accepts)
    rita = people["rita"]
    r = rita.patch(base + f"api/annotations/{annotations['ann']}/", json={"ground_truth": True}, timeout=60)
    assert r.status_code == 200 and r.json()["ground_truth"], r.text
    bens = rita.get(base + f"api/annotations/{annotations['ben']}/", timeout=60).json()
    assert not bens["ground_truth"], bens
    r = rita.patch(base + f"api/annotations/{annotations['ben']}", json={"result": bens["result"]}, timeout=60)
    assert r.status_code == 200, r.text
    assert rita.get(base + f"api/annotations/{annotations['ben']}/", timeout=60).json()["ground_truth"]
    r = hub.service_call("POST", f"/courses/vision/labelling/{key}/export", prof, json={"dataset": "pets-labels"})
    assert r.status_code == 201 and r.json()["files"] == 1 and r.json()["origin"] == "labelling", r.text
    hub.start_workspace("prof", "check", prof, datasets=["prof/pets-labels"])
    exported = json.loads(hub.sh("prof", "check", "cat /input0/Pets-json.json"))
    labels = sorted(t["annotations"][0]["result"][0]["value"]["rectanglelabels"][0] for t in exported)
    assert labels == ["cat", "dog"] and all(t["annotations"][0]["ground_truth"] for t in exported), exported
    hub.stop_workspace("prof", "check", prof)
    # the labelled version stays while the project does
    r = hub.service_call("DELETE", "/datasets/prof/pets/versions/1", prof)
    assert r.status_code == 409 and "labelling project" in r.json()["message"], r.text

    # a configuration Label Studio refuses: its managers are told why it does not start, its students not
    refused = (
        '<View><Image name="i" value="$image"/><Choices name="c" toName="none"><Choice value="a"/></Choices></View>'
    )
    broken = {"title": "Broken", "dataset": "prof/pets", "config": refused}
    assert new(prof, **broken).status_code == 201
    deadline, said = time.monotonic() + 180, None
    while time.monotonic() < deadline and not said:
        listed = {p["title"]: p for p in hub.service_call("GET", "/courses/vision/labelling", prof).json()}
        said = listed["Broken"]["message"]
        time.sleep(2)
    assert said and said.startswith("Its Label Studio does not start: ") and 'toName="none"' in said, listed
    seen = {p["title"]: p for p in hub.service_call("GET", "/courses/vision/labelling", hub.user_token("ann")).json()}
    assert seen["Broken"]["message"] is None and seen["Broken"]["role"] == "annotator", seen

    # another course's student, and nobody, get nothing
    oz = people["oz"]
    assert oz.get(base + "api/projects/", timeout=60).status_code == 404
    assert oz.get(base + "projects/", timeout=60).status_code == 404
    assert hub.service_call("GET", "/courses/vision/labelling", hub.user_token("oz")).status_code == 404
    assert hub.service_call("GET", f"/courses/vision/labelling/{key}", hub.user_token("oz")).status_code == 404
    anonymous = requests.get(base + "projects/", headers={"Accept": "text/html"}, timeout=30, allow_redirects=False)
    assert anonymous.status_code == 302 and "/hub/" in anonymous.headers["Location"], anonymous.status_code
    assert requests.get(base + "api/projects/", timeout=30).status_code == 403
