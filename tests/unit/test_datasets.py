"""Dataset references, names, access and the rules a version must pass."""

import os

import pytest

from workspace import datasets
from workspace.caller import Caller
from workspace.datasets import Dataset, DatasetRules, DatasetShare, Ref, check_slug, parse_refs
from workspace.errors import UserError


def test_refs():
    assert parse_refs(None) == []
    assert parse_refs(["ada/mnist", "course/imagenet:3"]) == [Ref("ada", "mnist", None), Ref("course", "imagenet", 3)]
    assert parse_refs("ada/mnist, bob/x:2") == [Ref("ada", "mnist", None), Ref("bob", "x", 2)]


@pytest.mark.parametrize(
    "value, words",
    [
        (["mnist"], "is not a dataset reference"),
        (["a/b:0"], "numbered from 1"),
        (["a/b", "a/b:2"], "listed twice"),
        ([f"a/d{i}" for i in range(6)], "At most 5 datasets"),
        ([1, 2], "must be a list of references"),
        ({"a": "b"}, "must be a list of references"),
    ],
)
def test_bad_refs_are_400s_with_sentences(value, words):
    with pytest.raises(UserError) as err:
        parse_refs(value)
    assert err.value.status_code == 400 and words in err.value.jupyterhub_message


@pytest.mark.parametrize("name", ["mnist", "cifar-10", "a", "x.y_z"])
def test_slugs(name):
    assert check_slug(name) == name


@pytest.mark.parametrize("name", ["", "Mnist", "-a", "a b", "a/b", "../x", "x" * 65, None])
def test_bad_slugs(name):
    with pytest.raises(UserError):
        check_slug(name)


def test_access():
    ds = Dataset(owner="prof", name="data", visibility="shared")
    ds.shares = [DatasetShare(kind="user", principal="ada"), DatasetShare(kind="group", principal="cs101")]
    assert ds.readable_by(Caller("prof"))
    assert ds.readable_by(Caller("ada"))
    assert ds.readable_by(Caller("bob", {"cs101"}))
    assert not ds.readable_by(Caller("eve", {"other"}))
    assert ds.readable_by(Caller("root", admin=True))
    assert Dataset(owner="x", name="y", visibility="public").readable_by(Caller("anyone"))


def test_tree_rules(tmp_path):
    rules = DatasetRules(small_files_min_total=10_000, small_files_min_average=1_000)
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok/a.bin").write_bytes(b"x" * 20_000)
    os.symlink("a.bin", tmp_path / "ok/link")
    assert rules.check_tree(tmp_path / "ok", "ok") == (20_000, 1)

    small = tmp_path / "small"
    small.mkdir()
    for i in range(50):
        with open(small / f"f{i}", "wb") as f:
            f.truncate(300)  # sparse is fine: the rule is about sizes, not blocks
    with pytest.raises(UserError) as err:
        rules.check_tree(small, "small")
    assert "pack the small files into a few large ones (HDF5, LMDB, TFRecord, or tar" in err.value.jupyterhub_message
    rules.small_files_rule = False
    assert rules.check_tree(small, "small")[1] == 50

    bad = tmp_path / "bad"
    (bad / "sub").mkdir(parents=True)
    os.symlink("/etc/passwd", bad / "abs")
    os.symlink("../../outside", bad / "sub/up")
    os.symlink("../inside-is-fine", bad / "sub/ok")
    os.mkfifo(bad / "pipe")
    with pytest.raises(UserError) as err:
        rules.check_tree(bad, "bad")
    msg = err.value.jupyterhub_message
    assert "abs (a link pointing outside)" in msg and "sub/up (a link pointing outside)" in msg
    assert "pipe (a device, pipe or socket)" in msg and "sub/ok" not in msg


# -- who sees and changes what (real SQLite) ------------------------------------------------------------


@pytest.fixture
def db(database):
    db = database
    with db.session() as s:
        shared = Dataset(owner="prof", name="labels", visibility="shared")
        shared.shares = [DatasetShare(kind="group", principal="cs101")]
        s.add_all(
            [shared, Dataset(owner="prof", name="notes"), Dataset(owner="wes", name="corpus", visibility="public")]
        )
    return db


