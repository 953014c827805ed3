"""Executions with real containers: continue from any earlier one, never lose a home."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import subprocess
import threading
import time
import zipfile

import pytest
import requests

from .hub import Hub


def messages(events: list[dict]) -> str:
    return "\n".join(e.get("message", "") for e in events)


def test_continue_latest_a_number_or_fresh(hub: Hub):
    user, ws = "amy", "lab"
    token = hub.user_token(user)

    hub.start_workspace(user, ws, token)
    hub.sh(user, ws, "echo one > one.txt && mkdir -p results/run1 && echo a > results/run1/a.txt")
    hub.stop_workspace(user, ws, token)

    events = hub.start_workspace(user, ws, token)  # "latest" by default
    assert "Execution #2 continues from #1" in messages(events)
    assert hub.sh(user, ws, "cat one.txt") == "one\n"
    # a directory rename inside the workspace survives (mv dir dir2)
    hub.sh(user, ws, "mv results results-v2 && echo two > two.txt")
    hub.stop_workspace(user, ws, token)

    hub.start_workspace(user, ws, token, continue_from=1)
    out = hub.sh(user, ws, "ls")
    assert "one.txt" in out and "results" in out.split() and "two.txt" not in out, out
    hub.stop_workspace(user, ws, token)

    hub.start_workspace(user, ws, token, continue_from="2")
    out = hub.sh(user, ws, "ls; cat results-v2/run1/a.txt")
    assert "results-v2" in out and "results\n" not in out and out.endswith("a\n"), out
    hub.stop_workspace(user, ws, token)

    hub.start_workspace(user, ws, token, continue_from="fresh")
    assert hub.sh(user, ws, "ls -A | grep -v '^\\.' || true").strip() == ""
    hub.stop_workspace(user, ws, token)

    records = hub.executions(user, ws)
    assert [(e["number"], e["parent"], e["restored_from"]) for e in records] == [
        (1, None, None),
        (2, 1, 1),
        (3, 1, 1),
        (4, 2, 2),
        (5, None, None),
    ]
    for e in records:
        assert e["state"] == "stopped" and e["stop_reason"] == "user" and e["has_output"], e
        assert [t["state"] for t in e["transitions"]][-2:] == ["saving", "stopped"], e
        assert e["save"]["seconds"] is not None


def test_bad_continue_from_is_a_400_and_records_nothing(hub: Hub):
    user, ws = "bob", "w"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    hub.stop_workspace(user, ws, token)

    r = hub.spawn(user, ws, token, {"continue_from": 7})
    assert r.status_code == 400, r.text
    assert r.json()["message"] == "Workspace “w” has no execution #7. It has executions #1."
    r = hub.spawn(user, ws, token, {"continue_from": "yesterday"})
    assert r.status_code == 400, r.text
    assert "must be “latest”, “fresh” or the number of an earlier execution" in r.json()["message"]
    assert len(hub.executions(user, ws)) == 1
    assert hub.containers(user=user) == []

    # another user's execution numbers mean nothing here: carl has no execution #1
    other = hub.user_token("carl")
    r = hub.spawn("carl", ws, other, {"continue_from": 1})
    assert r.status_code == 400 and "has no execution #1" in r.json()["message"], r.text


def local_wheel() -> tuple[str, bytes]:
    """A tiny pure-Python wheel, built here: no index is reachable from a classroom."""
    name = "demo_pkg-1.0-py3-none-any.whl"
    files = {
        "demo_pkg/__init__.py": b"VALUE = 42\n",
        "demo_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
        "demo_pkg-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append("demo_pkg-1.0.dist-info/RECORD,,")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr("demo_pkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return name, buf.getvalue()


def test_pip_install_user_survives_into_the_next_execution(hub: Hub):
    user, ws = "dan", "ml"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    name, wheel = local_wheel()
    r = requests.put(
        f"{hub.url}/user/{user}/{ws}/api/contents/{name}",
        headers={"Authorization": f"token {token}"},
        json={"type": "file", "format": "base64", "content": base64.b64encode(wheel).decode()},
        timeout=30,
    )
    assert r.status_code in (200, 201), r.text
    out = hub.sh(user, ws, f"pip install --user --no-index --no-deps {name} 2>&1")
    assert "Successfully installed demo-pkg-1.0" in out, out
    hub.stop_workspace(user, ws, token)

    hub.start_workspace(user, ws, token)
    out = hub.sh(user, ws, "python -c 'import demo_pkg, sys; print(demo_pkg.VALUE, demo_pkg.__file__)'")
    assert out.startswith("42 /openbayes/home/.local/lib/python3"), out
    hub.stop_workspace(user, ws, token)


def test_closed_while_preparing_continues_from_the_parent(start_hub, tmp_path):
    # The copy backend restores slowly enough to be closed while it restores.
    hub = start_hub(
        store_dir=tmp_path / "copy-store",
    )
    user, ws = "eva", "big"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    hub.sh(
        user,
        ws,
        "mkdir -p many && cd many && for d in $(seq 1 40); do mkdir d$d; "
        "for f in $(seq 1 400); do echo $d-$f > d$d/f$f; done; done; "
        "head -c 300000000 /dev/urandom > /openbayes/home/weights.bin; echo first > /openbayes/home/marker",
    )
    hub.stop_workspace(user, ws, token)

    r = hub.spawn(user, ws, token)
    assert r.status_code in (201, 202), r.text
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        states = [e["state"] for e in hub.executions(user, ws)]
        if len(states) == 2 and states[1] == "restoring":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"execution #2 never reached restoring: {hub.executions(user, ws)}")
    hub.stop_workspace(user, ws, token)  # closes it while it prepares

    second = hub.executions(user, ws)[1]
    assert second["state"] == "stopped" and not second["has_output"], second
    assert "Closed while preparing" in second["stop_detail"], second

    events = hub.start_workspace(user, ws, token, continue_from=2)
    text = messages(events)
    assert "Execution #3 continues from #2, which has no saved output" in text, text
    assert "restoring #1, its nearest earlier execution with output" in text, text
    assert "files/s" in text or "files," in text, text
    assert hub.sh(user, ws, "cat marker") == "first\n"
    third = hub.executions(user, ws)[2]
    assert (third["parent"], third["restored_from"]) == (2, 1), third
    assert third["restore"]["files"] >= 16_000, third
    hub.stop_workspace(user, ws, token)


def test_killed_container_is_lost_with_its_home_saved(hub: Hub):
    user, ws = "fay", "crash"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    hub.sh(user, ws, "echo precious > work.txt")
    (container,) = hub.containers(user=user, server=ws)
    container.kill()
    # JupyterHub's poll notices the dead container and stops the server
    hub.wait_stopped(user, ws, timeout=90)
    (ex,) = hub.executions(user, ws)
    assert ex["state"] == "stopped" and ex["stop_reason"] == "lost", ex
    assert "exited with status 137 (killed)" in ex["stop_detail"], ex
    assert ex["has_output"], ex

    hub.start_workspace(user, ws, token)
    assert hub.sh(user, ws, "cat work.txt") == "precious\n"
    hub.stop_workspace(user, ws, token)


def test_hub_restart_reconciles(start_hub):
    hub = start_hub()
    user = "gus"
    token = hub.user_token(user)
    hub.start_workspace(user, "keep", token)
    hub.start_workspace(user, "dies", token)
    hub.sh(user, "keep", "echo kept > k.txt")
    hub.sh(user, "dies", "echo saved > d.txt")

    hub.proc.terminate()
    hub.proc.wait(30)
    (dying,) = hub.containers(user=user, server="dies")
    dying.kill()  # dies while the hub is down
    hub.start()

    # the running one is still attached and answers through the proxy
    r = requests.get(f"{hub.url}/user/{user}/keep/api/status", headers={"Authorization": f"token {token}"}, timeout=30)
    assert r.status_code == 200, r.text
    # the vanished one was stopped at startup, its home saved
    hub.wait_stopped(user, "dies", timeout=60)
    (ex,) = hub.executions(user, "dies")
    assert ex["state"] == "stopped" and ex["stop_reason"] == "lost" and ex["has_output"], ex

    hub.stop_workspace(user, "keep", token)
    hub.start_workspace(user, "keep", token)
    assert hub.sh(user, "keep", "cat k.txt") == "kept\n"
    hub.stop_workspace(user, "keep", token)
    hub.start_workspace(user, "dies", token)
    assert hub.sh(user, "dies", "cat d.txt") == "saved\n"
    hub.stop_workspace(user, "dies", token)


UNDER_WAY = ("preparing", "pulling", "restoring", "running")


def spawn_aside(hub: Hub, user: str, token: str) -> None:
    try:
        hub.spawn(user, "w", token)
    except requests.RequestException:
        pass  # the hub was killed under it


def test_a_hub_killed_during_a_start_up_has_that_start_ended_by_its_restart(start_hub):
    """#30 (found by tests/cluster/test_chaos.py): the hub dies between a start's admission and its server's
    answer. Its restart ends that execution (nothing ran: nothing saved, no container left) instead of leaving
    it `restoring` for ever, its node's start-up slot and its container taken."""
    hub = start_hub()
    for attempt in range(5):  # the start-up lasts a second or two here: caught before `running` (else another)
        user = f"kit{attempt}"
        token = hub.user_token(user)
        # the hub answers a spawn only once the server is up if that takes under 10 s: asked aside
        threading.Thread(target=spawn_aside, args=(hub, user, token), daemon=True).start()
        deadline = time.monotonic() + 60
        while (hub.executions(user, "w") or [{"state": None}])[-1]["state"] not in UNDER_WAY:
            assert time.monotonic() < deadline, hub.executions(user, "w")
            time.sleep(0.02)
        hub.proc.kill()
        hub.proc.wait(30)
        caught = hub.executions(user, "w")[-1]  # as the dead hub left it
        hub.start()
        if caught["state"] != "running":
            break
    else:
        pytest.fail("the hub was never killed before the start-up ended")
    deadline = time.monotonic() + 60
    while (ex := hub.executions(user, "w")[-1])["state"] not in ("stopped", "failed"):
        assert time.monotonic() < deadline, f"a start-up the hub died during was left {ex['state']}: {ex}"
        time.sleep(0.5)
    assert ex["stop_reason"] == "lost" and "hub restarted while this workspace was starting" in ex["stop_detail"], ex
    assert not ex["has_output"], ex
    hub.wait_stopped(user, "w", timeout=60)
    assert not [c for c in hub.containers(user=user, server="w") if c.status == "running"]
    hub.start_workspace(user, "w", token)  # the next start is not kept waiting
    hub.stop_workspace(user, "w", token)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small filesystem needs root")
