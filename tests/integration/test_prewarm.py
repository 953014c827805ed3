"""A course's pre-warm on a single host (a real hub, its service and the course page): the answer comes at
once (every home and the image are on the one host already), only the course's instructors and
administrators ask, and a request with the login cookie needs the XSRF token. On a swarm the job itself
runs: tests/cluster/test_prewarm.py."""

from __future__ import annotations

import json

import pytest
import requests

from .hub import ADMIN_PASSWORD, Hub


@pytest.fixture(scope="module")
def course_hub(start_hub) -> Hub:
    return start_hub(WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}, "ml200": {"instructors": []}}))


def test_on_one_host_the_answer_comes_at_once_and_only_for_the_courses_instructors(course_hub: Hub):
    hub = course_hub
    prof = hub.user_token("prof")
    r = hub.service_call("PUT", "/courses/cs101", prof, json={"students": ["pwann"], "workspace": "lab1"})
    assert r.status_code == 200, r.text
    student, outsider = hub.user_token("pwann"), hub.user_token("pweve")
    admin = hub.user_token(hub.settings.admin_user, ADMIN_PASSWORD)

    # a student of the course, a user of no course, an instructor of another course: refused, both ways
    for token in (student, outsider):
        for method in ("POST", "GET"):
            r = hub.service_call(method, "/courses/cs101/prewarm", token)
            assert r.status_code == 403, (method, r.text)
            assert r.json()["message"] == "Only the instructors of “cs101” (and administrators) may pre-warm it."
    assert hub.service_call("POST", "/courses/ml200/prewarm", prof).status_code == 403

    # the instructor: at once, and the sentence says why there is nothing to do
    for method in ("POST", "GET"):
        r = hub.service_call(method, "/courses/cs101/prewarm", prof)
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["state"] == "done" and answer["single_host"] is True, answer
        assert "one host" in answer["message"] and "nothing to pre-warm" in answer["message"], answer
    # in the instructor's language
    r = requests.post(
        f"{hub.url}/services/workspace/api/courses/cs101/prewarm",
        headers={"Authorization": f"token {prof}", "Accept-Language": "zh-CN"},
        timeout=30,
    )
    assert r.status_code == 200 and "无需预热" in r.json()["message"], r.text
    # an administrator, for any course
    r = hub.service_call("POST", "/courses/ml200/prewarm", admin)
    assert r.status_code == 200 and r.json()["single_host"] is True, r.text

    # the course page offers no pre-warm on one host (on a swarm it does: tests/cluster/test_prewarm.py)
    page = requests.get(f"{hub.url}/services/workspace/course", headers={"Authorization": f"token {prof}"}, timeout=30)
    assert page.status_code == 200 and "Set up this course" in page.text, page.text[-2000:]
    assert "Pre-warm the course" not in page.text and "/prewarm" not in page.text


def test_the_login_cookie_needs_the_xsrf_token(course_hub: Hub):
    hub = course_hub
    hub.user_token("prof")
    browser = hub.browser_login("prof")
    api = f"{hub.url}/services/workspace/api/courses/cs101/prewarm"
    # a form of another site posts with the cookie alone: refused, with what a script must send instead
    r = browser.post(api, timeout=30)
    assert r.status_code == 403 and "X-XSRFToken" in r.json()["message"], r.text
    r = browser.post(api, headers={"X-XSRFToken": "not-the-token"}, timeout=30)
    assert r.status_code == 403, r.text
    xsrf = browser.cookies.get("_xsrf", path="/services/workspace/")
    r = browser.post(api, headers={"X-XSRFToken": xsrf}, timeout=30)
    assert r.status_code == 200 and r.json()["single_host"] is True, r.text
    # a student's browser with the token is still no instructor
    hub.user_token("pwann")
    student = hub.browser_login("pwann")
    r = student.post(
        api, headers={"X-XSRFToken": student.cookies.get("_xsrf", path="/services/workspace/")}, timeout=30
    )
    assert r.status_code == 403, r.text
