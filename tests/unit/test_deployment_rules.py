"""Deployments' pure rules (#33): what a user may ask (specs), what the router lets through both ways
(forward), the latency quantiles (traffic). The real thing: tests/integration/test_deployments.py."""

from __future__ import annotations

import pytest

from workspace.caller import Caller
from workspace.deployments import specs, traffic
from workspace.deployments.records import BUCKETS
from workspace.errors import UserError
from workspace.router.access import KEY_HEADER, contained_cookie, platform_cookie, without_platform_cookies

OWN = "service-workspace-router"


@pytest.mark.parametrize("name", ["digits", "a", "cs101-lab2.api", "x_y"])
def test_good_names(name):
    assert specs.parse_name(name) == name


@pytest.mark.parametrize("name", ["", "Digits", "-x", "a" * 64, "deploy-0123456789ab", None, 3, "a/b", "a b"])
def test_bad_names_are_the_users_400(name):
    with pytest.raises(UserError) as e:
        specs.parse_name(name)
    assert e.value.status_code == 400


@pytest.mark.parametrize("port", [80, 1023, 8888, 2222, 65536, "x", True, None, 8080.5])
def test_bad_ports(port):
    with pytest.raises(UserError):
        specs.parse_port(port)


def test_ports_replicas_ready_idle():
    assert specs.parse_port("8080") == 8080 and specs.parse_replicas(2, 4) == 2
    with pytest.raises(UserError):
        specs.parse_replicas(5, 4)
    assert specs.parse_ready(None) == "/" and specs.parse_ready("/health?x=1") == "/health?x=1"
    for bad in ("health", "/a b", "/\n", "/" + "a" * 600):
        with pytest.raises(UserError):
            specs.parse_ready(bad)
    assert specs.parse_idle(0) is None and specs.parse_idle("120") == 120
    with pytest.raises(UserError):
        specs.parse_idle(30)


def test_course_access_needs_a_course_of_ones_own():
    ada = Caller("ada", {"cs101"})
    assert specs.parse_access("course", "cs101", ada) == ("course", "cs101")
    assert specs.parse_access(None, None, ada) == ("private", None)
    with pytest.raises(UserError) as e:
        specs.parse_access("course", "cs999", ada)
    assert e.value.status_code == 403
    assert specs.parse_access("course", "cs999", Caller("root", admin=True)) == ("course", "cs999")
    with pytest.raises(UserError):
        specs.parse_access("public", "cs101", ada)


def test_images_are_the_sites_or_a_users():
    images = {"workspace-base:latest": "workspace-base:latest"}
    assert specs.parse_image("workspace-base:latest", images) == "workspace-base:latest"
    assert specs.parse_image("ada/torch", images) == "ada/torch"  # a user's: checked at each start
    for bad in ("evil:latest", None, 3, "x" * 300 + "/y"):
        with pytest.raises(UserError):
            specs.parse_image(bad, images)


def test_the_app_cannot_set_the_platforms_cookies_nor_leave_its_path():
    prefix = "/serve/ada/digits"
    assert contained_cookie("app=1; Path=/; HttpOnly", prefix, OWN) == "app=1; HttpOnly; Path=/serve/ada/digits/"
    assert contained_cookie("a=1; Domain=.example.org; path=/hub/", prefix, OWN) == "a=1; Path=/serve/ada/digits/"
    for name in ("jupyterhub-session-id", "jupyterhub-hub-login", "_xsrf", OWN, "__Host-jupyterhub-session-id"):
        assert contained_cookie(f"{name}=evil; Path=/hub/", prefix, OWN) is None
    assert contained_cookie("=x", prefix, OWN) is None


def test_the_app_never_sees_the_platforms_cookies():
    header = f"app=1; {OWN}=secret; jupyterhub-session-id=s; _xsrf=t; theme=dark"
    assert without_platform_cookies(header, OWN) == "app=1; theme=dark"
    assert platform_cookie("jupyterhub-user-ada", OWN) and not platform_cookie("jupyter", OWN)


def test_only_a_well_formed_key_is_a_key():
    key = "wsk_" + "A" * 43
    assert KEY_HEADER.match(f"Bearer {key}").group(1) == key
    assert KEY_HEADER.match(f"bearer  {key} ")
    for header in (f"token {key}", f"Bearer {key}x", "Bearer wsk_short", f"Basic {key}"):
        assert not KEY_HEADER.match(header)


def test_latency_quantiles_from_the_buckets():
    counts = traffic.Counts()
    for seconds in [0.001] * 98 + [0.2, 40.0]:
        counts.add(seconds, False, None)
    assert counts.requests == 100 and sum(counts.buckets) == 100
    assert traffic.quantile(counts.buckets, 0.5) == BUCKETS[0]
    assert traffic.quantile(counts.buckets, 0.99) == 0.25
    assert traffic.quantile(counts.buckets, 1.0) == float("inf")
    assert traffic.quantile([0] * len(counts.buckets), 0.5) is None


def test_only_a_request_that_never_reached_a_replica_or_changes_nothing_goes_to_the_next():
    import aiohttp

    from workspace.router.upstream import unreached

    refused = aiohttp.ClientConnectorError(None, OSError(111, "refused"))
    dropped = aiohttp.ServerDisconnectedError()
    assert unreached(refused, "POST") and unreached(aiohttp.ConnectionTimeoutError(), "POST")
    assert unreached(dropped, "GET") and unreached(dropped, "PUT")
    assert not unreached(dropped, "POST")  # it may have been done: never twice
    assert not unreached(aiohttp.SocketTimeoutError(), "POST")


def test_a_websocket_closed_by_the_replica_closes_the_visitors_with_a_code_that_may_be_sent():
    from workspace.router.sockets import close_code

    assert close_code(1000) == 1000 and close_code(4001) == 4001
    # none, or one that only reports (abnormal closure, no status): "internal error" instead
    assert close_code(None) == close_code(1006) == close_code(1005) == close_code(70000) == 1011
