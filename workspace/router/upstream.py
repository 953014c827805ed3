"""The router's connections to the replicas (#33): aiohttp's client, whose pool keeps connections to each
replica open between requests (tornado's client opens one per request, which cost the router most of its
time: benchmarks/serving.py).

Only requests that change nothing (GET, HEAD, OPTIONS, PUT, DELETE) ride the pool: a kept connection the
app has closed meanwhile fails before any answer, and such a request is sent again to the next replica.
Any other request (a POST) gets a connection of its own, so it is never sent on one the app has dropped.
"""

from __future__ import annotations

import aiohttp

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
KEEP_ALIVE = 2.0  # s a pooled connection is kept unused: shorter than the apps' own (uvicorn: 5 s, gunicorn: 2 s)


class Upstream:
    def __init__(self, limit: int):
        self.limit = limit
        self._pooled: aiohttp.ClientSession | None = None
        self._single: aiohttp.ClientSession | None = None

    def session(self, method: str) -> aiohttp.ClientSession:
        """The session a request of `method` is sent with (made on first use, on the running loop)."""
        if method in IDEMPOTENT:
            if self._pooled is None:
                self._pooled = self._make(aiohttp.TCPConnector(limit=self.limit, keepalive_timeout=KEEP_ALIVE))
            return self._pooled
        if self._single is None:
            self._single = self._make(aiohttp.TCPConnector(limit=self.limit, force_close=True))
        return self._single

    def sockets(self) -> aiohttp.ClientSession:
        """The session WebSockets to the replicas are opened with (each on a connection of its own)."""
        return self.session("POST")

    @staticmethod
    def _make(connector: aiohttp.TCPConnector) -> aiohttp.ClientSession:
        # the body passes as the app sent it (not decompressed); no cookie jar: nothing is kept between requests
        return aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept", "Content-Type"),
        )

    async def close(self) -> None:
        for session in (self._pooled, self._single):
            if session is not None:
                await session.close()


def unreached(error: BaseException, method: str) -> bool:
    """Whether a request that got no answer may go to another replica: it never reached this one (no
    connection), or it changes nothing (it may have been sent on a kept connection the app had closed)."""
    if isinstance(error, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)):
        return True
    return method in IDEMPOTENT and isinstance(error, (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError))
