"""Tasks (#17): the command's checks, what is kept of a log, the image's runner (run here with this Python)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from workspace import tasks
from workspace.errors import UserError
from workspace.start_request import parse_task

RUNNER = Path(__file__).resolve().parents[2] / "images/base/rootfs/usr/local/bin/workspace-task"


@pytest.mark.parametrize(
    "value, words",
    [
        (None, "needs"),
        ("", "needs"),
        ("   ", "needs"),
        (3, "needs"),
        ("a\0b", "NUL"),
        ("x" * (tasks.COMMAND_MAX + 1), "at most"),
        ([], "needs"),
        (["python", 3], "needs"),
    ],
)
def test_bad_commands_are_refused_with_a_sentence(value, words):
    with pytest.raises(UserError) as e:
        tasks.parse_command(value)
    assert e.value.status_code == 400 and words in e.value.jupyterhub_message


def test_a_command_is_a_string_or_an_argument_list_joined_for_bash():
    assert tasks.parse_command("python train.py --epochs 3") == "python train.py --epochs 3"
    assert tasks.parse_command(["python", "my file.py", "--x=$HOME"]) == "python 'my file.py' '--x=$HOME'"


def test_task_options_take_only_a_command_and_never_cleanup_mode():
    assert parse_task(None, False) is None
    assert parse_task({"command": "true"}, False) == "true"
    for value in ("true", {"command": "true", "image": "x"}, ["true"]):
        with pytest.raises(UserError):
            parse_task(value, False)
    with pytest.raises(UserError) as e:
        parse_task({"command": "true"}, True)
    assert "Cleanup" in e.value.jupyterhub_message


def test_keep_holds_the_whole_of_a_short_log_and_reads_the_trailer(tmp_path):
    log = [b"2026-01-01T00:00:00Z hello\n", b"2026-01-01T00:00:01Z [workspace-task] exit=3 wrote=6 seconds=1.5\n"]
    kept = tasks.keep(iter(log), tmp_path / "1.log", limit=1 << 20)
    assert (tmp_path / "1.log").read_bytes() == b"".join(log)
    assert (kept.total, kept.kept, kept.exit_code, kept.wrote, kept.dropped) == (
        len(b"".join(log)),
        kept.total,
        3,
        6,
        0,
    )
    assert list(tmp_path.iterdir()) == [tmp_path / "1.log"]  # no temporary file left


def test_keep_holds_the_tail_from_a_whole_line_and_says_what_was_dropped(tmp_path):
    line = b"2026-01-01T00:00:00Z " + b"x" * 78 + b"\n"  # 100 bytes
    chunks = [line * 100 for _ in range(100)]  # 1,000,000 bytes in 10,000 lines
    chunks.append(b"2026-01-01T00:00:09Z [workspace-task] exit=0 wrote=5000000000 seconds=9\n")
    kept = tasks.keep(iter(chunks), tmp_path / "2.log", limit=10_050)
    text = (tmp_path / "2.log").read_bytes()
    first, rest = text.split(b"\n", 1)
    assert first.startswith(b"[workspace] ") and b"were dropped" in first
    assert rest.startswith(b"2026-01-01T00:00:00Z xxx") and len(rest) == kept.kept <= 10_050
    assert kept.wrote == 5_000_000_000 and kept.dropped == 5_000_000_000 - kept.kept
    assert f"{kept.dropped:,}".encode() in first


def test_a_fake_trailer_before_the_last_line_is_not_taken(tmp_path):
    log = [b"t [workspace-task] exit=0 wrote=1 seconds=1\n", b"t more output\n"]
    kept = tasks.keep(iter(log), tmp_path / "3.log", limit=1 << 20)
    assert kept.exit_code is None and kept.wrote is None


def test_reading_a_kept_log_from_an_offset_and_a_missing_one(tmp_path):
    (tmp_path / "4.log").write_bytes(b"abcdef")
    assert b"".join(tasks.read(tmp_path / "4.log", 2)) == b"cdef"
    assert list(tasks.read(tmp_path / "none.log")) == []


@pytest.mark.parametrize(
    "code, seconds, words",
    [(0, 5, "successfully"), (3, 200, "exit code 3 after 3 min 20 s"), (137, None, "signal 9"), (None, 1, "unknown")],
)
def test_how_a_task_ended_is_a_sentence(code, seconds, words):
    assert words in tasks.describe_end(code, seconds)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_runner(tmp_path, command: str, look: bool = True) -> tuple[int, bytes, urllib.error.HTTPError | None]:
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "WORKSPACE_TASK_COMMAND": command,
        "WORKSPACE_TASK_PAGE": "/services/workspace/workspaces/t",
        "JUPYTERHUB_SERVICE_URL": f"http://0.0.0.0:{port}/user/u/t/",
    }
    proc = subprocess.Popen([sys.executable, str(RUNNER)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answer = None
    if look:  # the hub's look at the server
        deadline = time.monotonic() + 10
        while answer is None:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/user/u/t/api")
            opener = urllib.request.build_opener(NoRedirect)
            try:
                opener.open(req, timeout=2)
            except urllib.error.HTTPError as e:
                answer = e
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out + err, answer


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


def test_the_runner_runs_in_the_home_interleaves_output_and_exits_with_the_code(tmp_path):
    code, out, answer = run_runner(tmp_path, "pwd; echo out; echo err >&2; echo out2; exit 3")
    assert code == 3
    assert answer.code == 302 and answer.headers["Location"] == "/services/workspace/workspaces/t"
    lines = out.decode().splitlines()
    assert lines[1:5] == [str(tmp_path), "out", "err", "out2"], lines
    assert lines[0] == "[workspace] $ pwd; echo out; echo err >&2; echo out2; exit 3"
    assert lines[-1].startswith("[workspace-task] exit=3 wrote=") and tasks.TRAILER.search(lines[-1].encode())


def test_the_runner_passes_a_stop_to_everything_the_command_started(tmp_path):
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "JUPYTERHUB_SERVICE_URL": f"http://0.0.0.0:{port}/"}
    env["WORKSPACE_TASK_COMMAND"] = "sleep 300 & sleep 300; echo never"
    proc = subprocess.Popen([sys.executable, str(RUNNER)], env=env, stdout=subprocess.PIPE)
    time.sleep(1.0)
    proc.terminate()
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 128 + 15 and b"never" not in out.split(b"\n", 1)[1]
    assert b"exit=143" in out.splitlines()[-1]


def test_engine_times_are_read_to_the_nanosecond():
    assert tasks.stamp_ns(b"1970-01-01T00:00:01.5Z x") == 1_500_000_000
    assert tasks.stamp_ns(b"1970-01-01T00:00:01.000000007Z x") == 1_000_000_007
    assert tasks.stamp_ns(b"1970-01-01T00:00:02Z x") == 2_000_000_000
    assert tasks.stamp_ns(b"[workspace] 5 bytes dropped") is None


def test_follow_passes_each_line_once_until_the_task_stops_then_reads_once_more():
    log = []  # what the engine holds: (ns, line)
    polls = {"n": 0}

    def read(since):
        # the engine answers from `since` (seconds), a little before the last line seen: overlaps
        return iter([line for ns, line in log if since is None or ns / 1e9 >= since])

    def running():
        polls["n"] += 1
        n = polls["n"]
        log.append((n * 10**9, f"1970-01-01T00:00:{n:02d}.000000001Z line{n}\n".encode()))
        return n < 4

    seen: dict = {}
    out = b"".join(tasks.follow(read, running, pause=0, seen=seen)).decode().splitlines()
    assert [line.split(" ", 1)[1] for line in out] == ["line1", "line2", "line3", "line4"]
    assert seen["last"] == 4 * 10**9 + 1


def test_follow_ends_when_the_reader_leaves():
    calls = {"n": 0}

    def running():
        calls["n"] += 1
        return True

    assert list(tasks.follow(lambda since: iter(()), running, stopped=lambda: calls["n"] >= 3, pause=0)) == []
    assert calls["n"] == 3


def test_read_after_gives_the_kept_lines_after_a_time(tmp_path):
    path = tmp_path / "5.log"
    path.write_bytes(
        b"[workspace] 9 bytes of output were dropped\n"
        b"1970-01-01T00:00:01Z a\n1970-01-01T00:00:02Z b\n1970-01-01T00:00:03Z c\n"
    )
    assert b"".join(tasks.read_after(path, 2 * 10**9)) == b"1970-01-01T00:00:03Z c\n"
    assert len(list(tasks.read_after(path, None))) == 4
    assert list(tasks.read_after(tmp_path / "none.log", None)) == []
