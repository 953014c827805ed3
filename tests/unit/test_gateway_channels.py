"""The SSH gateway's channel limits (workspace/gateway/server.py): per connection and per user, each
channel counted until it closes. The real gateway's: tests/integration/test_ssh.py."""

import asyncio
import collections
import types

import asyncssh
import pytest

from workspace.gateway.login import parse
from workspace.gateway.server import GatewayConnection


class _Channel:
    """What the count needs of an asyncssh channel: its end."""

    def __init__(self):
        self.closed = asyncio.Event()

    async def wait_closed(self):
        await self.closed.wait()


async def test_channels_are_capped_per_connection_and_per_user_and_freed_when_they_close():
    gateway = types.SimpleNamespace(
        max_channels_per_connection=2, max_channels_per_user=3, channels_of=collections.Counter()
    )
    first, second = GatewayConnection(gateway), GatewayConnection(gateway)
    for conn in (first, second):
        conn.login, conn.peer = parse("ada+thesis"), "127.0.0.1"
    a, b = first._count(_Channel()), first._count(_Channel())
    with pytest.raises(asyncssh.ChannelOpenError) as refused:
        first._count(_Channel())  # the connection's third
    assert refused.value.code == asyncssh.OPEN_RESOURCE_SHORTAGE and "too many channels" in refused.value.reason
    second._count(_Channel())
    with pytest.raises(asyncssh.ChannelOpenError):
        second._count(_Channel())  # ada's fourth, on another connection
    a.closed.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert gateway.channels_of["ada"] == 2
    second._count(_Channel())  # a's place
    second.connection_lost(None)  # its channels go with it
    assert gateway.channels_of["ada"] == 1 and first.channels == 1
    b.closed.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not gateway.channels_of


async def test_a_client_that_goes_while_its_workspace_starts_leaves_nothing_waiting():
    gateway = types.SimpleNamespace(
        max_channels_per_connection=2, max_channels_per_user=3, channels_of=collections.Counter()
    )
    conn = GatewayConnection(gateway)
    conn.login, conn.peer = parse("ada+thesis+start"), "127.0.0.1"
    waited = asyncio.Event()

    async def start_then_connect(chan):  # what _connect does for a +start: wait for the hub, minutes
        waited.set()
        await asyncio.sleep(600)

    conn._connect = start_then_connect
    waiting = asyncio.ensure_future(conn.open_upstream(None))
    await waited.wait()
    conn.connection_lost(None)
    await asyncio.sleep(0)
    assert conn.upstream.cancelled()
    waiting.cancel()
    conn.connection_lost(None)  # twice (asyncssh's callbacks may): no error on the cancelled one
