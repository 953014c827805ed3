"""Fixtures that run the real thing: a Docker engine, the image, a JupyterHub.

Everything here is marked `docker`: it skips with a reason when no engine
answers, and that skip fails the run under CI=true (see tests/conftest.py).
When a test fails, the hub's log and the logs of its containers are attached
to the report.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import docker
import pytest

from workspace.settings import Settings
from workspace.setup import engine
from workspace.store.homes import mount_loop_btrfs

from .hub import Hub

_running_hubs: list[Hub] = []


def pytest_collection_modifyitems(items):
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when == "call":
        # the test's own hub last: CI shows the end of the output
        funcargs = list(getattr(item, "funcargs", {}).values())
        hubs = sorted(_running_hubs, key=lambda hub: any(hub is value for value in funcargs))
        for hub in hubs:
            report.sections.append((f"hub {hub.deployment} log", hub.log_tail()))
            try:
                report.sections.append((f"hub {hub.deployment} containers", hub.container_logs()))
            except docker.errors.DockerException as e:
                report.sections.append((f"hub {hub.deployment} containers", f"unavailable: {e}"))


@pytest.fixture(scope="session")
def docker_client():
    c = engine.client()
    if c is None:
        pytest.skip("no Docker engine answers: start dockerd, or run `make test`, which starts one")
    return c


@pytest.fixture(scope="session")
def image(docker_client):
    name = Settings.from_env({}).image
    try:
        docker_client.images.get(name)
    except docker.errors.ImageNotFound:
        pytest.skip(f"the image {name} is not built: run `make images` (or `make test`, which builds it)")
    return name


@pytest.fixture(scope="session")
def btrfs_dir(tmp_path_factory):
    """A loop-mounted btrfs for the hubs' home stores, as `make up` makes one."""
    if os.geteuid() != 0 or shutil.which("mkfs.btrfs") is None:
        pytest.skip("a btrfs home store needs root and btrfs-progs (make test installs them)")
    base = tmp_path_factory.mktemp("btrfs")
    mnt = base / "mnt"
    mount_loop_btrfs(base / "store.img", mnt, size="20G")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


class HubStarter:
    """Starts hubs, each keeping its homes on the shared btrfs unless `store_dir` says otherwise; stops them all."""

    def __init__(self, tmp_path_factory, btrfs_dir):
        self.tmp_path_factory, self.btrfs_dir, self.started = tmp_path_factory, btrfs_dir, []

    def __call__(self, store_dir=None, **env) -> Hub:
        data = self.tmp_path_factory.mktemp("hub")
        hub = Hub(data, store_dir=store_dir or self.btrfs_dir / data.name, **env).start()
        self.started.append(hub)
        _running_hubs.append(hub)
        return hub

    def stop_all(self) -> None:
        for hub in self.started:
            hub.stop()
            _running_hubs.remove(hub)


@pytest.fixture(scope="module")
def start_hub(tmp_path_factory, image, btrfs_dir):
    """Start hubs on demand; they are stopped, and their containers removed, when the module's tests are done
    (a hub left running has its service, culler and proxy busy on the machine's two cores for the rest of
    the suite)."""
    starter = HubStarter(tmp_path_factory, btrfs_dir)
    yield starter
    starter.stop_all()


@pytest.fixture(scope="session")
def hub(tmp_path_factory, image, btrfs_dir) -> Hub:
    """The suite's shared hub with the default configuration."""
    starter = HubStarter(tmp_path_factory, btrfs_dir)
    yield starter()
    starter.stop_all()
