"""The logs the service streams (`?follow=1` of a task's or an image build's log): each one ends with its
client, and one user has at most `WorkspaceService.max_followers_per_user` at once (429 beyond).

A follower asks the engine for what came since its last line every second (workspace/tasks.NewLines);
each ask runs in the shared pool and returns (the engine's log is read without `follow`), so that no
thread is held between two asks, and the follower stops asking as soon as its client has gone
(tornado's `on_connection_close`, or a write that failed). `Followers.active` is how many are open
now: the `workspace_log_followers` metric, which shows one that outlives its client.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

from workspace import tasks
from workspace.errors import UserError

DEFAULT_LIMIT = 4
log = logging.getLogger("workspace.service")


class Followers:
    """The log followers open now, per user (the event loop's own: no lock)."""

    def __init__(self, limit: int = DEFAULT_LIMIT):
        self.limit = limit
        self.of: collections.Counter = collections.Counter()

    @property
    def active(self) -> int:
        return sum(self.of.values())

    @contextlib.contextmanager
    def held(self, who: str):
        """One more follower of `who` while the block runs; the user's 429 when they have `limit` already."""
        if self.of[who] >= self.limit:
            raise UserError(
                429,
                "You are following {count} logs at once already, the most one user may; close one "
                "(or wait until it has ended), then try again.",
                count=self.of[who],
            )
        self.of[who] += 1
        try:
            yield
        finally:
            self.of[who] -= 1
            if not self.of[who]:
                del self.of[who]


async def chunks_of(chunks: Iterable[bytes], blocking: Callable[..., Awaitable]) -> AsyncIterator[bytes]:
    """The chunks of a blocking iterator, each read in the shared pool (one read at a time, none held
    between them); the iterator is closed when the consumer stops early. A read that fails (the engine
    went away mid-read) ends them there."""
    it = await blocking(iter, chunks)
    end = object()
    try:
        while True:
            try:
                chunk = await blocking(next, it, end)
            except Exception as e:
                log.info("a log read ended early: %s", e)
                return
            if chunk is end:
                return
            yield chunk
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            await blocking(close)


async def follow(
    read: Callable[[float | None], Iterable[bytes]],
    running: Callable[[], bool],
    gone: Callable[[], bool],
    blocking: Callable[..., Awaitable],
    pause: float = 1.0,
    seen: dict | None = None,
) -> AsyncIterator[bytes]:
    """tasks.follow without a thread of its own: the engine's log (`read(since)`, blocking) while
    `running()` (blocking), asked again every `pause` seconds and once more after it stopped; ends at
    once when `gone()` (the client left)."""
    lines = tasks.NewLines(seen)
    while not gone():
        still = await blocking(running)
        async with contextlib.aclosing(chunks_of(read(lines.since), blocking)) as chunks:
            async for chunk in chunks:
                for line in lines.feed(chunk):
                    yield line
                if gone():
                    return
        for line in lines.end():
            yield line
        if not still:
            return
        await asyncio.sleep(pause)
