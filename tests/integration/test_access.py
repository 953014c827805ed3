"""JupyterHub RBAC for the workspace API: an instructor (the custom scope `custom:workspaces:read`
filtered to their course's group) reads their students' workspaces, storage and accounting, and
changes nothing; nobody else reads anyone else's."""

from __future__ import annotations

import json

import pytest

from .hub import Hub
from .test_cli import cli


@pytest.fixture(scope="module")
def course_hub(start_hub) -> Hub:
    return start_hub(WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}}))


def test_an_instructor_reads_the_course_students_workspaces_and_changes_nothing(course_hub: Hub):
    hub = course_hub
    student, outsider = hub.user_token("stu"), hub.user_token("outa")
    prof = hub.user_token("prof")
    assert hub.api("POST", "/groups/cs101").status_code == 201
    assert hub.api("POST", "/groups/cs101/users", json={"users": ["stu"]}).status_code == 200
    hub.start_workspace("stu", "lab1", student)
    hub.stop_workspace("stu", "lab1", student)
    hub.start_workspace("outa", "mine", outsider)
    hub.stop_workspace("outa", "mine", outsider)

    rows = hub.service_api("/workspaces", prof, user="stu")
    assert rows.status_code == 200 and [w["name"] for w in rows.json()] == ["lab1"], rows.text
    ex = hub.service_api("/workspaces/lab1/executions/1", prof, user="stu")
    assert ex.status_code == 200 and ex.json()["state"] == "stopped"
    assert hub.service_api("/workspaces/lab1/executions/1/usage", prof, user="stu").status_code == 200
    assert hub.service_api("/storage", prof, user="stu").json()["user"] == "stu"
    report = hub.service_api("/accounting", prof, user="stu").json()
    assert [u["user"] for u in report["users"]] == ["stu"]
    # the course's member list comes from the hub itself (the role's read:groups)
    members = hub.api("GET", "/groups/cs101", token=prof)
    assert members.status_code == 200 and members.json()["users"] == ["stu"], members.text

    # the course: its students with their workspaces (the course page's API), and the CLI's --user
    r = hub.service_api("/courses", prof)
    assert r.status_code == 200, r.text
    (course,) = r.json()
    assert course["name"] == "cs101" and course["running"] == 0 and [s["name"] for s in course["students"]] == ["stu"]
    assert course["students"][0]["workspaces"] == [
        {"name": "lab1", "state": "stopped", "number": 1, "stop_reason": "user"}
    ], course
    r = hub.service_api("/courses", student)
    assert r.status_code == 403 and "Courses are for instructors" in r.json()["message"]
    out = cli(hub, prof, "courses")
    assert out.startswith("cs101: 1 student, 0 running now\n  stu ") and "lab1 #1 stopped" in out, out
    assert cli(hub, prof, "ls", "--user", "stu").startswith("lab1 ")
    assert cli(hub, prof, "executions", "lab1", "--user", "stu").startswith("#1    stopped")
    assert "instructors (read-only)" in cli(hub, prof, "ls", "--user", "outa", ok=False)

    # read-only: no deleting, no cleanup for a student
    r = hub.service_call("DELETE", "/workspaces/lab1/executions/1/output", prof, params={"user": "stu"})
    assert r.status_code == 403 and "instructors (read-only)" in r.json()["message"], r.text
    assert hub.service_call("POST", "/storage/cleanup", prof, params={"user": "stu"}, json={}).status_code == 403
    assert hub.executions("stu", "lab1")[0]["has_output"]
    # not beyond the course, and not the other way round
    assert hub.service_api("/workspaces", prof, user="outa").status_code == 403
    assert hub.service_api("/workspaces", student, user="outa").status_code == 403
    assert hub.service_api("/workspaces", student, user="prof").status_code == 403
    assert hub.service_api("/accounting", prof, all="true").status_code == 403