def test_full_disk_during_save_loses_nothing_and_the_retry_succeeds(start_hub, tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(small)], check=True)
    try:
        hub = start_hub(store_dir=small / "store")
        user, ws = "hal", "full"
        token = hub.user_token(user)
        hub.start_workspace(user, ws, token)
        hub.sh(user, ws, "head -c 25000000 /dev/urandom > data.bin && sha256sum data.bin > data.sha")
        checksum = hub.sh(user, ws, "cat data.sha")
        filler = small / "filler"
        filler.write_bytes(b"\0" * 30_000_000)  # leaves too little room for the save's copy

        hub.stop_workspace(user, ws, token)
        (ex,) = hub.executions(user, ws)
        assert ex["state"] == "save_failed", ex
        assert "storage is full" in ex["error"] and "Nothing is lost" in ex["error"], ex

        filler.unlink()
        # the next start retries the save first, then continues from it
        events = hub.start_workspace(user, ws, token)
        assert "Execution #2 continues from #1" in messages(events)
        assert hub.sh(user, ws, "sha256sum -c data.sha") == "data.bin: OK\n"
        assert hub.sh(user, ws, "cat data.sha") == checksum
        first = hub.executions(user, ws)[0]
        assert first["state"] == "stopped" and first["has_output"] and first["error"] is None, first
        hub.stop_workspace(user, ws, token)
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)


