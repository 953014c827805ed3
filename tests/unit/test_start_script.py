"""The image's workspace-start (#18 start scripts), run here with bash: what it prints and that the server
always follows."""

from __future__ import annotations

import subprocess
from pathlib import Path

START = Path(__file__).resolve().parents[2] / "images/base/rootfs/usr/local/bin/workspace-start"


def run(home: Path, script: str | None, timeout: str = "60") -> list[str]:
    if script is not None:
        (home / ".workspace").mkdir(parents=True, exist_ok=True)
        (home / ".workspace/start.sh").write_text(script)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "WORKSPACE_START_TIMEOUT": timeout}
    p = subprocess.run(
        ["bash", str(START), "bash", "-c", "echo SERVER timeout=${WORKSPACE_START_TIMEOUT:-unset}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_no_start_script_no_lines(tmp_path):
    assert run(tmp_path, None) == ["SERVER timeout=unset"]


def test_a_start_script_runs_in_the_home_its_lines_marked_then_the_server(tmp_path):
    out = run(tmp_path, "pwd\necho to-stderr >&2\n")
    assert out == [
        "[start.sh] running ~/.workspace/start.sh (at most 60 s)",
        f"[start.sh] {tmp_path}",
        "[start.sh] to-stderr",
        "[start.sh] done",
        "SERVER timeout=unset",
    ]


def test_a_failing_start_script_is_said_and_the_server_starts(tmp_path):
    out = run(tmp_path, "exit 7\n")
    assert out[-2:] == ["[start.sh] failed with exit code 7; the workspace starts all the same", "SERVER timeout=unset"]


def test_an_endless_start_script_is_stopped_at_its_limit(tmp_path):
    out = run(tmp_path, "echo begun\nsleep 1000\n", timeout="1")
    assert out[-2:] == [
        "[start.sh] stopped after 1 s; the workspace starts without it finishing",
        "SERVER timeout=unset",
    ]


def test_a_start_script_cannot_read_the_servers_stdin(tmp_path):
    out = run(tmp_path, "read line && echo got:$line || echo nothing\n")
    assert "[start.sh] nothing" in out


def test_the_hub_follows_a_servers_log_only_when_its_home_may_have_a_start_script(tmp_path):
    from workspace.spawner.execution_logs import may_have_start_script

    home = tmp_path / "home"
    home.mkdir()
    assert not may_have_start_script(home)  # nothing to show: the engine is not asked every second
    (home / ".workspace").mkdir()
    assert not may_have_start_script(home)
    (home / ".workspace/start.sh").write_text("echo hi\n")
    assert may_have_start_script(home)
    # links a student made are never followed, and mean "maybe" (the container's bash follows them)
    (home / ".workspace/start.sh").unlink()
    (home / ".workspace/start.sh").symlink_to("/etc/passwd")
    assert may_have_start_script(home)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".workspace").mkdir(parents=True)
    other = tmp_path / "other-home"
    other.mkdir()
    (other / ".workspace").symlink_to(elsewhere / ".workspace")
    assert may_have_start_script(other)
    (other / ".workspace").unlink()
    (other / ".workspace").write_text("not a directory")
    assert may_have_start_script(other)
    assert may_have_start_script(tmp_path / "on-another-node")  # not here: maybe