def test_the_listing_splits_mine_shared_with_me_and_public(db):
    refs = {k: [d["ref"] for d in v] for k, v in datasets.listing(db, "ann", {"cs101"}).items()}
    assert refs == {"mine": [], "shared": ["prof/labels"], "public": ["wes/corpus"]}
    refs = {k: [d["ref"] for d in v] for k, v in datasets.listing(db, "prof", set()).items()}
    assert refs == {"mine": ["prof/labels", "prof/notes"], "shared": [], "public": ["wes/corpus"]}


def test_a_dataset_one_may_not_read_is_as_absent_as_one_that_does_not_exist(db):
    with db.session() as s:
        for name in ("notes", "nothing"):
            with pytest.raises(UserError) as err:
                datasets.readable(s, "prof", name, Caller("ann", {"cs101"}))
            assert (err.value.status_code, err.value.jupyterhub_message) == (
                404,
                f"There is no dataset prof/{name} that you can see.",
            )
        assert datasets.readable(s, "prof", "labels", Caller("ann", {"cs101"})).ref == "prof/labels"
        with pytest.raises(UserError) as err:
            datasets.writable(s, "prof", "labels", Caller("ann", {"cs101"}))
        assert (err.value.status_code, err.value.jupyterhub_message) == (
            403,
            "Only prof can change the dataset prof/labels.",
        )
        assert datasets.writable(s, "prof", "notes", Caller("root", admin=True)).ref == "prof/notes"
    assert datasets.describe(db, "wes", "corpus", Caller("ann"))["visibility"] == "public"


@pytest.mark.parametrize(
    "name, description, visibility, status, words",
    [
        ("Bad Name", "", "private", 400, "A dataset name may use"),
        ("ok", "", "secret", 400, "Visibility must be one of private, shared, public, not 'secret'."),
        ("ok", 3, "private", 400, "The description must be text."),
        ("notes", "", "private", 409, "You already have a dataset named notes."),
    ],
)
def test_creating_a_dataset_refuses_with_a_sentence(db, name, description, visibility, status, words):
    with pytest.raises(UserError) as err:
        datasets.create(db, "prof", name, description, visibility)
    assert err.value.status_code == status and words in err.value.jupyterhub_message


def test_a_new_dataset_has_no_versions_and_another_owner_may_use_the_same_name(db):
    made = datasets.create(db, "ann", "notes", "mine", "public")
    assert (made["ref"], made["visibility"], made["description"], made["versions"]) == (
        "ann/notes",
        "public",
        "mine",
        [],
    )


def test_sharing_a_private_dataset_makes_it_shared_once_and_leaves_a_public_one_public():
    ds = Dataset(owner="prof", name="x", visibility="private")
    ds.shares = []
    assert datasets.share(ds, "group", "cs101") is True
    assert datasets.share(ds, "group", "cs101") is False  # once
    assert ds.visibility == "shared" and [(x.kind, x.principal) for x in ds.shares] == [("group", "cs101")]
    public = Dataset(owner="prof", name="y", visibility="public")
    public.shares = []
    assert datasets.share(public, "user", "ann") and public.visibility == "public"


def test_adding_and_removing_a_share(db):
    shared = datasets.add_share(db, "prof", "notes", "user", "ann", Caller("prof"))
    assert shared["visibility"] == "shared" and shared["shares"] == [{"kind": "user", "principal": "ann"}]
    assert datasets.describe(db, "prof", "notes", Caller("ann"))["ref"] == "prof/notes"  # ann reads it now
    with pytest.raises(UserError) as err:  # a reader may not share it on
        datasets.add_share(db, "prof", "notes", "user", "bob", Caller("ann"))
    assert err.value.status_code == 403
    datasets.remove_share(db, "prof", "notes", "user", "ann", Caller("prof"))
    with pytest.raises(UserError) as err:
        datasets.remove_share(db, "prof", "notes", "user", "ann", Caller("prof"))
    assert (err.value.status_code, err.value.jupyterhub_message) == (
        404,
        "prof/notes is not shared with the user “ann”.",
    )
    assert datasets.describe(db, "prof", "notes", Caller("prof"))["visibility"] == "shared"  # stays
    with pytest.raises(UserError):  # ann no longer reads it
        datasets.describe(db, "prof", "notes", Caller("ann"))
