"""The router's login on its owners' hosts (workspace/router/handoff.py, #33 with per-user origins): a
ticket is taken once, within its time, on the host it was made for, by the browser that started it; the
session it leaves names one host. Each case an attack: a replayed ticket, another browser's, another
host's, an old one, a session cookie tossed from another user's host. A real tornado server; the hub's
OAuth side (who the visitor is) is the integration test's (tests/browser/test_deployment_origins.py)."""

from __future__ import annotations

import json
from http.cookies import SimpleCookie

import pytest
from tornado import web
from tornado.httpclient import AsyncHTTPClient
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

from workspace.origins import serve_url
from workspace.router import handoff
from workspace.router.hosts import ELSEWHERE, HUB, ONE, OWNER, Hosts

HOSTS = Hosts("http://localhost:8000")
OWN = "service-workspace-router"


class HubAuth:
    cookie_name = OWN


class WhoAmI(web.RequestHandler):
    @property
    def hub_auth(self):
        return self.settings["hub_auth"]

    def get(self):
        self.finish(json.dumps(handoff.session_user(self)))


@pytest.fixture
async def server():
    tickets = handoff.Tickets()
    app = web.Application(
        [
            ("/serve/_login", handoff.LoginHandler, dict(hosts=HOSTS, tickets=tickets)),
            ("/serve/whoami", WhoAmI),
        ],
        hub_auth=HubAuth(),
        cookie_secret="s" * 32,
    )
    sock, port = bind_unused_port()
    http = HTTPServer(app)
    http.add_sockets([sock])
    yield tickets, f"http://127.0.0.1:{port}"
    http.stop()


async def get(url: str, host: str, cookies: dict | None = None):
    headers = {"Host": host}
    if cookies:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    return await AsyncHTTPClient().fetch(url, headers=headers, follow_redirects=False, raise_error=False)


def set_cookies(response) -> dict:
    jar = SimpleCookie()
    for value in response.headers.get_list("Set-Cookie"):
        jar.load(value)
    return {k: m.value for k, m in jar.items()}


def ticket(tickets, state="browser-state", host="ada.localhost", to="/serve/ada/digits/?x=1") -> str:
    return tickets.issue("bob", host, handoff.digest(state), to)


async def test_a_ticket_logs_its_browser_in_on_its_host_once(server):
    tickets, url = server
    t = ticket(tickets)
    r = await get(f"{url}/serve/_login?ticket={t}", "ada.localhost:8000", {f"{OWN}-handoff": "browser-state"})
    assert r.code == 302 and r.headers["Location"] == "/serve/ada/digits/?x=1"
    session = set_cookies(r)[f"{OWN}-session"]
    me = await get(f"{url}/serve/whoami", "ada.localhost:8000", {f"{OWN}-session": session})
    assert json.loads(me.body) == "bob"
    # the same ticket again (a link seen in a log, a browser's history): used up
    again = await get(f"{url}/serve/_login?ticket={t}", "ada.localhost:8000", {f"{OWN}-handoff": "browser-state"})
    assert again.code == 403 and f"{OWN}-session" not in set_cookies(again)


async def test_a_session_made_for_one_owners_host_counts_on_no_other(server):
    tickets, url = server
    t = ticket(tickets, host="eve.localhost", to="/serve/eve/app/")
    r = await get(f"{url}/serve/_login?ticket={t}", "eve.localhost:8000", {f"{OWN}-handoff": "browser-state"})
    session = set_cookies(r)[f"{OWN}-session"]
    # eve's scripts set it with Domain=localhost so that it reaches ada's host too (cookie tossing)
    me = await get(f"{url}/serve/whoami", "ada.localhost:8000", {f"{OWN}-session": session})
    assert json.loads(me.body) is None
    forged = await get(f"{url}/serve/whoami", "ada.localhost:8000", {f"{OWN}-session": '{"user":"bob"}'})
    assert json.loads(forged.body) is None


