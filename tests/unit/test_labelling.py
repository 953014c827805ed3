"""A course's labelling projects (#36): the pure rules (labels, roles, export names, the proxy's cookies)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from workspace.caller import Caller
from workspace.errors import UserError
from workspace.labelling import exports, labels, team
from workspace.labelling.projects import LabellingProject, role_of
from workspace.service.labelling_proxy import _own_cookie


def test_labels_from_text_or_a_list_become_boxes_and_polygons():
    assert labels.parse_labels("cat, dog\ncat,  ,bird") == ["cat", "dog", "bird"]
    config = labels.image_config(["cat", "big dog"])
    tree = ET.fromstring(config)  # well-formed, whatever the labels
    assert [e.get("value") for e in tree.iter("Label")] == ["cat", "big dog", "cat", "big dog"]
    assert {e.tag for e in tree} == {"Image", "RectangleLabels", "PolygonLabels"}


@pytest.mark.parametrize("bad", ["", " , ", ["<b>"], ['a"b'], ["x" * 65], [1], 3, ["a&b"]])
def test_a_bad_label_set_is_a_sentence(bad):
    with pytest.raises(UserError) as e:
        labels.parse_labels(bad)
    assert e.value.status_code == 400


def test_a_config_is_labels_or_written_whole_never_both():
    assert labels.config_of({"labels": ["cat"]}).startswith("<View>")
    assert labels.config_of({"config": " <View><Text name='t' value='$text'/></View> "}).startswith("<View>")
    for body in (
        {},
        {"labels": ["a"], "config": "<View/>"},
        {"config": "<script/>"},
        {"config": "<View>" + "x" * 70000},
    ):
        with pytest.raises(UserError):
            labels.config_of(body)


def test_roles_follow_the_course_and_the_reviewers():
    project = LabellingProject(course="vision", reviewers=["rita"])
    assert role_of(project, Caller("prof"), manages=True) == "manager"
    assert role_of(project, Caller("rita", {"vision"}), manages=False) == "reviewer"
    assert role_of(project, Caller("ann", {"vision"}), manages=False) == "annotator"
    # a reviewer who left the course is nobody; so is a student of another course
    assert role_of(project, Caller("rita", {"other"}), manages=False) is None
    assert role_of(project, Caller("oz", {"other"}), manages=False) is None


def test_an_export_is_one_file_named_here():
    assert exports.parse_format(None) == "JSON" and exports.parse_format("coco") == "COCO"
    with pytest.raises(UserError):
        exports.parse_format("../x")
    assert exports.file_name("Pets: boxes/../x", "COCO") == "Pets--boxes-..-x-coco.zip"
    assert exports.file_name("...", "JSON") == "labels-json.json"
    assert "/" not in exports.file_name("a/b", "CSV")


def test_an_export_request_names_a_dataset_a_format_and_whether_only_the_accepted():
    assert exports.parse_request({"dataset": "pets-labels"}) == ("pets-labels", "JSON", True)
    assert exports.parse_request({"dataset": "p", "format": "yolo", "accepted_only": False}) == ("p", "YOLO", False)
    for bad in ({}, {"dataset": "../x"}, {"dataset": "p", "accepted_only": "no"}, {"dataset": "p", "owner": "x"}):
        with pytest.raises(UserError) as e:
            exports.parse_request(bad)
        assert e.value.status_code == 400, bad


def test_label_studio_sets_only_its_own_cookies_under_its_path():
    path = "/services/workspace/labelling/0123456789ab"
    assert _own_cookie(f"label_studio_session=x; Path={path}/; HttpOnly", path)
    assert not _own_cookie(f"jupyterhub-services=x; Path={path}/", path)  # the platform's name
    assert not _own_cookie("label_studio_session=x; Path=/", path)  # the whole origin
    assert not _own_cookie("label_studio_session=x", path)  # no path: the answering path's parent
    assert not _own_cookie("label_studio_session=x; Path=/services/workspace/labelling/0123456789ab0/", path)


def test_a_label_studio_that_does_not_start_is_told_by_its_own_last_words():
    log = "=> Database\nTraceback (most recent call last):\n  x\nCommandError: Label Studio refuses the project: bad\n"
    assert team.reason_from(log) == "CommandError: Label Studio refuses the project: bad"
    assert team.reason_from("one\n\nlast line  \n") == "last line"
    assert team.reason_from("") == "(no output)"
    assert len(team.reason_from("x" * 5000)) == 300
