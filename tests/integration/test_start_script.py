"""Start scripts (#18): ~/.workspace/start.sh runs at every start before the server; its lines show as
progress and stay in the execution's log; a failing one does not stop the start."""

from __future__ import annotations

import time

from .hub import Hub


def messages(events: list[dict]) -> list[str]:
    return [e.get("message", "") for e in events]


def kept_log(hub: Hub, token: str, name: str, number: int) -> str:
    deadline = time.monotonic() + 60
    while True:
        r = hub.service_call("GET", f"/workspaces/{name}/executions/{number}/logs", token)
        if r.status_code == 200 and r.text:
            return r.text
        assert time.monotonic() < deadline, r.text
        time.sleep(0.5)


def test_the_start_script_runs_before_the_server_and_its_lines_are_shown_and_kept(hub: Hub):
    user, ws = "stella", "boot"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    hub.sh(
        user,
        ws,
        "mkdir -p ~/.workspace && printf '%s\\n' 'echo preparing data' 'pip --version | cut -c1-3' "
        "'touch ~/ran-at-start' 'echo \"<b>not markup</b>\"' > ~/.workspace/start.sh",
    )
    hub.stop_workspace(user, ws, token)
    events = hub.start_workspace(user, ws, token)
    shown = messages(events)
    assert "[start.sh] preparing data" in shown and "[start.sh] pip" in shown, shown
    assert "[start.sh] <b>not markup</b>" in shown and "[start.sh] done" in shown, shown
    assert hub.sh(user, ws, "ls ~/ran-at-start").strip().endswith("ran-at-start")
    number = hub.executions(user, ws)[-1]["number"]
    # while it runs, its log (the server's) has the script's lines too; and after it stops
    assert "[start.sh] preparing data" in kept_log(hub, token, ws, number)
    hub.stop_workspace(user, ws, token)
    log = kept_log(hub, token, ws, number)
    assert "[start.sh] preparing data" in log and "[start.sh] done" in log
    assert hub.executions(user, ws)[-1]["log"]["kept"] > 0


def test_a_failing_start_script_is_said_and_the_workspace_starts(hub: Hub):
    user, ws = "stan", "broken"
    token = hub.user_token(user)
    hub.start_workspace(user, ws, token)
    hub.sh(user, ws, "mkdir -p ~/.workspace && printf 'echo about to fail\\nexit 3\\n' > ~/.workspace/start.sh")
    hub.stop_workspace(user, ws, token)
    shown = messages(hub.start_workspace(user, ws, token))
    assert "[start.sh] failed with exit code 3; the workspace starts all the same" in shown, shown
    hub.stop_workspace(user, ws, token)
