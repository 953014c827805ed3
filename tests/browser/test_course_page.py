"""The instructor's course page in a real browser: the course's students with their workspaces, what runs
now and their storage; a student's workspace opens read-only (executions and live usage, no actions);
nothing beyond the course, and a student has no course page."""

from __future__ import annotations

import json
from pathlib import Path

from tests.browser.conftest import login
from tests.integration.hub import USER_PASSWORD

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "course"


def test_an_instructor_reads_the_course_and_a_students_workspace(start_hub, chromium):
    hub = start_hub(WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}}),
                    WORKSPACE_CULL_INTERVAL="1", WORKSPACE_USAGE_SAMPLE_INTERVAL="1")
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
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))
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
            "running", "stopped"]
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
        r = page.request.post(f"{pages}/workspaces/{ws}?user={student}", form={"_xsrf": xsrf, "action": "stop"},
                              headers={"X-XSRFToken": xsrf})
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