async def test_another_browsers_ticket_is_worth_nothing(server):
    """A ticket taken from someone's redirect (or one the attacker made for themselves, to log a victim in
    as the attacker) needs the browser's own handoff cookie."""
    tickets, url = server
    t = ticket(tickets)
    for cookies in (None, {f"{OWN}-handoff": "attackers-state"}):
        r = await get(f"{url}/serve/_login?ticket={t}", "ada.localhost:8000", cookies)
        assert r.code == 403 and f"{OWN}-session" not in set_cookies(r)
    # and it was used up by the first try
    assert t not in tickets.items


async def test_a_ticket_for_one_host_does_not_log_in_on_another(server):
    tickets, url = server
    t = ticket(tickets, host="ada.localhost")
    r = await get(f"{url}/serve/_login?ticket={t}", "eve.localhost:8000", {f"{OWN}-handoff": "browser-state"})
    assert r.code == 403
    # nor on the hub's own host, where the router's login is the hub's OAuth
    t = ticket(tickets, host="localhost")
    r = await get(f"{url}/serve/_login?ticket={t}", "localhost:8000", {f"{OWN}-handoff": "browser-state"})
    assert r.code == 404


async def test_an_old_ticket_is_refused(server, monkeypatch):
    tickets, url = server
    monkeypatch.setattr(handoff, "TICKET_SECONDS", -1.0)
    t = ticket(tickets)
    r = await get(f"{url}/serve/_login?ticket={t}", "ada.localhost:8000", {f"{OWN}-handoff": "browser-state"})
    assert r.code == 403 and "expired" in r.body.decode()


def test_tickets_are_bounded_per_user_and_in_all():
    tickets = handoff.Tickets()
    first = tickets.issue("eve", "ada.localhost", "0" * 64, "/serve/ada/x/")
    for _ in range(50):
        tickets.issue("eve", "ada.localhost", "0" * 64, "/serve/ada/x/")
    assert len(tickets.items) == handoff.TICKETS_PER_USER and first not in tickets.items
    for i in range(handoff.MAX_TICKETS + 10):
        tickets.issue(f"u{i}", "ada.localhost", "0" * 64, "/serve/ada/x/")
    assert len(tickets.items) == handoff.MAX_TICKETS


@pytest.mark.parametrize(
    "to,ok",
    [
        ("/serve/ada/digits/predict?x=1", True),
        ("/serve/ada/digits", True),
        ("//evil.example/serve/ada/x/", False),
        ("https://evil.example/serve/ada/x/", False),
        ("/serve/ada/x\r\nSet-Cookie: a=b", False),
        ("/serve/ada\\evil.example/x", False),
        ("/hub/admin", False),
    ],
)
def test_where_a_login_may_send_a_browser_on_to(to, ok):
    assert bool(handoff.TARGET.fullmatch(to)) is ok


def test_the_host_a_request_came_to():
    assert HOSTS.place("localhost", "ada") == HUB
    assert HOSTS.place("ADA.localhost", "ada") == OWNER
    assert HOSTS.place("eve.localhost", "ada") == ELSEWHERE
    assert HOSTS.place("ada.localhost.evil.example", "ada") == ELSEWHERE
    assert Hosts(None).place("anything", "ada") == ONE
    assert HOSTS.is_owners("ada.localhost") and not HOSTS.is_owners("localhost")
    assert not HOSTS.is_owners("ada.localhost.evil.example")


def test_a_deployments_address_is_on_its_owners_origin():
    assert serve_url(None, "/serve/ada/digits/") == "/serve/ada/digits/"
    assert serve_url("http://localhost:8000", "/serve/ada/digits/") == "http://ada.localhost:8000/serve/ada/digits/"
    assert (
        serve_url("https://jupyter.uni.example.edu", "/serve/ada/d/")
        == "https://ada.jupyter.uni.example.edu/serve/ada/d/"
    )