def test_a_save_interrupted_by_a_hub_crash_is_redone(start_hub, tmp_path):
    # the copy backend saves slowly enough to crash the hub in the middle
    hub = start_hub(store_dir=tmp_path / "copy-store")
    user, ws = "ian", "slow"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    hub.sh(user, ws, "head -c 1500000000 /dev/urandom > big.bin && sha256sum big.bin > big.sha")

    stopping = threading.Thread(target=lambda: hub.api("DELETE", f"/users/{user}/servers/{ws}", token=token))
    stopping.start()
    deadline = time.monotonic() + 60
    while hub.executions(user, ws)[0]["state"] != "saving":
        assert time.monotonic() < deadline, hub.executions(user, ws)
        time.sleep(0.02)
    # "syncing and closing": the save's figures are readable while it runs
    while True:
        ex = hub.service_api(f"/workspaces/{ws}/executions/1", token).json()
        if ex["save_progress"]:
            break
        assert ex["state"] == "saving" and time.monotonic() < deadline, ex
        time.sleep(0.02)
    progress = ex["save_progress"]
    assert progress["bytes_total"] >= 1_500_000_000 and "MB/s" in progress["text"], progress
    hub.proc.kill()  # the hub dies in the middle of the save
    hub.proc.wait(30)
    stopping.join()
    assert hub.executions(user, ws)[0]["state"] == "saving"

    hub.start()
    hub.wait_stopped(user, ws, timeout=120)
    (ex,) = hub.executions(user, ws)
    assert ex["state"] == "stopped" and ex["has_output"], ex
    assert [t["state"] for t in ex["transitions"]][-3:] == ["saving", "saving", "stopped"], ex

    hub.start_workspace(user, ws, token)
    assert hub.sh(user, ws, "sha256sum -c big.sha") == "big.bin: OK\n"
    hub.stop_workspace(user, ws, token)


