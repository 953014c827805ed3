"""A user's webhook (#17): which URLs, which addresses, the signature."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import socket

import pytest

from workspace import webhooks
from workspace.errors import UserError

NONE: list = []


@pytest.mark.parametrize(
    "url",
    ["https://example.org/hook", "http://hooks.example.org:8080/a?b=c", "https://8.8.8.8/x", "http://[2001:4860::1]/"],
)
def test_public_urls_are_taken(url):
    assert webhooks.check_url(f"  {url} ", NONE) == url


@pytest.mark.parametrize(
    "url, words",
    [
        ("http://127.0.0.1/", "private"),
        ("http://10.1.2.3/", "private"),
        ("http://172.17.0.1:8081/hub/api", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://169.254.169.254/", "private"),
        ("http://[::1]/", "private"),
        ("http://[::ffff:127.0.0.1]/", "private"),
        ("http://[fe80::1]/", "private"),
        ("http://0.0.0.0/", "private"),
        ("ftp://example.org/", "http"),
        ("javascript:alert(1)", "http"),
        ("http:///nohost", "http"),
        ("http://a:b@example.org/", "password"),
        ("http://example.org:99999/", "URL"),
        ("http://example.org/\r\nX: y", "URL"),
        ("http://" + "a" * 3000 + ".org/", "URL"),
        (None, "url"),
        (3, "url"),
    ],
)
def test_other_urls_are_refused_with_a_sentence(url, words):
    with pytest.raises(UserError) as e:
        webhooks.check_url(url, NONE)
    assert e.value.status_code == 400 and words in e.value.jupyterhub_message


def test_a_site_may_allow_its_own_network():
    allowed = webhooks.networks(["10.0.0.0/8", "127.0.0.1/32"])
    assert webhooks.check_url("http://10.9.9.9/", allowed) and webhooks.check_url("http://127.0.0.1:9/", allowed)
    with pytest.raises(UserError):
        webhooks.check_url("http://192.168.0.1/", allowed)
    with pytest.raises(ValueError):
        webhooks.networks(["not-a-network"])


def test_the_resolver_keeps_only_allowed_addresses():
    resolver = webhooks.PublicResolver(extra=NONE)
    with pytest.raises(OSError) as e:
        asyncio.run(resolver.resolve("localhost", 80))
    assert "private networks" in str(e.value)
    kept = asyncio.run(webhooks.PublicResolver(extra=webhooks.networks(["127.0.0.0/8"])).resolve("localhost", 80))
    assert kept and all(addr[0].startswith("127.") for fam, addr in kept if fam == socket.AF_INET)


def test_the_signature_is_an_hmac_of_the_body():
    body = b'{"event": "task.ended"}'
    assert webhooks.signature("s3cret", body) == "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()


def test_a_delivery_to_a_refused_address_says_why_and_does_not_raise():
    result = asyncio.run(webhooks.deliver("http://localhost:9/", "s", {"event": "x"}, NONE))
    assert result.startswith("failed:") and "private networks" in result
