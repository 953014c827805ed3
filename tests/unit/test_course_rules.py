"""Who a roster may name (courses.why_privileged) and what a course may be called."""

import pytest

from workspace.courses import check_setup, why_privileged
from workspace.errors import UserError

CONFIG = {"cs101": {"instructors": ["prof"]}, "cs102": {"instructors": ["ta"]}}


def test_only_students_are_no_privileged_users():
    assert why_privileged("prof", None, CONFIG) == "an instructor"
    assert why_privileged("ta", {"name": "ta"}, CONFIG) == "an instructor"
    assert why_privileged("root", {"admin": True, "roles": ["admin"]}, CONFIG) == "an administrator"
    assert (
        why_privileged("grader", {"roles": ["user", "grader", "auditor"]}, CONFIG) == "holds the role auditor, grader"
    )
    assert why_privileged("ann", {"roles": ["user"]}, CONFIG) is None
    assert why_privileged("ann", {}, CONFIG) is None
    assert why_privileged("new", None, {}) is None  # not a user yet: the set-up makes a plain one


@pytest.mark.parametrize("course", ["CS101", "cs 101", "-x", ""])
def test_a_course_name_is_a_group_name_checked_first(database, course):
    with pytest.raises(UserError) as err:
        check_setup(database, course, {"term": 1}, "prof", False, [], None, [])  # the name before the unknown field
    assert err.value.status_code == 400 and f"“{course}” cannot be a course name" in err.value.jupyterhub_message
