"""Images users define (workspace/images/user.py): what a definition may be, who sees and changes an image,
a build's record from its request to its end; on real databases. The build: tests/integration/test_user_images.py."""

import datetime as dt

import pytest

from workspace import egress
from workspace.caller import Caller
from workspace.db import move_clock
from workspace.errors import UserError
from workspace.images import approvals as image_approvals
from workspace.images import builds as image_builds
from workspace.images import definitions
from workspace.images import user as user_images

BASES = {"workspace-base:latest": "workspace-base:latest", "bob/nlp": "wstest-user-3:2"}


def refused(fn, *args, status=400, **kwargs) -> str:
    with pytest.raises(UserError) as e:
        fn(*args, **kwargs)
    assert e.value.status_code == status, e.value.message
    return e.value.message


def definition(**body):
    return definitions.parse_definition(
        {"name": "nlp", "from": "workspace-base:latest", "apt": "graphviz", **body}, BASES, {"cs101"}
    )


def test_apt_names_from_text_or_a_list():
    assert definitions.parse_apt("graphviz  # for plots\nlibsndfile1 vim=2:9.0.1378-2\n\n") == [
        "graphviz",
        "libsndfile1",
        "vim=2:9.0.1378-2",
    ]
    assert definitions.parse_apt(["git", "git", "tmux"]) == ["git", "tmux"]
    assert definitions.parse_apt(None) == [] and definitions.parse_apt("") == []


@pytest.mark.parametrize(
    "bad", ["-o=APT::Get::foo", "graphviz;rm", "../x", "Graphviz", "a" * 70, "x $(id)", ["ok", 3], {"a": 1}]
)
def test_apt_refuses_what_is_no_package_name(bad):
    message = refused(definitions.parse_apt, bad)
    assert "Debian package" in message


def test_definition_fields_and_sentences():
    d = definition(pip="six\n", visibility="group:cs101")
    assert d["base_ref"] == "workspace-base:latest" and d["apt"] == ["graphviz"]
    assert definition(**{"from": "bob/nlp"})["base_ref"] == "wstest-user-3:2"
    assert "lower-case" in refused(definition, name="Bad Name")
    assert "you may use" in refused(definition, **{"from": "alice/secret"})
    assert "Unknown field" in refused(definition, entrypoint="x")
    assert "send it without apt, from" in refused(definition, dockerfile="FROM x")  # one or the other (#32)
    assert "Say what to add" in refused(definition, apt="")
    assert "NUL" in refused(definition, pip="six\0")
    assert "KiB" in refused(definition, script="x" * (definitions.TEXT_MAX + 1))
    assert "group:NAME" in refused(definition, visibility="everyone")
    # a course the owner neither belongs to nor teaches
    assert "belong to or teach" in refused(definition, visibility="group:cs999", status=403)


