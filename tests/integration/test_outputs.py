"""Outputs through the real hub, proxy and service, of real workspaces: a directory's listing, a file, a
directory as tar.gz and zip equal to the tree (every file's hash), links stored as links and never
followed, who may read whose, the CLI's download, and an instructor's collection of a course's work."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
import requests

from .hub import Hub
from .test_cli import cli

TREE = r"""
cd ~ && mkdir -p results/deep/er empty submission
head -c 3000000 /dev/urandom > results/weights.bin
seq 1 200000 > results/deep/er/numbers.txt
printf 'h\xc3\xa9llo' > 'results/ünï cödé.txt'
echo '<html><script>parent.document.title="pwned"</script></html>' > results/page.html
ln -s /etc etc-link && ln -s /etc/passwd results/passwd && ln -s ../../.. results/up && ln -s numbers.txt results/deep/n
"""


def hashes(hub: Hub, user: str, ws: str, top: str) -> dict[str, str]:
    """sha256 of every regular file under ~/top, as the workspace itself computes them."""
    out = hub.sh(user, ws, f"cd ~/{top} && find . -type f -print0 | xargs -0 sha256sum")
    return {line[66:].removeprefix("./"): line[:64] for line in out.splitlines() if line}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def files(hub: Hub, token: str, url: str, /, **params) -> requests.Response:
    """GET from the workspace service's API (query parameters as keywords, `path` included)."""
    return requests.get(
        f"{hub.url}/services/workspace/api{url}",
        headers={"Authorization": f"token {token}"},
        params=params,
        timeout=120,
    )


@pytest.fixture(scope="module")
def course_hub(start_hub) -> Hub:
    return start_hub(WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}}))


@pytest.fixture(scope="module")
def olga(course_hub: Hub):
    """olga's workspace "thesis", saved as #1 with TREE in it, and its files' hashes."""
    hub = course_hub
    token = hub.user_token("olga")
    hub.start_workspace("olga", "thesis", token)
    hub.sh("olga", "thesis", TREE)
    expected = hashes(hub, "olga", "thesis", "results")
    hub.stop_workspace("olga", "thesis", token)
    return token, expected


def test_a_listing_and_a_file(course_hub: Hub, olga):
    hub, (token, expected) = course_hub, olga
    base = "/workspaces/thesis/executions/1/files"
    r = files(hub, token, base)
    assert r.status_code == 200, r.text
    top = r.json()
    entries = {e["name"]: e for e in top["entries"]}
    assert entries["results"]["type"] == "dir" and entries["empty"]["type"] == "dir"
    assert entries["etc-link"] == {**entries["etc-link"], "type": "link", "target": "/etc"}
    assert top["owner"] == "olga" and top["number"] == 1 and top["total"] == len(top["entries"])
    inner = {e["name"]: e for e in files(hub, token, f"{base}/results").json()["entries"]}
    assert inner["passwd"]["target"] == "/etc/passwd" and inner["up"]["target"] == "../../.."
    page = files(hub, token, f"{base}/results", offset="1", limit="2").json()
    assert [e["name"] for e in page["entries"]] == sorted(inner, key=lambda n: (inner[n]["type"] != "dir", n))[1:3]

    r = files(hub, token, f"{base}/results/weights.bin")
    assert r.status_code == 200 and sha(r.content) == expected["weights.bin"]
    assert r.headers["Content-Disposition"].startswith('attachment; filename="weights.bin"')
    assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["Content-Security-Policy"].startswith(
        "sandbox"
    )
    odd = inner["ünï cödé.txt"]["quoted"]
    assert files(hub, token, f"{base}/{odd}").content == "héllo".encode()
    # an HTML file never comes back as HTML, inline or not
    for params in ({}, {"inline": "1"}):
        r = files(hub, token, f"{base}/results/page.html", **params)
        assert r.status_code == 200 and "html" not in r.headers["Content-Type"], r.headers
        assert "sandbox" in r.headers["Content-Security-Policy"]
    # a byte range (a download that resumes)
    r = requests.get(
        f"{hub.url}/services/workspace/api{base}/results/weights.bin",
        headers={"Authorization": f"token {token}", "Range": "bytes=100-199"},
        timeout=60,
    )
    assert r.status_code == 206 and len(r.content) == 100 and r.headers["Content-Range"] == "bytes 100-199/3000000"


