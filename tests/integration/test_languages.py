"""The API answers in the user's language: a 4xx's sentence in Chinese for Accept-Language: zh-CN (or the
header's switch), in English otherwise; a start's progress in the language it was asked in; the switch
remembers the choice and never redirects off the site."""

from __future__ import annotations

import re

import requests

from tests.integration.hub import Hub

CJK = re.compile(r"[\u4e00-\u9fff]")


def test_a_4xx_reads_in_the_language_asked_for(hub: Hub):
    token = hub.user_token("lin")
    url = f"{hub.url}/services/workspace/api/datasets/lin/nothing"
    auth = {"Authorization": f"token {token}"}

    english = requests.get(url, headers=auth, timeout=30)
    assert english.status_code == 404
    assert english.json()["message"] == "There is no dataset lin/nothing that you can see."
    assert english.headers["Content-Language"] == "en"

    chinese = requests.get(url, headers={**auth, "Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}, timeout=30)
    assert chinese.status_code == 404 and chinese.headers["Content-Language"] == "zh-CN"
    message = chinese.json()["message"]
    assert CJK.search(message) and "lin/nothing" in message, message

    # the header's switch (its cookie) wins over the browser's languages
    chosen = requests.get(
        url, headers={**auth, "Accept-Language": "zh-CN"}, cookies={"workspace-lang": "en"}, timeout=30
    )
    assert chosen.json()["message"] == english.json()["message"]

    # a bad body too: a 400's sentence, not only a 404's
    r = requests.post(
        f"{hub.url}/services/workspace/api/datasets",
        headers={**auth, "Accept-Language": "zh-CN"},
        json={"name": "Bad Name!"},
        timeout=30,
    )
    assert r.status_code == 400 and CJK.search(r.json()["message"]), r.text


def test_a_starts_progress_is_said_in_the_language_it_was_asked_in(hub: Hub):
    token = hub.user_token("mei")
    r = requests.post(
        f"{hub.url}/hub/api/users/mei/servers/lab",
        headers={"Authorization": f"token {token}", "Accept-Language": "zh-CN"},
        json={"user_options": {}, "display_name": "lab"},
        timeout=60,
    )
    assert r.status_code in (201, 202), r.text
    events = hub.progress("mei", "lab", token)
    assert events[-1].get("ready"), events
    said = [e["message"] for e in events if e.get("message")]
    assert sum(bool(CJK.search(m)) for m in said) >= 3, said
    # the first event is the hub's ("Server requested"), the last its "Server ready": both in Chinese too
    assert CJK.search(said[0]) and CJK.search(said[-1]), said
    hub.stop_workspace("mei", "lab", token)


def test_the_language_switch_remembers_and_goes_back_only_within_the_site(hub: Hub):
    switch = f"{hub.url}/services/workspace/language"
    r = requests.get(
        f"{switch}/zh_CN",
        headers={"Referer": f"{hub.url}/services/workspace/datasets?x=1"},
        allow_redirects=False,
        timeout=30,
    )
    assert r.status_code == 302 and r.headers["Location"] == "/services/workspace/datasets?x=1"
    cookie = r.cookies.get("workspace-lang")
    assert cookie == "zh_CN"
    assert "Path=/" in r.headers["Set-Cookie"] and "expires" in r.headers["Set-Cookie"].lower()

    # attack: a Referer (or anything) from another site is no way to send a user there
    for referer in ("https://evil.example/phish", "//evil.example/x", f"{hub.url.replace('127.0.0.1', 'localhost')}/x"):
        r = requests.get(f"{switch}/en", headers={"Referer": referer}, allow_redirects=False, timeout=30)
        assert r.status_code == 302 and r.headers["Location"] == "/services/workspace/workspaces", (referer, r.headers)

    # attack: no language we do not have, and nothing but a known value in the cookie
    r = requests.get(f"{switch}/..%2F..%2Fhub", allow_redirects=False, timeout=30)
    assert r.status_code == 404 and "Set-Cookie" not in r.headers
    r = requests.get(f"{switch}/klingon", headers={"Accept-Language": "zh-CN"}, allow_redirects=False, timeout=30)
    assert r.status_code == 404 and CJK.search(r.text) and "Set-Cookie" not in r.headers