def test_continue_from_is_not_a_sticky_default(hub: Hub):
    """JupyterHub reuses the last options when none are sent; 'continue from #1' must not stick."""
    user, ws = "joy", "w"
    token = hub.user_token(user)
    r = hub.spawn(user, ws, token, {"continue_from": 5})
    assert r.status_code == 400, r.text
    hub.start_workspace(user, ws, token)  # no options: not the rejected #5
    hub.sh(user, ws, "echo 1 > n")
    hub.stop_workspace(user, ws, token)
    hub.start_workspace(user, ws, token, continue_from=1)
    hub.sh(user, ws, "echo 2 > n")
    hub.stop_workspace(user, ws, token)
    # a plain start (JupyterHub's "Start" button sends no options) continues from the latest
    r = hub.api("POST", f"/users/{user}/servers/{ws}", token=token, json={})
    assert r.status_code in (201, 202), r.text
    assert hub.progress(user, ws, token)[-1].get("ready")
    assert hub.sh(user, ws, "cat n") == "2\n"
    assert hub.executions(user, ws)[-1]["parent"] == 2
    hub.stop_workspace(user, ws, token)


def test_spawn_form_offers_the_executions(hub: Hub):
    user, ws = "kai", "form"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    hub.sh(user, ws, "echo from-1 > f")
    hub.stop_workspace(user, ws, token)

    browser = hub.browser_login(user)
    form = browser.get(f"{hub.url}/hub/spawn/{user}/{ws}", timeout=30)
    assert form.status_code == 200
    html = form.content.decode()
    assert 'name="continue_from"' in html and "#1 — saved output" in html, html

    r = browser.post(
        f"{hub.url}/hub/spawn/{user}/{ws}",
        timeout=60,
        # the hub's own XSRF cookie: the service's pages (where login lands) set one of theirs too
        data={"continue_from": "fresh", "_xsrf": browser.cookies.get("_xsrf", path="/hub/")},
    )
    assert r.status_code == 200, r.status_code
    assert hub.progress(user, ws, token)[-1].get("ready")
    assert hub.executions(user, ws)[-1]["parent"] is None
    assert "f" not in hub.sh(user, ws, "ls").split()
    hub.stop_workspace(user, ws, token)