def test_build_records_and_who_sees_what(database):
    db = database
    first = user_images.request_build(db, "alice", definition(), limit=2)
    assert first["state"] == "queued" and first["build"] == 1 and not first["available"]
    assert "being built" in refused(user_images.request_build, db, "alice", definition(), 2, status=409)
    job = user_images.next_queued(db)
    assert job["name"] == "alice/nlp" and user_images.next_queued(db) is None
    user_images.set_progress(db, job["id"], 1, "step 1/1: apt-get install 1 package(s): graphviz")
    assert user_images.describe(db, "alice/nlp", Caller("alice"))["progress"].startswith("step 1/1")
    assert user_images.finish(db, job["id"], 1, {"ok": True, "ref": "d-user-1:1", "bytes": 5, "versions": {}}) is None
    # private: its owner and administrators only; another user learns nothing of it (404, not 403)
    assert user_images.choices(db, "alice", set()) == {"alice/nlp": "d-user-1:1"}
    assert user_images.choices(db, "bob", {"cs101"}) == {}
    assert refused(user_images.describe, db, "alice/nlp", Caller("bob"), status=404)
    assert refused(user_images.log_of, db, "alice/nlp", Caller("bob"), status=404)
    assert refused(user_images.remove, db, "alice/nlp", Caller("bob"), status=404)
    assert [i["name"] for i in user_images.listing(db, Caller("root", admin=True))] == ["alice/nlp"]
    # shared with a course: its members see it, may start it once approved for them (test_image_approvals.py),
    # and may not change it or read its log
    user_images.set_visibility(db, "alice/nlp", Caller("alice"), "group:cs101")
    assert user_images.describe(db, "alice/nlp", Caller("bob", {"cs101"}))["startable"] is False
    assert user_images.choices(db, "bob", {"cs101"}) == {}
    prof = image_approvals.Approver("prof", frozenset(), False, frozenset({"cs101"}))
    image_approvals.approve(db, "alice/nlp", prof)
    assert user_images.choices(db, "bob", {"cs101"}) == {"alice/nlp": "d-user-1:1"}
    assert user_images.choices(db, "carol", {"cs102"}) == {}
    assert "Only alice" in refused(user_images.log_of, db, "alice/nlp", Caller("bob", {"cs101"}), status=403)
    assert refused(user_images.set_visibility, db, "alice/nlp", Caller("bob", {"cs101"}), "public", status=403)
    # a rebuild that fails keeps the image that works; one that succeeds replaces it (the old one to remove)
    user_images.request_build(db, "alice", definition(pip="six"), limit=2)
    job = user_images.next_queued(db)
    assert job["build"] == 2
    user_images.finish(db, job["id"], 2, {"ok": False, "error": "The build failed (exit code 1)."})
    record = user_images.describe(db, "alice/nlp", Caller("alice"))
    assert record["state"] == "failed" and record["available"] and record["error"].startswith("The build failed")
    assert user_images.choices(db, "alice", set()) == {"alice/nlp": "d-user-1:1"}
    user_images.request_build(db, "alice", definition(), limit=2)
    job = user_images.next_queued(db)
    assert user_images.finish(db, job["id"], 3, {"ok": True, "ref": "d-user-1:3", "bytes": 7}) == "d-user-1:1"
    # the new build is not the one approved: for its owner only until approved again
    assert user_images.choices(db, "bob", {"cs101"}) == {}
    assert user_images.choices(db, "alice", set()) == {"alice/nlp": "d-user-1:3"}
    # a build whose record was deleted meanwhile (after a restart marked it interrupted): its image is nobody's
    user_images.request_build(db, "alice", definition(name="cv"), limit=2)
    job = user_images.next_queued(db)
    assert "being built" in refused(user_images.remove, db, "alice/cv", Caller("alice"), status=409)
    assert user_images.interrupted(db) == 1
    assert user_images.remove(db, "alice/cv", Caller("alice")) == (job["id"], None)
    assert user_images.finish(db, job["id"], 1, {"ok": True, "ref": "d-user-2:1"}) == "d-user-2:1"
    # the per-user limit
    user_images.request_build(db, "alice", definition(name="cv2"), limit=2)
    assert "the most one user may have" in refused(
        user_images.request_build, db, "alice", definition(name="cv3"), 2, status=403
    )


def tick():
    move_clock(dt.timedelta(seconds=1))


def test_one_user_queues_at_most_max_queued_builds_and_the_builder_takes_users_in_turn(database):
    db, ok = database, {"ok": True, "ref": "x", "bytes": 1}
    # each request a second after the one before (utcnow orders them)
    for name in ("a1", "a2"):  # alice asks first, twice
        user_images.request_build(db, "alice", definition(name=name), limit=10, queued_limit=2)
        tick()
    # a third while two wait: refused, and nothing recorded (the builder is everyone's)
    message = refused(user_images.request_build, db, "alice", definition(name="a3"), 10, queued_limit=2, status=429)
    assert "2 image builds queued or under way" in message
    assert [i["name"] for i in user_images.listing(db, Caller("alice"))] == ["alice/a1", "alice/a2"]
    for owner in ("bob", "carol"):
        user_images.request_build(db, owner, definition(name="b"), limit=10, queued_limit=2)
        tick()
    taken = []
    while (job := user_images.next_queued(db)) is not None:
        taken.append(job["name"])
        tick()
        user_images.finish(db, job["id"], job["build"], ok)
        if job["name"] == "alice/a1":  # alice's first ended: she may queue one more, which waits its turn
            user_images.request_build(db, "alice", definition(name="a3"), limit=10, queued_limit=2)
            tick()
    # round-robin: bob and carol, who asked later, are not behind alice's second and third
    assert taken == ["alice/a1", "bob/b", "carol/b", "alice/a2", "alice/a3"]


