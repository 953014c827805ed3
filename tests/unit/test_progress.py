"""The progress stream replays from its first event on every call."""

import asyncio

from workspace.spawner import WorkspaceMixin


class Progressing(WorkspaceMixin):
    _log_name = "test/server"


async def take(gen, n):
    return [await asyncio.wait_for(gen.__anext__(), 1) for _ in range(n)]


async def test_every_reader_starts_from_the_first_event():
    s = Progressing()
    s._reset_progress()
    s.emit_progress(5, "Preparing the home directory")
    s.emit_progress(30, "Creating the container")

    first = s.progress()
    assert [e["message"] for e in await take(first, 2)] == [
        "Preparing the home directory",
        "Creating the container",
    ]
    # a page reload while the spawn goes on: the same events again, from the start
    second = s.progress()
    assert [e["progress"] for e in await take(second, 2)] == [5, 30]

    # both readers get what comes next
    waiting = asyncio.ensure_future(take(first, 1))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    s.emit_progress(50, "Starting container")
    assert (await waiting)[0]["progress"] == 50
    assert (await take(second, 1))[0]["message"] == "Starting container"
    await first.aclose()
    await second.aclose()


async def test_a_new_start_clears_the_old_events():
    s = Progressing()
    s.emit_progress(5, "old start")
    s._reset_progress()
    s.emit_progress(5, "new start")
    assert (await take(s.progress(), 1))[0]["message"] == "new start"
