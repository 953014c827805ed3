"""The service's log streams (workspace/service/streams.py): a follower ends when its client goes, asks
nothing of the engine after that, and one user has few at once."""

import asyncio
import functools

import pytest

from workspace.errors import UserError
from workspace.service import streams


def stamped(n: int) -> bytes:
    return f"2026-01-01T00:00:{n:02d}.000000000Z line{n}\n".encode()


async def blocking(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args))


def test_a_follower_stops_asking_the_engine_once_its_client_has_gone():
    reads, lines, client = [], [], {"gone": False}

    def read(since):  # the engine's log so far: one more line each time
        reads.append(since)
        return iter([b"".join(stamped(i) for i in range(len(reads)))])

    async def follow():
        async for line in streams.follow(read, lambda: True, lambda: client["gone"], blocking, pause=0.01):
            lines.append(line)
            if len(lines) == 3:
                client["gone"] = True  # on_connection_close

    asyncio.run(asyncio.wait_for(follow(), 10))
    asked = len(reads)
    assert [x.split()[1] for x in lines] == [b"line0", b"line1", b"line2"]  # each line once
    assert asked <= 4, reads  # not one more read after the client went (a read may be under way)


def test_a_follower_of_an_ended_log_reads_once_more_and_ends():
    reads = []

    def read(since):
        reads.append(since)
        return iter([stamped(1), stamped(2)])

    async def follow():
        return [x async for x in streams.follow(read, lambda: False, lambda: False, blocking, pause=0.01)]

    assert len(asyncio.run(follow())) == 2 and len(reads) == 1


def test_one_user_has_at_most_limit_followers_and_each_frees_its_place():
    followers = streams.Followers(limit=2)
    with followers.held("ada"), followers.held("ada"), followers.held("bob"):
        assert followers.active == 3
        with pytest.raises(UserError) as refused:
            with followers.held("ada"):
                pass
        assert refused.value.status_code == 429 and "following 2 logs at once" in refused.value.message
        assert followers.active == 3
    assert followers.active == 0 and not followers.of


def test_a_read_that_fails_mid_way_ends_the_log_there():
    def engine():
        yield b"first\n"
        raise OSError("the engine went away")

    async def read():
        return [x async for x in streams.chunks_of(engine(), blocking)]

    assert asyncio.run(read()) == [b"first\n"]