def test_build_order_counts_a_users_build_under_way_as_ahead_of_their_queued_ones():
    t = [dt.datetime(2026, 1, 1, 0, m) for m in range(5)]
    images = [
        user_images.UserImage(id=1, owner="alice", state="building", updated=t[0], started=t[1]),
        user_images.UserImage(id=2, owner="alice", state="queued", updated=t[1]),
        user_images.UserImage(id=3, owner="bob", state="queued", updated=t[2]),
        user_images.UserImage(id=4, owner="bob", state="ready", updated=t[3], started=t[0]),
    ]
    assert [i.id for i in user_images.build_order(images)] == [3, 2]


def test_interrupted_builds_fail_with_a_sentence(database):
    user_images.request_build(database, "alice", definition(), limit=5)
    user_images.next_queued(database)
    assert user_images.interrupted(database) == 1
    record = user_images.describe(database, "alice/nlp", Caller("alice"))
    assert record["state"] == "failed" and "interrupted" in record["error"]
    assert "being built" not in (record["error"] or "")
    chinese = user_images.describe(database, "alice/nlp", Caller("alice"), locale="zh_CN")["error"]
    assert chinese == "构建被中断（服务已重启），请重新构建。", chinese


def test_build_script_announces_each_step_and_quotes_nothing_of_the_user():
    job = {"apt": ["graphviz"], "pip": "# c\nsix\nrequests\n", "script": "echo hi"}
    text = image_builds.script(job)
    assert "'[image] step 1/3: apt-get install 1 package(s): graphviz'" in text
    assert "'[image] step 2/3: pip install 2 requirement(s)'" in text
    assert "'[image] step 3/3: the post-build script'" in text
    assert "echo hi" not in text and "requests" not in text  # the owner's text is in files, never in our script
    only_pip = image_builds.script({"apt": [], "pip": "six", "script": ""})
    assert "step 1/1: pip" in only_pip and "apt-get" not in only_pip


def test_commit_restores_the_base_images_settings():
    changes = image_builds.ImageBuilder.restore(
        {"User": "1000", "Cmd": ["workspace-start", "jupyterhub-singleuser"], "Entrypoint": None},
        {"python": "3.11.2"},
        "alice/nlp",
        "d-user-1:1",
    )
    assert changes[0] == "USER 1000"
    assert 'CMD ["workspace-start", "jupyterhub-singleuser"]' in changes
    assert not any(c.startswith("ENTRYPOINT") for c in changes)
    assert '"alice/nlp"' in changes[-1] and "workspace.image=d-user-1:1" in changes[-1]


def test_build_network_rules_let_dns_and_the_internet_through_only(tmp_path):
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 10.255.255.53\nnameserver 127.0.0.53\nnameserver ::1\nsearch x\n")
    dns = egress.nameservers([str(resolv)])
    assert dns == ["10.255.255.53"]
    policy = egress.Policy("WORKSPACE-BUILD", ["ws-build0"], dns, egress.parse_allowed(["10.20.0.0/24"]))
    rules = egress.forward_rules(policy)
    returns = [r for r in rules if r[-1] == "RETURN"]
    rejects = [r for r in rules if r[-1] == "REJECT"]
    assert rules.index(returns[-1]) < rules.index(rejects[0]), "what passes comes before what is refused"
    assert ["-d", "10.255.255.53", "-p", "udp", "--dport", "53", "-j", "RETURN"] in returns
    assert ["-d", "10.20.0.0/24", "-j", "RETURN"] in returns
    refused_nets = {r[1] for r in rejects}
    assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8"} <= refused_nets
    assert {"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"} <= refused_nets, "documentation ranges too"
    assert egress.input_rules(policy)[-1] == ["-j", "REJECT"], "no hub: nothing on the host answers a build"
