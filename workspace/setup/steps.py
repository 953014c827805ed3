"""Steps of the setup commands (`make up`, `make images`, `make test`).

Every long setup step prints one line when it ends, with its duration, and
sends the output of the commands it runs to a log file. A step that fails
stops the command with one sentence saying what failed and what to do, and
the path of the log to read: never a traceback as the only message.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

# the project's checkout: the Makefile, jupyterhub_config.py, images/, .node/ and data/ are under it
ROOT = Path(__file__).resolve().parents[2]


class SetupError(Exception):
    """A setup step failed; `str(err)` is the sentence shown to the operator."""

    def __init__(self, message: str, log: Path | None = None):
        self.log = log
        if log is not None:
            message = f"{message} Read {log} for the details."
        super().__init__(message)


def say(prefix: str, message: str) -> None:
    print(f"[{prefix}] {message}", flush=True)


@contextmanager
def step(prefix: str, title: str):
    """Time a step and print `[prefix] title ... 12.3 s` when it ends."""
    started = time.monotonic()
    try:
        yield
    except SetupError:
        say(prefix, f"{title} ... failed after {time.monotonic() - started:.1f} s")
        raise
    say(prefix, f"{title} ... {time.monotonic() - started:.1f} s")


def run_logged(cmd, log: Path, failure: str, **kwargs) -> None:
    """Run `cmd`, appending its output to `log`; raise SetupError(failure) if it fails."""
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:  # root's alone (#28)
        out.write(f"\n$ {cmd if isinstance(cmd, str) else ' '.join(map(str, cmd))}\n".encode())
        out.flush()
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, **kwargs)
        except FileNotFoundError as e:
            raise SetupError(f"{failure} ({e.filename} is not installed).", log) from e
    if proc.returncode != 0:
        raise SetupError(f"{failure} (exit status {proc.returncode}).", log)


def apt_install(packages: list[str], log: Path, why: str) -> None:
    """Install Debian packages (as root), for a fresh machine that lacks them."""
    if os.geteuid() != 0:
        raise SetupError(
            f"{why} needs {' '.join(packages)}; install them as root (`apt-get install -y {' '.join(packages)}`)."
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run_logged(["apt-get", "update"], log, "`apt-get update` failed (is the Debian mirror reachable?)", env=env)
    run_logged(
        ["apt-get", "install", "-y", "--no-install-recommends", *packages],
        log,
        f"Installing {' '.join(packages)} with apt-get failed",
        env=env,
    )


def fail(err: SetupError) -> None:
    """Print the one sentence of a failed setup and exit non-zero."""
    print(f"\nerror: {err}", file=sys.stderr, flush=True)
    sys.exit(1)


def port_in_use(ip: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((ip, port))
            return False
        except OSError:
            return True


def refuse_port_in_use(ip: str, port: int, variable: str) -> None:
    """The operator's sentence when another program holds a port this deployment needs (`variable` sets it)."""
    if port_in_use(ip, port):
        raise SetupError(
            f"Port {port} on {ip} is already in use by another program; stop it, "
            f"or choose another port with {variable}=<port> make up."
        )


def wait_exit(pid: int, timeout: float) -> bool:
    """Whether process `pid` is gone within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def terminate(pid: int, wait_s: float) -> bool:
    """SIGTERM, then SIGKILL if `pid` is still there after `wait_s` seconds; whether it ended by itself."""
    os.kill(pid, signal.SIGTERM)
    if wait_exit(pid, wait_s):
        return True
    os.kill(pid, signal.SIGKILL)
    wait_exit(pid, 10)
    return False
