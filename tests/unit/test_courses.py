"""A course set-up: the roster's text, and what check_setup refuses before anything changes."""

import pytest

from workspace import courses
from workspace.courses import Course, check_setup, parse_roster
from workspace.datasets import Dataset, DatasetVersion
from workspace.errors import UserError
from workspace.executions import Snapshot, Workspace, get_or_create_workspace, new_execution
from workspace.limits.resource_types import ResourceType

TYPES = [
    ResourceType.from_config({"name": "small", "cpu": 1}),
    ResourceType.from_config({"name": "staff", "groups": ["staff"]}),
]


def test_a_roster_is_a_list_or_text_with_one_name_per_line_or_csv():
    assert parse_roster(["Ann", "bob", "ann"]) == ["ann", "bob"]  # normalized, once each
    text = "username,name\nann,Ann A.\n\n# joins late\n bob \ncat@uni.edu,Cat\n"
    assert parse_roster(text) == ["ann", "bob", "cat@uni.edu"]
    assert parse_roster("") == []


@pytest.mark.parametrize(
    "value, words",
    [
        ("ann\nb/ob\n", "Line 2 of the roster, “b/ob”, is not a username"),
        ("ann\n-x\n", "Line 2 of the roster"),
        (["ann", 3], "must be a list of usernames"),
        ({"ann": 1}, "must be a list of usernames, or the roster's text"),
        ("\n".join(f"s{i}" for i in range(courses.MAX_ROSTER + 1)), f"at most {courses.MAX_ROSTER} students"),
    ],
)
def test_bad_rosters_are_400s_naming_the_line(value, words):
    with pytest.raises(UserError) as err:
        parse_roster(value)
    assert err.value.status_code == 400 and words in err.value.jupyterhub_message


@pytest.fixture
def db(database):
    db = database
    with db.session() as s:
        ws = get_or_create_workspace(s, "prof", "prep")
        for with_output in (True, False):
            ex = new_execution(s, ws, None, None)
            if with_output:
                ex.snapshot = Snapshot(key=ex.snapshot_key, backend="copy", bytes=1, files=1)
        mine = Dataset(owner="prof", name="handout")
        mine.versions.append(DatasetVersion(number=1, key="v1", bytes=5, files=1, creator="prof", origin="upload"))
        theirs = Dataset(owner="eve", name="theirs")
        theirs.versions.append(DatasetVersion(number=1, key="v2", bytes=5, files=1, creator="eve", origin="upload"))
        s.add_all([mine, theirs, Dataset(owner="prof", name="empty")])
        s.add(Workspace(owner="bob", name="lab1"))  # bob's own, not the course's
    return db


def setup(db, body, caller="prof", admin=False):
    return check_setup(db, "cs101", body, caller, admin, TYPES, None, ["img:a", "img:b"])


def test_a_good_set_up_is_checked_and_says_what_it_leaves_alone(db):
    done = setup(
        db,
        {
            "students": "ann\nbob\n",
            "workspace": "lab1",
            "resource_type": "small",
            "datasets": ["prof/handout"],
            "starter": {"workspace": "prep", "number": 1},
            "image": "img:b",
        },
    )
    assert (done.students, done.workspace, done.resource_type, done.image, done.datasets) == (
        ["ann", "bob"],
        "lab1",
        "small",
        "img:b",
        ["prof/handout"],
    )
    assert done.starter_id is not None
    assert done.notes == ["1 student(s) already have a workspace “lab1” of their own, which is left as it is: bob."]
    assert setup(db, {"students": []}).workspace == "cs101"  # the course's name by default


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({}, 400, "Give the roster"),
        ({"students": [], "term": 1}, 400, "Unknown field(s) term"),
        ({"students": [], "workspace": "Lab 1"}, 400, "cannot be the course's workspace name"),
        ({"students": [], "resource_type": "huge"}, 400, "There is no resource type “huge”"),
        ({"students": [], "resource_type": "staff"}, 403, "is for the group(s) staff"),
        ({"students": [], "image": "img:c"}, 400, "is not an image this course"),
        ({"students": [], "datasets": ["eve/theirs"]}, 403, "only datasets you own"),
        ({"students": [], "datasets": ["prof/handout:1"]}, 400, "without a version"),
        ({"students": [], "datasets": ["prof/empty"]}, 400, "has no versions yet"),
        ({"students": [], "starter": {"workspace": "prep", "number": 7}}, 404, "no execution #7 of “prep”"),
        ({"students": [], "starter": {"workspace": "prep", "number": 2}}, 400, "has no saved output"),
        ({"students": [], "starter": "prep:1"}, 400, "“starter” must be"),
    ],
)
def test_bad_set_ups_are_refused_with_a_sentence(db, body, status, words):
    with pytest.raises(UserError) as err:
        setup(db, body)
    assert err.value.status_code == status and words in err.value.jupyterhub_message


def test_an_admin_may_give_anyones_dataset_and_the_defaults_follow_the_template(db):
    assert setup(db, {"students": [], "datasets": ["eve/theirs"]}, caller="root", admin=True).datasets == ["eve/theirs"]
    c = Course(name="cs101", workspace="lab1", resource_type="small", datasets=["prof/handout"])
    assert c.start_defaults() == {"datasets": ["prof/handout"], "resource_type": "small"}
    assert Course(name="x", workspace="x").start_defaults() == {}
