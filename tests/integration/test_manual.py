"""The manual (#35) at /services/workspace/docs/: in the reader's language, to anyone, its own files only.

The attack test beside it: a path that climbs out of the built site reads nothing of the host, and the
language redirect never leads off the site."""

from __future__ import annotations

import http.client
import re
from urllib.parse import urlsplit

import pytest
import requests
from requests.structures import CaseInsensitiveDict

from tests.integration.hub import Hub
from workspace.setup import manual

CJK = re.compile(r"[\u4e00-\u9fff]")
DOCS = "/services/workspace/docs/"


@pytest.fixture(scope="module")
def built():
    """The site as `make docs` builds it (make test builds it first; a bare pytest run, here)."""
    if not all((manual.OUT / locale / "index.html").is_file() for locale in ("en", "zh_CN")):
        manual.build()


def raw_get(hub: Hub, path: str) -> tuple[int, CaseInsensitiveDict, bytes]:
    """GET `path` exactly as written (no client normalising `..` or percent-escapes away)."""
    where = urlsplit(hub.url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, CaseInsensitiveDict(r.getheaders()), r.read()  # (the proxy sends names lower-case)
    finally:
        conn.close()


def test_the_manual_opens_in_the_readers_language_without_a_login(hub: Hub, built):
    r = requests.get(f"{hub.url}{DOCS}", headers={"Accept-Language": "zh-CN,zh;q=0.9"}, allow_redirects=False)
    assert r.status_code == 302 and r.headers["Location"] == f"{DOCS}zh_CN/", r.headers
    # a page's address without a language (what the pages link to): the language chosen in the header wins
    r = requests.get(
        f"{hub.url}{DOCS}students/errors.html",
        headers={"Accept-Language": "zh-CN"},
        cookies={"workspace-lang": "en"},
        allow_redirects=False,
        timeout=30,
    )
    assert r.status_code == 302 and r.headers["Location"] == f"{DOCS}en/students/errors.html", r.headers
    page = requests.get(f"{hub.url}{r.headers['Location']}", timeout=30)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert 'id="start-failures"' in page.text and page.headers["X-Content-Type-Options"] == "nosniff"
    chinese = requests.get(f"{hub.url}{DOCS}zh_CN/students/index.html", timeout=30)
    assert chinese.status_code == 200 and len(CJK.findall(chinese.text)) > 50, chinese.text[:500]
    # the reference is generated from the code: every operation of the API, every command
    api = requests.get(f"{hub.url}{DOCS}en/reference/rest-api.html", timeout=30).text
    assert "/workspaces/{name}/executions" in api and "schema-execution" in api
    assert "workspace start" in requests.get(f"{hub.url}{DOCS}en/reference/cli.html", timeout=30).text
    # an address the site lacks: a sentence and the way back, in the reader's language
    missing = requests.get(f"{hub.url}{DOCS}zh_CN/no-such-page.html", headers={"Accept-Language": "zh-CN"})
    assert missing.status_code == 404 and CJK.search(missing.text) and f"{DOCS}zh_CN/" in missing.text


@pytest.mark.parametrize(
    "path",
    [
        f"{DOCS}en/../../../../../../../../etc/passwd",
        f"{DOCS}en/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        f"{DOCS}en/..%2f..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
        f"{DOCS}en//etc/passwd",
        f"{DOCS}en/%2fetc%2fpasswd",
        f"{DOCS}zh_CN/../../../conf.py",
    ],
)
def test_a_path_out_of_the_site_reads_nothing_of_the_host(hub: Hub, built, path):
    status, headers, body = raw_get(hub, path)
    assert b"root:" not in body and b"extensions" not in body, (status, body[:200])
    assert status in (302, 400, 403, 404), (status, headers)
    if status == 302:  # (the proxy or the redirect tidied it: still within the manual)
        assert headers["Location"].startswith(DOCS), headers


@pytest.mark.parametrize(
    "path", [f"{DOCS}/evil.example/x", f"{DOCS}%2F%2Fevil.example", f"{DOCS}%5C%5Cevil.example", f"{DOCS}https:"]
)
def test_the_language_redirect_never_leaves_the_site(hub: Hub, built, path):
    status, headers, _ = raw_get(hub, path)
    if status in (301, 302, 303, 307, 308):
        location = headers["Location"]
        assert location.startswith(DOCS) and not location.startswith("//"), location
    else:
        assert status in (400, 403, 404), (status, headers)
