"""Approving users' images (#28, workspace/images/approvals.py and user_images.may_start): another user's image
runs for someone only once an administrator (everyone) or the course's instructor (the course) approved its
current build; a rebuild needs approval again; on real databases. Against a real hub: tests/integration/
test_image_approvals.py."""

import pytest

from workspace.caller import Caller
from workspace.errors import UserError
from workspace.images import approvals as image_approvals
from workspace.images import user as user_images

ADMIN = image_approvals.Approver("root", frozenset(), True, None)
PROF = image_approvals.Approver("prof", frozenset(), False, frozenset({"cs101"}))
STUDENT = image_approvals.Approver("bob", frozenset({"cs101"}), False, frozenset())


def refused(fn, *args, status=400, **kwargs) -> str:
    with pytest.raises(UserError) as e:
        fn(*args, **kwargs)
    assert e.value.status_code == status, e.value.message
    return e.value.message


def built(db, owner="alice", name="tools", visibility="public", ok=True) -> dict:
    """A build of `owner/name` requested and finished (a new engine image each time)."""
    definition = {
        "name": name,
        "base": "workspace-base:latest",
        "base_ref": "workspace-base:latest",
        "apt": ["cowsay"],
        "pip": "",
        "script": "",
        "visibility": visibility,
    }
    user_images.request_build(db, owner, definition, limit=10)
    job = user_images.next_queued(db)
    ref = f"d-user-{job['id']}:{job['build']}"
    user_images.finish(db, job["id"], job["build"], {"ok": ok, "ref": ref, "bytes": 1, "error": "failed"})
    return {**job, "ref": ref}


def test_a_public_image_runs_for_others_only_once_an_administrator_approved_this_build(database):
    db = database
    first = built(db)
    # visible to bob, but not startable: a start naming it is a 403 with a sentence
    assert user_images.describe(db, "alice/tools", Caller("bob"))["startable"] is False
    assert user_images.choices(db, "bob", set()) == {}
    message = refused(user_images.check_startable, db, "alice/tools", "bob", set(), status=403)
    assert "built by alice" in message and "approves it" in message
    # its owner always may; an administrator is no exception to the rule (their home would run it)
    assert user_images.choices(db, "alice", set()) == {"alice/tools": first["ref"]}
    user_images.check_startable(db, "alice/tools", "alice", set())
    assert user_images.choices(db, "root", set()) == {}
    # only an administrator approves for everyone
    assert "Only an administrator" in refused(image_approvals.approve, db, "alice/tools", PROF, "public", status=403)
    assert "Only an administrator" in refused(image_approvals.approve, db, "alice/tools", STUDENT, status=403)
    owner = image_approvals.Approver("alice", frozenset(), False, frozenset())
    assert "Only an administrator" in refused(image_approvals.approve, db, "alice/tools", owner, status=403)
    assert [i["name"] for i in image_approvals.pending(db, ADMIN)] == ["alice/tools"]
    approved = image_approvals.approve(db, "alice/tools", ADMIN)
    assert approved["approvals"] == [
        {"for": "public", "by": "root", "at": approved["approvals"][0]["at"], "build": 1, "current": True}
    ]
    assert user_images.choices(db, "bob", set()) == {"alice/tools": first["ref"]}
    assert user_images.startable(db, "bob", set()) == [
        {"name": "alice/tools", "ref": first["ref"], "owner": "alice", "approved_by": ["root"]}
    ]
    user_images.check_startable(db, "alice/tools", "bob", set())
    assert image_approvals.pending(db, ADMIN) == []
    # the start form says who made it and who approved it; its owner reads “built by you”
    (entry,) = user_images.startable(db, "bob", set())
    assert user_images.origin(entry, "bob") == "built by alice, approved by root"
    assert user_images.origin(entry, "alice") == "built by you"
    assert user_images.origin(entry, "bob", "zh_CN") != user_images.origin(entry, "bob")

    # alice's rebuild is new code: nobody else runs it until it is approved again
    second = built(db)
    assert second["ref"] != first["ref"]
    assert user_images.choices(db, "bob", set()) == {}
    assert "not approved for you" in refused(user_images.check_startable, db, "alice/tools", "bob", set(), status=403)
    (stale,) = user_images.describe(db, "alice/tools", Caller("bob"))["approvals"]
    assert stale["build"] == 1 and stale["current"] is False
    assert [i["name"] for i in image_approvals.pending(db, ADMIN)] == ["alice/tools"]
    # an approver approves what they read: a page showing build 1 cannot approve build 2
    assert "rebuilt since" in refused(image_approvals.approve, db, "alice/tools", ADMIN, build=1, status=409)
    image_approvals.approve(db, "alice/tools", ADMIN, build=2)
    assert user_images.choices(db, "bob", set()) == {"alice/tools": second["ref"]}

    # revoked: for its owner only again
    revoked = image_approvals.revoke(db, "alice/tools", ADMIN)
    assert revoked["approvals"] == [] and user_images.choices(db, "bob", set()) == {}
    assert "not approved for public" in refused(image_approvals.revoke, db, "alice/tools", ADMIN, status=404)


