from workspace.spawner import form as spawnform
from workspace.spawner.form import options_from_form, render


def test_form_lists_executions_and_marks_those_without_output():
    html = render(
        [
            {"number": 2, "state": "stopped", "has_output": False, "stop_reason": "user", "stopped": None},
            {"number": 1, "state": "stopped", "has_output": True, "stop_reason": "idle", "stopped": "2026-12-01 10:00"},
        ],
        images=["workspace-base:latest"],
        current_image="workspace-base:latest",
    )
    assert '<option value="latest" selected>' in html
    assert "#2 — no saved output (stopped); its nearest earlier output is used (user)" in html
    assert "#1 — saved output, stopped 2026-12-01 10:00 UTC (idle)" in html
    assert '<option value="fresh">' in html
    assert 'name="image"' not in html, "no image choice when there is only one"


def test_form_escapes_and_offers_images():
    html = render([], images=["a:1", "<b>:2"], current_image="a:1", selected="fresh")
    assert "&lt;b&gt;:2" in html and "<b>:2" not in html
    assert '<option value="fresh" selected>' in html


def test_datasets_field_is_prefilled_and_suggests():
    html = render([], images=["a:1"], current_image="a:1", datasets=["prof/mnist", "ada/x"], bound=["prof/mnist"])
    assert 'name="datasets"' in html and 'value="prof/mnist"' in html
    assert '<option value="ada/x">' in html


def test_options_from_form():
    assert options_from_form({"continue_from": ["3"], "image": ["a:1"]}) == {"continue_from": "3", "image": "a:1"}
    assert options_from_form({"datasets": ["prof/a, prof/b:2"]}) == {"datasets": "prof/a, prof/b:2"}
    assert options_from_form({"continue_from": [""]}) == {}


def test_cleanup_mode_is_a_checkbox():
    assert options_from_form({"cleanup": ["on"], "continue_from": ["2"]}) == {"cleanup": True, "continue_from": "2"}
    assert "cleanup" not in options_from_form({"continue_from": ["2"]})
    html = render([], ["a:1"], "a:1", continue_choice=False)
    assert 'name="cleanup"' in html and 'name="continue_from"' not in html


def test_the_form_preselects_the_image_the_execution_ran_while_it_may_be_started():
    refs = {"workspace-base:latest": "workspace-base:aaa", "workspace-scientific:latest": "workspace-scientific:bbb"}
    ran = {"image": "workspace-scientific:bbb"}
    assert spawnform.image_of(ran, refs, "workspace-base:latest") == "workspace-scientific:latest"
    # rebuilt since (a new tag of the same repository): still that choice
    assert spawnform.image_of({"image": "workspace-scientific:old"}, refs, "x") == "workspace-scientific:latest"
    # recorded by its name (a list of images, no engine names)
    assert spawnform.image_of({"image": "b"}, {"a": "a", "b": "b"}, "a") == "b"
    # an image no longer offered to this user (a user's image not approved for them, a removed one): the default
    assert spawnform.image_of({"image": "wstest-user-3:2"}, refs, "workspace-base:latest") == "workspace-base:latest"
    assert spawnform.image_of(None, refs, "workspace-base:latest") == "workspace-base:latest"
    assert spawnform.image_of({"image": None}, refs, "workspace-base:latest") == "workspace-base:latest"
