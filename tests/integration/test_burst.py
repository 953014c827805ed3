"""A class's burst on a real hub: starts at once are brought up in turn, never more than the node's
start-up slots at a time, each page showing its place; one owner cannot take every slot.

The hub brings up two at once (WORKSPACE_STARTUP_SLOTS=2). The executions' records say when each start-up
began (`admitted`) and ended (`ready`: its server answered), which is what the checks read.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from workspace.spawner import networks

from .hub import Hub

SLOTS = 2


@pytest.fixture(scope="module")
def burst_hub(start_hub) -> Hub:
    return start_hub(WORKSPACE_STARTUP_SLOTS=str(SLOTS), WORKSPACE_MAX_RUNNING="0")


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def most_at_once(intervals: list[tuple[dt.datetime, dt.datetime]]) -> int:
    """The most intervals that overlap at one moment."""
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def start_all(hub: Hub, starts: list[tuple[str, str]]) -> dict[tuple[str, str], list[dict]]:
    """Request every start at once (a thread each) and follow each to its end; {(user, ws): its events}."""
    tokens = {user: hub.user_token(user) for user, _ in starts}
    events: dict[tuple[str, str], list[dict]] = {}

    def one(user: str, ws: str) -> None:
        r = hub.spawn(user, ws, tokens[user])
        assert r.status_code == 202, r.text
        events[(user, ws)] = hub.progress(user, ws, tokens[user], timeout=300)

    threads = [threading.Thread(target=one, args=s) for s in starts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return events


def test_a_burst_all_starts_in_turn_never_more_than_the_slots_at_once(burst_hub: Hub):
    hub = burst_hub
    starts = [(f"class{i}", "lab") for i in range(6)]
    events = start_all(hub, starts)
    assert all(events[s][-1].get("ready") for s in starts), {s: e[-1] for s, e in events.items()}
    waits = [e["message"] for s in starts for e in events[s] if "position" in e["message"]]
    assert any("yours starts in turn: position" in m for m in waits), waits
    records = [hub.executions(user, ws)[-1] for user, ws in starts]
    spans = [(at(ex["transitions"][1]["at"]), at(ex["ready"])) for ex in records]
    assert all(ex["transitions"][1]["state"] == "preparing" for ex in records)
    assert most_at_once(spans) <= SLOTS, spans  # the node brought up two at a time, not six
    for user, ws in starts:
        hub.stop_workspace(user, ws)


def test_an_owner_whose_start_up_hangs_holds_one_slot_and_the_others_go_past(burst_hub: Hub):
    # attack: mallory's start script sleeps (up to the start script's own limit) in two workspaces, started
    # at once, to hold both slots of the node; one owner has one start-up at a time, so ada's start takes the
    # other slot at once instead of waiting behind mallory's second
    hub = burst_hub
    token = hub.user_token("mallory")
    for ws in ("slow1", "slow2"):
        hub.start_workspace("mallory", ws, token)
        hub.sh("mallory", ws, "mkdir -p ~/.workspace && echo 'sleep 25' > ~/.workspace/start.sh")
        hub.stop_workspace("mallory", ws, token)
    events: dict = {}
    mallory = threading.Thread(
        target=lambda: events.update(start_all(hub, [("mallory", "slow1"), ("mallory", "slow2")]))
    )
    mallory.start()
    deadline = time.monotonic() + 60
    while not all(hub.executions("mallory", ws)[-1]["state"] != "stopped" for ws in ("slow1", "slow2")):
        assert time.monotonic() < deadline, "mallory's starts were not recorded"
        time.sleep(0.2)
    time.sleep(3)  # both of mallory's asked well before ada: the second is first in line for the free slot
    events.update(start_all(hub, [("ada", "quick")]))
    mallory.join(300)
    assert len(events) == 3 and all(e[-1].get("ready") for e in events.values()), events
    slow = {ws: hub.executions("mallory", ws)[-1] for ws in ("slow1", "slow2")}
    quick = hub.executions("ada", "quick")[-1]
    first, second = sorted(slow, key=lambda ws: slow[ws]["ready"])
    assert at(quick["ready"]) < at(slow[first]["ready"]), (quick, slow)  # ada did not wait for mallory's sleep
    began = at(slow[second]["transitions"][1]["at"])
    assert began >= at(slow[first]["ready"]), slow  # mallory's second began when the first was up
    said = [e["message"] for e in events[("mallory", second)]]
    assert any("Your other workspace is starting" in m for m in said), said
    for user, ws in (("mallory", "slow1"), ("mallory", "slow2"), ("ada", "quick")):
        hub.stop_workspace(user, ws)


def test_starts_of_one_owner_at_once_share_the_owners_network(docker_client):
    # the owner's network is made by whichever start comes first; Docker answers the others not "already
    # exists" but "networks have same bridge name" (a 403): that start failed with a 500 before
    deployment = f"wsrace-{uuid.uuid4().hex[:6]}"
    try:
        with ThreadPoolExecutor(8) as pool:
            made = list(
                pool.map(lambda _: networks.ensure(docker_client, deployment, "rita", "10.214.0.0/16", 27), range(8))
            )
        name = networks.name_for(deployment, "rita")
        assert made == [name] * 8
        assert [n.name for n in docker_client.networks.list(names=[name])] == [name]
    finally:
        networks.remove_all(docker_client, deployment)
