"""The instructor's course page in a real browser: the course's students with their workspaces, what runs
now and their storage; a student's workspace opens read-only (executions and live usage, no actions);
nothing beyond the course, and a student has no course page. Setting a course up from the page: a bad
roster line is a sentence (the form keeps what was typed), then the roster and starter in one step, and a
student's first start opens JupyterLab on the starter's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.conftest import login, watch_errors
from tests.browser.test_journey import wait_for_lab
from tests.integration.hub import USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "course"


@pytest.fixture(scope="module")
def course_hub(start_hub):
    return start_hub(
        WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}, "cs102": {"instructors": ["prof"]}}),
        WORKSPACE_CULL_INTERVAL="1",
        WORKSPACE_USAGE_SAMPLE_INTERVAL="1",
    )


def test_an_instructor_reads_the_course_and_a_students_workspace(course_hub, chromium):
    hub = course_hub
    student, ws = "stu", "lab1"
    token = hub.user_token(student)
    for name in ("prof", "stu2", "outa"):
        hub.create_user(name)
    assert hub.api("POST", "/groups/cs101").status_code == 201
    assert hub.api("POST", "/groups/cs101/users", json={"users": [student, "stu2"]}).status_code == 200
    hub.start_workspace(student, ws, token)
    hub.sh(student, ws, "head -c 200000 /dev/urandom > $HOME/answer.bin")
    hub.stop_workspace(student, ws, token)
    hub.start_workspace(student, ws, token)  # #2 runs while the instructor looks
    outsider = hub.user_token("outa")
    hub.start_workspace("outa", "mine", outsider)
    hub.stop_workspace("outa", "mine", outsider)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    pages = f"{hub.url}/services/workspace"

    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors = watch_errors(page)
    try:
        login(page, hub, "prof", USER_PASSWORD)
        page.goto(f"{pages}/workspaces")
        page.click("nav a:has-text('Course')")
        page.wait_for_url("**/services/workspace/course")
        course = page.locator(".course[data-course='cs101']")
        assert course.locator(".course-summary").inner_text() == "2 students, 1 running now"
        row = course.locator(f"tr.student[data-student='{student}']")
        text = row.inner_text().lower()
        assert " kb, 2 files" in text and "lab1 running #2" in text, text
        assert "none yet" in course.locator("tr.student[data-student='stu2']").inner_text()
        assert course.locator("tr.student[data-student='outa']").count() == 0
        page.screenshot(path=str(ARTIFACTS / "01-course.png"), full_page=True)

        # the student's workspace, read-only: executions and live usage, no start, stop or delete
        row.locator("a.workspace-link").click()
        page.wait_for_url(f"**/services/workspace/workspaces/{ws}?user={student}")
        assert "reading stu's workspace" in page.inner_text("#readonly")
        assert page.locator(".execution").evaluate_all("cards => cards.map(c => c.dataset.state)") == [
            "running",
            "stopped",
        ]
        assert "stopped: user" in page.inner_text(".execution[data-number='1']")
        states = page.locator(".execution[data-number='1'] .timeline li").all_text_contents()
        assert states[-1].startswith("stopped at ") and ", for " in states[-2], states  # each with its duration
        # the page's script asks the API for the student's usage (with ?user=): a sample arrives
        page.wait_for_function("document.querySelector('.usage').textContent.includes('CPU')", timeout=30_000)
        assert page.locator("main form, .container form").count() == 0
        assert page.locator("#open, #stop, .continue, .delete-output, .make-dataset").count() == 0
        page.screenshot(path=str(ARTIFACTS / "02-student-workspace.png"), full_page=True)

        # the same page's actions are refused when posted anyway
        xsrf = next(c["value"] for c in context.cookies() if c["name"] == "_xsrf")
        r = page.request.post(
            f"{pages}/workspaces/{ws}?user={student}",
            form={"_xsrf": xsrf, "action": "stop"},
            headers={"X-XSRFToken": xsrf},
        )
        assert r.status == 403 and "not start, stop or change it" in r.text(), r.text()
        assert hub.executions(student, ws)[-1]["state"] == "running"
        assert not errors, errors
    finally:
        context.close()

    # beyond the course, and a student: refused with a sentence (no console capture: the 403 is expected)
    context = chromium.new_context()
    page = context.new_page()
    try:
        login(page, hub, "prof", USER_PASSWORD)
        r = page.goto(f"{pages}/workspaces/mine?user=outa")
        assert r.status == 403 and "instructors (read-only)" in page.inner_text("#error-message")
        context.clear_cookies()
        login(page, hub, student, USER_PASSWORD)
        page.goto(f"{pages}/workspaces")
        assert page.locator("nav a:has-text('Course')").count() == 0
        r = page.goto(f"{pages}/course")
        assert r.status == 403 and "for instructors" in page.inner_text("#error-message")
        page.screenshot(path=str(ARTIFACTS / "03-student-refused.png"), full_page=True)
    finally:
        context.close()
    hub.stop_workspace(student, ws, token)


def test_an_instructor_sets_a_course_up_from_the_page(course_hub, chromium):
    hub = course_hub
    prof = hub.user_token("prof")
    hub.start_workspace("prof", "prep", prof)
    hub.sh("prof", "prep", "echo 'print(42)' > $HOME/assignment.py")
    hub.stop_workspace("prof", "prep", prof)
    pages = f"{hub.url}/services/workspace"
    context = chromium.new_context(viewport={"width": 1400, "height": 1100})
    page = context.new_page()
    errors = watch_errors(page)
    try:
        login(page, hub, "prof", USER_PASSWORD)
        page.goto(f"{pages}/course")
        section = page.locator(".course[data-course='cs102']")
        section.locator("details.setup summary").click()
        form = section.locator("form.course-setup")
        form.locator("textarea[name=roster]").fill("username\nkim\nlee/x\n")
        form.locator("input[name=workspace]").fill("week1")
        form.locator("select[name=starter]").select_option("prep:1")
        form.locator("button[type=submit]").click()
        assert page.inner_text("#error").startswith("Line 3 of the roster, “lee/x”, is not a username")
        form = page.locator(".course[data-course='cs102'] form.course-setup")
        assert form.locator("textarea[name=roster]").input_value().split() == ["username", "kim", "lee/x"]  # kept
        assert hub.api("GET", "/users/kim").status_code == 404  # nothing changed
        # the page came with its 400, which the browser logs; that one is expected, nothing else
        assert [e for e in errors if "status of 400" not in e] == [], errors
        errors.clear()
        roster = hub.data_dir / "cs102.csv"
        roster.write_text("username,name\nkim,Kim K.\nlee,Lee L.\n")
        form.locator("input.roster-file").set_input_files(str(roster))  # fills the box from the file
        page.wait_for_function(
            "document.querySelector('.course[data-course=cs102] textarea').value.includes('lee,Lee')"
        )
        form.locator("button[type=submit]").click()
        assert page.inner_text("#message").startswith("cs102: 2 student(s) (2 new user(s), 2 added, 0 removed")
        section = page.locator(".course[data-course='cs102']")
        assert (
            "Each student has the workspace “week1”, starting from prof/prep #1"
            in section.locator(".course-template").inner_text()
        )
        assert section.locator("tr.student").evaluate_all("rows => rows.map(r => r.dataset.student)") == ["kim", "lee"]
        assert "week1 new" in section.locator("tr.student[data-student='kim']").inner_text().lower()
        page.screenshot(path=str(ARTIFACTS / "04-course-set-up.png"), full_page=True)
        assert not errors, errors
    finally:
        context.close()

    # the student: the course's workspace is waiting; its first start opens on the starter's files
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    watch_errors(page, errors)
    try:
        login(page, hub, "kim", USER_PASSWORD)
        page.goto(f"{pages}/workspaces")
        row = page.locator("#workspaces tr[data-workspace='week1']")
        assert "new" in row.inner_text().lower()
        row.locator("button:has-text('Start')").click()
        wait_for_lab(page, "kim", "week1")
        assert hub.sh("kim", "week1", "cat $HOME/assignment.py") == "print(42)\n"
        page.screenshot(path=str(ARTIFACTS / "05-student-first-start.png"))
        page.goto(f"{pages}/workspaces/week1")
        assert "starter prof/prep #1" in page.inner_text(".execution[data-number='1']")
        hub.stop_workspace("kim", "week1", hub.user_token("kim"))
        assert not errors, errors
    finally:
        context.close()