def test_a_course_image_is_approved_by_the_course_instructor_for_its_students_only(database):
    db = database
    job = built(db, visibility="group:cs101")
    assert user_images.choices(db, "bob", {"cs101"}) == {}
    # not for everyone (it is shared with one course), and not by another course's instructor
    assert "shared as group:cs101" in refused(image_approvals.approve, db, "alice/tools", ADMIN, "public", status=409)
    other = image_approvals.Approver("ml-prof", frozenset(), False, frozenset({"ml200"}))
    assert refused(image_approvals.approve, db, "alice/tools", other, status=404)  # not theirs to see
    assert image_approvals.pending(db, other) == [] and image_approvals.pending(db, STUDENT) == []
    assert [i["name"] for i in image_approvals.pending(db, PROF)] == ["alice/tools"]
    image_approvals.approve(db, "alice/tools", PROF)
    assert user_images.choices(db, "bob", {"cs101"}) == {"alice/tools": job["ref"]}
    assert user_images.choices(db, "carol", {"ml200"}) == {}  # cannot see it
    # made public: the course's approval covers the course only; everyone else waits for an administrator
    user_images.set_visibility(db, "alice/tools", Caller("alice"), "public")
    assert user_images.choices(db, "carol", {"ml200"}) == {}
    assert user_images.choices(db, "bob", {"cs101"}) == {"alice/tools": job["ref"]}
    # an instructor may approve a public image for their own course
    image_approvals.approve(db, "alice/tools", other, "group:ml200")
    assert user_images.choices(db, "carol", {"ml200"}) == {"alice/tools": job["ref"]}
    assert user_images.choices(db, "dave", set()) == {}
    # private again: nobody else, whatever was approved
    user_images.set_visibility(db, "alice/tools", Caller("alice"), "private")
    assert user_images.choices(db, "bob", {"cs101"}) == {} and user_images.choices(db, "carol", {"ml200"}) == {}
    assert refused(user_images.check_startable, db, "alice/tools", "bob", {"cs101"}, status=404)
    assert "is private" in refused(image_approvals.approve, db, "alice/tools", ADMIN, status=409)
    # a course template is checked against what every student of the course may start
    user_images.set_visibility(db, "alice/tools", Caller("alice"), "group:cs101")
    assert user_images.choices(db, "", {"cs101"}) == {"alice/tools": job["ref"]}
    image_approvals.revoke(db, "alice/tools", PROF)
    assert user_images.choices(db, "", {"cs101"}) == {}


def test_only_a_finished_build_is_approved_and_approvals_go_with_their_image(database):
    db = database
    assert refused(image_approvals.approve, db, "alice/none", ADMIN, status=404)
    built(db)
    image_approvals.approve(db, "alice/tools", ADMIN)
    # a rebuild under way (or failed): the record shows a definition its engine image was not built from
    definition = {
        "name": "tools",
        "base": "workspace-base:latest",
        "base_ref": "workspace-base:latest",
        "apt": ["sl"],
        "pip": "",
        "script": "",
        "visibility": "public",
    }
    user_images.request_build(db, "alice", definition, limit=10)
    assert "no finished build" in refused(image_approvals.approve, db, "alice/tools", ADMIN, status=409)
    assert image_approvals.pending(db, ADMIN) == []
    job = user_images.next_queued(db)
    user_images.finish(db, job["id"], job["build"], {"ok": False, "error": "failed"})
    assert "no finished build" in refused(image_approvals.approve, db, "alice/tools", ADMIN, status=409)
    # the approved build still runs for others meanwhile (the failed rebuild replaced nothing)
    assert user_images.choices(db, "bob", set()) == {"alice/tools": f"d-user-{job['id']}:1"}
    assert "“for”" in refused(image_approvals.approve, db, "alice/tools", ADMIN, "everyone")
    assert "“for”" in refused(image_approvals.revoke, db, "alice/tools", ADMIN, ["public"])
    # deleted and made again under the same name: nothing of the old approvals is left
    user_images.remove(db, "alice/tools", Caller("alice"))
    built(db)
    assert user_images.choices(db, "bob", set()) == {}
    assert user_images.describe(db, "alice/tools", Caller("bob"))["approvals"] == []


def test_a_start_naming_no_users_image_is_left_to_the_spawner(database):
    # a site image (with or without a slash) is no user's: the spawner's own list decides
    user_images.check_startable(database, "quay.io/jupyter/base-notebook", "bob", set())
    user_images.check_startable(database, "workspace-base:latest", "bob", set())
