"""The Labelling page in a real browser (#36): an instructor starts a course's labelling project from its form
(a bad title is a sentence, the form keeping what was typed), then finds it listed with the link that opens
its Label Studio; a student of the course sees it with their role and no forms; a user in no course is told
who makes projects. The page never waits for a Label Studio (tests/integration/test_labelling_team.py uses
one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import USER_PASSWORD
from tests.integration.test_datasets import upload
from tests.integration.test_labelling import images_tar, labelling, png  # noqa: F401  (fixture)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "labelling-page"


@pytest.fixture(scope="module")
def lab_hub(start_hub):
    return start_hub(WORKSPACE_COURSES=json.dumps({"lab": {"instructors": ["teach"]}}))


def test_an_instructor_starts_a_project_and_a_student_finds_it(lab_hub, chromium, labelling):  # noqa: F811
    hub = lab_hub
    teach = hub.user_token("teach")
    r = hub.service_call("PUT", "/courses/lab", teach, json={"students": ["stu", "rev"]})
    assert r.status_code == 200, r.text
    assert hub.service_call("POST", "/datasets", teach, json={"name": "pets"}).status_code == 201
    pictures = {"pets/cat.png": png(40, 30, (220, 30, 30)), "pets/dog.png": png(30, 40, (30, 30, 220))}
    r = upload(hub, teach, "teach/pets", "pets.tar.gz", images_tar(pictures), unpack=True)
    assert r.status_code == 201, r.text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    pages = f"{hub.url}/services/workspace"

    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors = watch_errors(page)
    try:
        login(page, hub, "teach", USER_PASSWORD)
        page.click("nav a:has-text('Labelling')")
        page.wait_for_url("**/services/workspace/labelling")
        assert page.locator("nav a.active").inner_text() == "Labelling"
        course = page.locator(".labelling-course[data-course='lab']")
        assert "No labelling projects yet." in course.inner_text()
        form = course.locator("form.labelling-new")
        # the dataset field offers the instructor's own datasets
        assert form.locator("datalist option").evaluate_all("os => os.map(o => o.value)") == ["teach/pets"]

        # a bad title: the sentence, with its status, and the form keeps the other fields
        form.locator("input[name=title]").fill("ab")
        form.locator("input[name=dataset]").fill("teach/pets")
        form.locator("input[name=labels]").fill("cat, dog")
        form.locator("input[name=reviewers]").fill("rev")
        with page.expect_navigation(timeout=120_000) as sent:
            form.locator("button[type=submit]").click()
        assert sent.value.status == 400
        assert page.inner_text("#error") == "A labelling project's “title” has 3–50 characters, like “Pets: boxes”."
        form = page.locator(".labelling-course[data-course='lab'] form.labelling-new")
        kept = {f: form.locator(f"input[name={f}]").input_value() for f in ("title", "dataset", "labels", "reviewers")}
        assert kept == {"title": "ab", "dataset": "teach/pets", "labels": "cat, dog", "reviewers": "rev"}, kept
        assert hub.service_call("GET", "/courses/lab/labelling", teach).json() == []  # nothing made
        assert [e for e in errors if "status of 400" not in e] == [], errors  # the page's own 400, expected
        errors.clear()

        form.locator("input[name=title]").fill("Pets")
        with page.expect_navigation(timeout=120_000) as sent:
            form.locator("button[type=submit]").click()
        assert sent.value.status == 200
        assert (
            page.inner_text("#message") == "Started the labelling project “Pets”; its Label Studio opens in a minute."
        )
        (project,) = hub.service_call("GET", "/courses/lab/labelling", teach).json()
        row = page.locator(f".labelling-course[data-course='lab'] tr.labelling-project[data-key='{project['key']}']")
        assert row.locator(".project-title").inner_text() == "Pets"
        assert row.locator(".project-role").inner_text() == "manager"
        assert row.locator(".project-reviewers").inner_text() == "rev"
        assert "teach/pets" in row.inner_text()
        link = row.locator("a.open-label-studio")
        assert link.inner_text() == "Open Label Studio"
        assert link.get_attribute("href") == f"/services/workspace/labelling/{project['key']}/"
        assert link.get_attribute("target") == "_blank" and link.get_attribute("rel") == "noopener"
        # its manager may export it (the form, not sent: the Label Studio may not answer yet)
        export = page.locator(f"form.labelling-export[data-key='{project['key']}']")
        assert export.count() == 1
        formats = export.locator("select[name=format] option").evaluate_all("os => os.map(o => o.value)")
        assert formats == ["JSON", "JSON_MIN", "CSV", "COCO", "YOLO", "VOC"], formats
        # the form is empty again after the success
        assert page.locator("form.labelling-new input[name=title]").input_value() == ""
        page.screenshot(path=str(ARTIFACTS / "01-instructor.png"), full_page=True)
        assert not errors, errors
    finally:
        context.close()

    # a student of the course: the project, with their role, and no forms
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    watch_errors(page, errors)
    try:
        login(page, hub, "stu", USER_PASSWORD)
        page.goto(f"{pages}/labelling")
        row = page.locator(f".labelling-course[data-course='lab'] tr.labelling-project[data-key='{project['key']}']")
        assert row.locator(".project-role").inner_text() == "labeller"
        assert row.locator("a.open-label-studio").get_attribute("href") == project["url"]
        assert "Label All Tasks" in page.inner_text("#labelling-howto")
        assert page.locator("form.labelling-new, form.labelling-export").count() == 0
        page.screenshot(path=str(ARTIFACTS / "02-student.png"), full_page=True)

        # a user in no course: who makes projects, and the manual's section
        context.clear_cookies()
        hub.create_user("outa")
        login(page, hub, "outa", USER_PASSWORD)
        page.goto(f"{pages}/labelling")
        assert "made by a course's instructors" in page.inner_text("#no-course")
        assert page.locator("#no-course a").get_attribute("href") == (
            "/services/workspace/docs/en/students/labelling.html#labelling-course"
        )
        assert page.locator(".labelling-course").count() == 0
        assert not errors, errors
    finally:
        context.close()
