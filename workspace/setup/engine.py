"""The Docker engine: make sure one answers, and find how containers reach the hub.

`make up` and `make test` call `ensure_engine()`: a machine that ships no
engine gets Debian's `docker.io`, and `dockerd` is started in the background
with its log in a file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import docker

from workspace.setup.steps import SetupError, apt_install, say, step

PREFIX = "engine"
DEFAULT_GATEWAY = "172.17.0.1"


def client(timeout: int = 10) -> docker.DockerClient | None:
    """A client of the local engine, or None when no engine answers."""
    try:
        c = docker.from_env(timeout=timeout)
        c.ping()
        return c
    except Exception:
        return None


def bridge_gateway(c: docker.DockerClient | None = None) -> str:
    """The address of this host on Docker's default bridge (docker0).

    Containers on the bridge reach the hub there, so the hub listens on it.
    """
    c = c or client()
    if c is not None:
        try:
            for cfg in c.networks.get("bridge").attrs["IPAM"]["Config"] or []:
                if cfg.get("Gateway"):
                    return cfg["Gateway"]
        except docker.errors.DockerException:
            pass
    return DEFAULT_GATEWAY


def ensure_engine(log: Path, wait_s: float = 60) -> docker.DockerClient:
    """Return a client of a Docker engine that answers, installing and starting one if needed."""
    c = client()
    if c is not None:
        say(PREFIX, f"Docker engine {c.version().get('Version', '?')} answers")
        return c
    if os.geteuid() != 0:
        raise SetupError(
            "No Docker engine answers and starting one needs root: start dockerd (or run `make` as root) and try again."
        )
    if shutil.which("dockerd") is None:
        with step(PREFIX, "install docker.io (Debian)"):
            apt_install(["docker.io"], log, "Running workspaces")
    with step(PREFIX, f"start dockerd (log: {log})"):
        log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
            proc = subprocess.Popen(
                ["dockerd"],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                # a stock engine's umask (systemd's 022), not ours: what it makes for containers (their
                # hosts and resolv.conf files, volumes) must stay readable by their unprivileged users
                umask=0o022,
            )
        deadline = time.monotonic() + wait_s
        while (c := client(timeout=5)) is None:
            if proc.poll() is not None:
                raise SetupError(f"The Docker engine (dockerd) exited with status {proc.returncode} at start.", log)
            if time.monotonic() > deadline:
                raise SetupError(f"The Docker engine (dockerd) did not answer within {wait_s:.0f} s.", log)
            time.sleep(0.5)
    return c