def test_a_directory_as_tar_gz_and_zip_equals_the_tree(course_hub: Hub, olga):
    hub, (token, expected) = course_hub, olga
    r = files(hub, token, "/workspaces/thesis/executions/1/files/results", archive="tar.gz")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/gzip", r.text[:300]
    assert 'filename="results.tar.gz"' in r.headers["Content-Disposition"]
    got, links = {}, {}
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r|gz") as tar:
        for m in tar:
            assert m.name.startswith("results/") or m.name == "results", m.name
            if m.isreg():
                got[m.name[len("results/") :]] = sha(tar.extractfile(m).read())
            elif m.issym():
                links[m.name] = m.linkname
    assert got == expected
    assert links == {"results/passwd": "/etc/passwd", "results/up": "../../..", "results/deep/n": "numbers.txt"}

    r = files(hub, token, "/workspaces/thesis/executions/1/files/results", archive="zip")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        got = {n[len("results/") :]: sha(z.read(n)) for n in z.namelist() if not n.endswith("/")}
        assert "results/passwd: a link to '/etc/passwd'" in z.comment.decode()
    assert got == expected
    # the whole output: the link to /etc is a link, /etc's files are not there
    r = files(hub, token, "/workspaces/thesis/executions/1/files", archive="tar.gz")
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        names = tar.getnames()
        assert tar.getmember("thesis-1/etc-link").issym() and "thesis-1/etc-link/passwd" not in names
    assert (
        b"root:x:0:0" not in r.content
        and b"root:x:0:0"
        not in tarfile.open(fileobj=io.BytesIO(r.content)).extractfile("thesis-1/results/deep/er/numbers.txt").read()
    )


def test_bad_requests_are_sentences(course_hub: Hub, olga):
    hub, (token, _) = course_hub, olga
    base = "/workspaces/thesis/executions"
    for path, params, status, words in (
        (f"{base}/9/files", {}, 404, "has no execution #9"),
        ("/workspaces/nope/executions/1/files", {}, 404, "There is no workspace “nope”."),
        (f"{base}/1/files/results/weights.bin", {"archive": "zip"}, 400, "not a directory"),
        (f"{base}/1/files/results", {"archive": "rar"}, 400, "“archive” must be tar.gz or zip"),
        (f"{base}/1/files/etc-link", {}, 400, "is a link to “/etc”"),
        (f"{base}/1/files/etc-link/passwd", {}, 400, "leads through a link"),
        (f"{base}/1/files/results/passwd", {}, 400, "never followed"),
        (f"{base}/1/files/results/..%2f..%2f..%2fetc", {}, 400, "cannot go up"),
        (f"{base}/1/files/nothing-here", {}, 404, "There is no “nothing-here” in this output."),
        (f"{base}/1/files/results", {"offset": "-1"}, 400, "“offset” must be a whole number"),
        (f"{base}/1/files/results", {"limit": "100000"}, 400, "“limit” must be a whole number"),
    ):
        r = files(hub, token, path, **params)
        assert r.status_code == status and words in r.json()["message"], (path, r.status_code, r.text)


def test_only_the_owner_and_their_instructors_read_an_output(course_hub: Hub, olga):
    hub = course_hub
    other = hub.user_token("mallory")
    r = files(hub, other, "/workspaces/thesis/executions/1/files/results/weights.bin", user="olga")
    assert r.status_code == 403 and "Only administrators" in r.json()["message"]
    r = files(hub, other, "/workspaces/thesis/executions/1/files")  # their own "thesis": none
    assert r.status_code == 404
    prof = hub.user_token("prof")
    assert files(hub, prof, "/workspaces/thesis/executions/1/files", user="olga").status_code == 403  # not enrolled


def test_the_cli_downloads_a_file_a_directory_and_an_archive(course_hub: Hub, olga, tmp_path):
    hub, (token, expected) = course_hub, olga
    out = cli(hub, token, "download", "thesis#1", "results", "-o", str(tmp_path / "res"))
    assert out.startswith(f"unpacked {len(expected)} files") and "results/passwd -> /etc/passwd" not in out, out
    assert "passwd -> /etc/passwd: it points outside" in out, out
    got = {
        str(p.relative_to(tmp_path / "res")): sha(p.read_bytes())
        for p in (tmp_path / "res").rglob("*")
        if p.is_file() and not p.is_symlink()
    }
    assert got == expected
    assert (tmp_path / "res/deep/n").readlink() == Path("numbers.txt")
    assert not (tmp_path / "res/passwd").exists() and not (tmp_path / "res/up").is_symlink()
    out = cli(hub, token, "download", "thesis", "results/deep/er/numbers.txt", "-o", str(tmp_path))
    assert sha((tmp_path / "numbers.txt").read_bytes()) == expected["deep/er/numbers.txt"], out
    out = cli(hub, token, "download", "thesis#1", "-o", str(tmp_path / "all.zip"))
    with zipfile.ZipFile(tmp_path / "all.zip") as z:
        assert sha(z.read("thesis-1/results/weights.bin")) == expected["weights.bin"]
    err = cli(hub, token, "download", "thesis#1", "results", "-o", str(tmp_path / "res"), ok=False)
    assert "exists and is not an empty directory" in err


