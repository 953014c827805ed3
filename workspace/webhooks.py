"""A user's webhook (#17): a URL the hub calls when one of their tasks ends.

The URL is the user's to choose, so the call is made as to a stranger: http
or https only, no credentials of ours, no redirect followed, a short timeout,
and never to an address of the hub's own networks (loopback, private,
link-local, the cloud's metadata address ...) unless the site lists that
network in `Culler.webhook_networks`. The addresses are checked where the
connection is made (a resolver that drops every other address), so a name
that resolves elsewhere between a check and the call (DNS rebinding) gains
nothing. Each call is signed with the user's own secret:
`X-Workspace-Signature: sha256=HMAC(secret, body)`, so their receiver can
tell it from anyone else's POST.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import ipaddress
import json
import secrets
import socket
from urllib.parse import urlsplit

from sqlalchemy import DateTime, String, Text
from sqlalchemy.orm import Mapped, mapped_column
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.netutil import DefaultExecutorResolver, Resolver

from workspace.db import Base, Database, iso, utcnow
from workspace.errors import UserError
from workspace.vault import Sealed

URL_MAX = 2048
TIMEOUT = 10.0


class Webhook(Base):
    __tablename__ = "webhooks"

    owner: Mapped[str] = mapped_column(String(255), primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    secret: Mapped[str] = mapped_column(Sealed)  # sealed at rest (workspace/vault.py)
    updated: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    last_sent: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    last_result: Mapped[str | None] = mapped_column(Text, nullable=True)  # "200", or why it failed

    def as_dict(self) -> dict:
        return {
            "url": self.url,
            "secret": self.secret,
            "updated": iso(self.updated),
            "last_sent": iso(self.last_sent),
            "last_result": self.last_result,
        }


def networks(values) -> list:
    """`webhook_networks` parsed (a site's mistake is the service's start error, not a silent allow-all)."""
    return [ipaddress.ip_network(v, strict=False) for v in values]


def allowed(address: str, extra: list) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if getattr(ip, "ipv4_mapped", None):
        ip = ip.ipv4_mapped
    return any(ip in n for n in extra) or ip.is_global


def check_url(value, extra: list) -> str:
    """A webhook URL, or the user's 400 saying what one must be."""
    if not isinstance(value, str) or not value.strip():
        raise UserError(400, "Give the webhook's “url”, like https://example.org/hooks/workspace.")
    url = value.strip()
    if len(url) > URL_MAX or any(c in url for c in "\0\r\n\t "):
        raise UserError(400, "That is not a URL the hub can call (too long, or with spaces or control characters).")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        raise UserError(400, "That is not a URL the hub can call.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(400, "A webhook must be an http:// or https:// URL with a host name.")
    if parts.username or parts.password:
        raise UserError(400, "Put no user name or password in the webhook's URL; check the signature instead.")
    try:
        literal = ipaddress.ip_address(parts.hostname)
    except ValueError:
        return url  # a name: its addresses are checked at each call
    if not allowed(str(literal), extra):
        raise UserError(
            400, "The hub does not call {host}: it is an address of a private network.", host=parts.hostname
        )
    return url


class PublicResolver(Resolver):
    """Resolves as usual, then keeps only the addresses a webhook may reach."""

    def initialize(self, extra: list):
        self.extra = extra
        self.inner = DefaultExecutorResolver()

    async def resolve(self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC):
        found = await self.inner.resolve(host, port, family)
        kept = [(fam, addr) for fam, addr in found if allowed(addr[0], self.extra)]
        if not kept:
            raise OSError(f"{host} resolves only to addresses of private networks, which the hub does not call")
        return kept


def set_url(db: Database, owner: str, url: str) -> dict:
    with db.session() as s:
        hook = s.get(Webhook, owner)
        if hook is None:
            hook = Webhook(owner=owner, url=url, secret=secrets.token_hex(32))
            s.add(hook)
        hook.url, hook.updated, hook.last_result = url, utcnow(), None
        s.flush()
        return hook.as_dict()


def get(db: Database, owner: str) -> dict | None:
    with db.session() as s:
        hook = s.get(Webhook, owner)
        return hook.as_dict() if hook else None


def remove(db: Database, owner: str) -> bool:
    with db.session() as s:
        hook = s.get(Webhook, owner)
        if hook is not None:
            s.delete(hook)
        return hook is not None


def of_owners(db: Database, owners: set[str]) -> dict[str, tuple[str, str]]:
    """{owner: (url, secret)} of those who set one."""
    from sqlalchemy import select

    with db.session() as s:
        return {h.owner: (h.url, h.secret) for h in s.scalars(select(Webhook).where(Webhook.owner.in_(owners)))}


def record(db: Database, owner: str, result: str) -> None:
    with db.session() as s:
        hook = s.get(Webhook, owner)
        if hook is not None:
            hook.last_sent, hook.last_result = utcnow(), result[:500]


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def deliver(url: str, secret: str, payload: dict, extra: list) -> str:
    """POST `payload` to a user's webhook; what came of it ("200", or a sentence), never raising."""
    body = json.dumps(payload).encode()
    client = AsyncHTTPClient(force_instance=True, resolver=PublicResolver(extra=extra))
    try:
        response = await client.fetch(
            HTTPRequest(
                url,
                method="POST",
                body=body,
                headers={
                    "Content-Type": "application/json",
                    "User-Agent": "workspace-webhook",
                    "X-Workspace-Event": payload.get("event", ""),
                    "X-Workspace-Signature": signature(secret, body),
                },
                follow_redirects=False,
                connect_timeout=TIMEOUT,
                request_timeout=TIMEOUT,
            ),
            raise_error=False,
        )
        return str(response.code) if response.code != 599 else f"failed: {response.error}"
    except Exception as e:  # a URL that stopped parsing, a resolver refusal
        return f"failed: {e}"
    finally:
        client.close()
