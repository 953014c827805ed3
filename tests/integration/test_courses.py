"""A course set up from a roster in one step (PUT /api/courses/{name}), against a real hub and containers:
bad input changes nothing; the roster's users and the group are made; each student's first start of the
course's workspace restores the instructor's starter with the course's resource type and dataset; the
starter's output cannot be deleted while it is one; a new roster removes members and keeps their data."""

from __future__ import annotations

import json

import pytest

from .hub import ADMIN_PASSWORD, Hub
from .test_cli import cli

TYPES = [{"name": "small", "cpu": 1, "memory": "1G"}, {"name": "large", "cpu": 2}]


@pytest.fixture(scope="module")
def course_hub(start_hub) -> Hub:
    return start_hub(
        WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}}), WORKSPACE_RESOURCE_TYPES=json.dumps(TYPES)
    )


def test_a_course_from_a_roster_in_one_step(course_hub: Hub):
    hub = course_hub
    prof = hub.user_token("prof")
    # the instructor's material: a starter home and a dataset made from it
    hub.start_workspace("prof", "prep", prof)
    hub.sh("prof", "prep", "mkdir -p week1 && echo 'print(42)' > week1/assignment.py && echo data > handout.txt")
    hub.stop_workspace("prof", "prep", prof)
    assert hub.service_call("POST", "/datasets", prof, json={"name": "handout"}).status_code == 201
    r = hub.service_call(
        "POST", "/datasets/prof/handout/versions", prof, json={"from_execution": {"workspace": "prep", "number": 1}}
    )
    assert r.status_code == 201, r.text
    template = {
        "workspace": "lab1",
        "resource_type": "small",
        "datasets": ["prof/handout"],
        "starter": {"workspace": "prep", "number": 1},
    }

    def put(token, body, course="cs101"):
        return hub.service_call("PUT", f"/courses/{course}", token, json=body)

    # bad input: a sentence, and nothing changes
    outsider = hub.user_token("eve")
    r = put(outsider, {"students": ["eve"]})
    assert r.status_code == 403 and "Only the instructors of “cs101”" in r.json()["message"], r.text
    r = put(prof, {"students": "username\nann\nb/ob\n", **template})
    assert r.status_code == 400 and r.json()["message"].startswith("Line 3 of the roster, “b/ob”, is not a username")
    r = put(prof, {"students": ["ann"], **template, "starter": {"workspace": "prep", "number": 9}})
    assert r.status_code == 404 and "no execution #9 of “prep”" in r.json()["message"], r.text
    r = put(prof, {"students": ["ann"], **template, "resource_type": "huge"})
    assert r.status_code == 400 and "There is no resource type “huge”" in r.json()["message"], r.text
    assert hub.service_call("POST", "/datasets", outsider, json={"name": "theirs"}).status_code == 201
    r = put(prof, {"students": ["ann"], **template, "datasets": ["eve/theirs"]})
    assert r.status_code == 403 and "only datasets you own" in r.json()["message"], r.text
    r = put(prof, {"students": ["ann"], "term": "fall"})
    assert r.status_code == 400 and "Unknown field(s) term" in r.json()["message"], r.text
    assert hub.api("GET", "/groups/cs101").status_code == 404
    assert hub.api("GET", "/users/ann").status_code == 404

    # one step: users, group, members, the datasets shared, each student's workspace
    r = put(prof, {"students": "username\nann\nbob, Bob Smith\n\n# late: cat\n", **template})
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["students"] == ["ann", "bob"] and done["created_users"] == ["ann", "bob"], done
    assert done["added"] == ["ann", "bob"] and done["removed"] == [] and done["shared"] == ["prof/handout"]
    assert done["workspaces_created"] == ["ann", "bob"]
    assert done["message"].startswith("cs101: 2 student(s) (2 new user(s), 2 added, 0 removed"), done
    assert hub.api("GET", "/groups/cs101").json()["users"] == ["ann", "bob"]

    ann = hub.user_token("ann")
    (ws,) = hub.service_api("/workspaces", ann).json()
    assert ws["name"] == "lab1" and ws["executions"] == 0
    events = hub.start_workspace("ann", "lab1", ann)
    messages = [e["message"] for e in events]
    assert "Execution #1 starts from the starter of the course cs101 (prof/prep #1)" in messages, messages
    out = hub.sh("ann", "lab1", "cat $HOME/week1/assignment.py /input0/handout.txt")
    assert out == "print(42)\ndata\n", out
    hub.sh("ann", "lab1", "echo mine > $HOME/answer.txt")
    hub.stop_workspace("ann", "lab1", ann)
    (ex,) = hub.executions("ann", "lab1")
    assert ex["starter"] == "prof/prep #1" and ex["restored_from"] is None and ex["parent"] is None, ex
    assert ex["resource_type"] == "small" and [d["ref"] for d in ex["datasets"]] == ["prof/handout:1"], ex
    # the second start continues the student's own work, not the starter
    events = hub.start_workspace("ann", "lab1", ann)
    assert "Execution #2 continues from #1" in [e["message"] for e in events]
    assert hub.sh("ann", "lab1", "cat $HOME/answer.txt") == "mine\n"
    hub.stop_workspace("ann", "lab1", ann)

    # the starter's output stays while it is one
    r = hub.service_call("DELETE", "/workspaces/prep/executions/1/output", prof)
    assert r.status_code == 409 and "starter of the course cs101" in r.json()["message"], r.text

    # the instructor's view, and the CLI
    (course,) = hub.service_api("/courses", prof).json()
    assert course["template"]["starter"] == {"owner": "prof", "workspace": "prep", "number": 1, "has_output": True}
    assert course["template"]["resource_type"] == "small" and course["template"]["datasets"] == ["prof/handout"]

    # a new roster: bob leaves (keeping his workspace), cat joins; the CLI reads the roster file
    roster = hub.data_dir / "roster.csv"
    roster.write_text("username,name\nann,Ann\ncat,Cat\n")
    out = cli(
        hub,
        prof,
        "course-setup",
        "cs101",
        "--roster",
        str(roster),
        "--workspace",
        "lab1",
        "--type",
        "small",
        "--dataset",
        "prof/handout",
        "--starter",
        "prep:1",
    )
    assert "cs101: 2 student(s) (1 new user(s), 1 added, 1 removed from the group)" in out, out
    assert hub.api("GET", "/groups/cs101").json()["users"] == ["ann", "cat"]
    bob = hub.user_token("bob")
    assert [w["name"] for w in hub.service_api("/workspaces", bob).json()] == ["lab1"]


def test_an_administrator_sets_up_any_course_and_names_are_checked(course_hub: Hub):
    hub = course_hub
    admin = hub.user_token(hub.settings.admin_user, ADMIN_PASSWORD)
    r = hub.service_call("PUT", "/courses/ML 200", admin, json={"students": ["dan"]})
    assert r.status_code == 400 and "cannot be a course name" in r.json()["message"], r.text
    r = hub.service_call("PUT", "/courses/ml200", admin, json={"students": ["dan", "eli"]})
    assert r.status_code == 200 and r.json()["created_users"] == ["dan", "eli"], r.text
    assert hub.api("GET", "/groups/ml200").json()["users"] == ["dan", "eli"]
    # an instructor of cs101 is no instructor of ml200
    r = hub.service_call("PUT", "/courses/ml200", hub.user_token("prof"), json={"students": []})
    assert r.status_code == 403, r.text
    # set up again with the same roster: nothing new
    done = hub.service_call("PUT", "/courses/ml200", admin, json={"students": ["dan", "eli"]}).json()
    assert (done["created_users"], done["added"], done["removed"], done["workspaces_created"]) == ([], [], [], [])