def test_an_instructor_collects_the_course_work(course_hub: Hub, tmp_path):
    hub = course_hub
    prof = hub.user_token("prof")
    r = hub.service_call("PUT", "/courses/cs101", prof, json={"students": ["ann", "bob"], "workspace": "lab1"})
    assert r.status_code == 200, r.text
    ann, bob, zed = hub.user_token("ann"), hub.user_token("bob"), hub.user_token("zed")
    work = {"ann": "print('ann')", "bob": "print('bob')", "zed": "print('not enrolled')"}
    for user, token in (("ann", ann), ("zed", zed)):
        hub.start_workspace(user, "lab1", token)
        hub.sh(user, "lab1", f'mkdir -p submission && echo "{work[user]}" > submission/main.py && echo s > secret.txt')
        hub.stop_workspace(user, "lab1", token)
    time.sleep(1.5)
    deadline = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"
    time.sleep(1.5)
    hub.start_workspace("bob", "lab1", bob)
    hub.sh(
        "bob",
        "lab1",
        f'mkdir -p submission/data && echo "{work["bob"]}" > submission/main.py && ln -s /etc submission/etc',
    )
    hub.stop_workspace("bob", "lab1", bob)

    # students may not collect, nor read each other's
    r = files(hub, ann, "/courses/cs101/collect", path="submission")
    assert r.status_code == 403 and "Only the instructors of “cs101”" in r.json()["message"]
    assert files(hub, ann, "/workspaces/lab1/executions/1/files", user="bob").status_code == 403
    # the instructor reads a student's output, read-only
    r = files(hub, prof, "/workspaces/lab1/executions/1/files/submission/main.py", user="ann")
    assert r.status_code == 200 and r.text == "print('ann')\n"

    for params, status, words in (
        ({"path": "submission", "before": "yesterday"}, 400, "“before” must be a date or time"),
        ({"path": "../x"}, 400, "cannot go up"),
        ({"path": "submission", "archive": "7z"}, 400, "“archive” must be"),
    ):
        r = files(hub, prof, "/courses/cs101/collect", **params)
        assert r.status_code == status and words in r.json()["message"], r.text
    assert files(hub, prof, "/courses/cs999/collect", path="x").status_code == 403

    r = files(hub, prof, "/courses/cs101/collect", path="submission")
    assert r.status_code == 200, r.text[:300]
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        names = tar.getnames()
        top = "cs101-submission"
        assert tar.extractfile(f"{top}/students/ann/submission/main.py").read() == b"print('ann')\n"
        assert tar.extractfile(f"{top}/students/bob/submission/main.py").read() == b"print('bob')\n"
        assert tar.getmember(f"{top}/students/bob/submission/etc").issym()
        manifest = {m["student"]: m for m in json.loads(tar.extractfile(f"{top}/manifest.json").read())}
        csv_text = tar.extractfile(f"{top}/manifest.csv").read().decode()
    assert not any("zed" in n or "secret" in n for n in names), names
    assert set(manifest) == {"ann", "bob"} and csv_text.startswith("student,workspace,execution,saved_at")
    assert manifest["ann"]["status"] == "collected" and manifest["ann"]["execution"] == 1
    assert manifest["bob"]["files"] == 1 and manifest["bob"]["links"] == 1

    r = files(hub, prof, "/courses/cs101/collect", path="submission", before=deadline, archive="zip")
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        manifest = {m["student"]: m for m in json.loads(z.read("cs101-submission/manifest.json"))}
        assert z.read("cs101-submission/students/ann/submission/main.py") == b"print('ann')\n"
        assert not any("/bob/" in n for n in z.namelist())
    assert manifest["bob"]["status"] == "missing" and "saved nothing of “lab1” before" in manifest["bob"]["reason"]

    out = cli(hub, prof, "collect", "cs101", "--path", "submission", "-o", str(tmp_path / "cs101.tar.gz"))
    assert "2 of 2 students' work" in out and "ann" in out and "bob" in out, out
    assert (tmp_path / "cs101.tar.gz").stat().st_size > 0


def test_a_running_or_deleted_output_is_a_sentence(course_hub: Hub):
    hub = course_hub
    token = hub.user_token("rita")
    hub.start_workspace("rita", "tmp", token)
    r = files(hub, token, "/workspaces/tmp/executions/1/files")
    assert r.status_code == 409 and "is running: its output exists once its home is saved" in r.json()["message"]
    hub.stop_workspace("rita", "tmp", token)
    assert files(hub, token, "/workspaces/tmp/executions/1/files").status_code == 200
    assert hub.service_call("DELETE", "/workspaces/tmp/executions/1/output", token).status_code == 200
    for params in ({}, {"archive": "zip"}):
        r = files(hub, token, "/workspaces/tmp/executions/1/files", **params)
        assert r.status_code == 410 and "The output of “tmp” #1 was deleted on" in r.json()["message"], r.text
