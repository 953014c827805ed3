"""The spawn choices the service's pages offer and send (spawnform.page_form, continued, options_from_page),
on a real SQLite database."""

import pytest

from workspace.caller import Caller
from workspace.datasets import Dataset, DatasetVersion
from workspace.executions import get_or_create_workspace, new_execution
from workspace.limits.resource_types import ResourceType
from workspace.spawner import form as spawnform

TYPES = [ResourceType.from_config({"name": "small", "cpu": 1}), ResourceType.from_config({"name": "big", "cpu": 8})]


@pytest.fixture
def db(database):
    with database.session() as s:
        ws = get_or_create_workspace(s, "ada", "thesis")
        for rtype, refs in (("big", ["prof/mnist:1"]), ("cleanup", []), (None, ["prof/mnist:2", "ada/notes:1"])):
            ex = new_execution(s, ws, None, None)
            ex.resource_type, ex.datasets = rtype, [{"slot": i, "ref": r} for i, r in enumerate(refs)]
        ds = Dataset(owner="prof", name="mnist", visibility="public")
        ds.versions.append(DatasetVersion(number=1, key="v1", bytes=1, files=1, creator="prof", origin="upload"))
        s.add_all([ds, Dataset(owner="prof", name="empty", visibility="public")])
    return database


def form(db, name, selected="latest", default_type="small"):
    return spawnform.page_form(
        db,
        Caller("ada"),
        name,
        selected,
        types=TYPES,
        nodes=[],
        images=["img:a"],
        image="img:a",
        default_type=default_type,
    )


def test_continuing_keeps_the_datasets_without_version_and_the_type(db):
    assert spawnform.continued(db, "ada", "thesis", "1") == (["prof/mnist"], "big")
    assert spawnform.continued(db, "ada", "thesis", "latest") == (["prof/mnist", "ada/notes"], None)
    assert spawnform.continued(db, "ada", "thesis", "fresh") == ([], None)
    assert spawnform.continued(db, "ada", "thesis", "9") == ([], None)
    assert spawnform.continued(db, "ada", "nothing", "latest") == ([], None)


def test_the_page_form_is_prefilled_from_the_chosen_execution(db):
    html = form(db, "thesis", selected="1")
    assert 'value="prof/mnist"' in html and '<option value="1" selected>' in html
    assert '<option value="big" selected>' in html
    assert '<option value="prof/mnist">' in html and "prof/empty" not in html  # suggests what has a version
    # the newest (#3) has no type, #2 ran in cleanup mode: both offer the default
    assert '<option value="small" selected>' in form(db, "thesis")
    assert '<option value="small" selected>' in form(db, "thesis", selected="2")
    assert '<option value="big" selected>' in form(db, "thesis", selected="fresh", default_type="big")


def test_a_new_workspace_has_no_continue_from_and_nothing_bound(db):
    html = form(db, None)
    assert (
        'name="continue_from"' not in html and 'id="datasets" name="datasets" list="dataset-choices" value=""' in html
    )


def test_the_page_options():
    fields = {"resource_type": "", "image": "", "cleanup": ""}
    assert spawnform.options_from_page("", "prof/a,\nprof/b:2 ,", "big", fields) == {
        "continue_from": "latest",
        "datasets": ["prof/a", "prof/b:2"],
        "resource_type": "big",
    }
    assert spawnform.options_from_page("3", "", "cleanup", fields) == {"continue_from": "3"}
    chosen = {"resource_type": "small", "image": "img:b", "cleanup": "on"}
    assert spawnform.options_from_page("fresh", "", "big", chosen) == {
        "continue_from": "fresh",
        "resource_type": "small",
        "image": "img:b",
        "cleanup": True,
    }
