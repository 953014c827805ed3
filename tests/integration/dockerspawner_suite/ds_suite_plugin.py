"""pytest plugin that runs dockerspawner's own test suite, optionally with another spawner class (#14).

dockerspawner's sdist ships tests/test_*.py but not the conftest.py that provides
their fixtures; this plugin is our own stand-in for it, run with `-p ds_suite_plugin`
in the unpacked sdist by tests/integration/test_dockerspawner_contract.py. It reads:

- DS_SUITE_CLASS: "module.Class" to put in place of `dockerspawner.DockerSpawner`
  before the test modules import it (unset: DockerSpawner itself, the baseline).
  Every `from dockerspawner import DockerSpawner` in the tests, the hub's
  spawner_class of `dockerspawner_configured_app`, and `isinstance` checks then
  use that class.
- DS_SUITE_CONFIG: JSON {section: {trait: value}} added to the hub's config
  (what the class needs to run at all, e.g. where its database is).
- DS_SUITE_PREFIX: the container name prefix (default "dockerspawner-test"); the
  containers and networks named with it are removed at the end.
- DS_SUITE_IMAGE: a local image tagged as the images the tests name (nothing
  can be pulled here): quay.io/jupyterhub/singleuser:<X.Y>, :4.0, :4 and busybox:1.29.1.
- DS_SUITE_REPORT: where to write {nodeid: {"outcome", "message"}} as JSON.
"""

from __future__ import annotations

import json
import os
from unittest import mock

import docker as docker_py
import dockerspawner
import dockerspawner.dockerspawner
import pytest
import pytest_asyncio
from jupyterhub.tests.conftest import app as jupyterhub_app  # noqa: F401
from jupyterhub.tests.conftest import io_loop, ssl_tmpdir, user, username  # noqa: F401
from jupyterhub.tests.mocking import MockHub
from traitlets.utils.importstring import import_item

SUBSTITUTE = os.environ.get("DS_SUITE_CLASS")
if SUBSTITUTE:
    _cls = import_item(SUBSTITUTE)
    assert issubclass(_cls, dockerspawner.DockerSpawner), f"{SUBSTITUTE} is not a DockerSpawner"
    dockerspawner.DockerSpawner = _cls
    dockerspawner.dockerspawner.DockerSpawner = _cls
SPAWNER = dockerspawner.DockerSpawner
PREFIX = os.environ.get("DS_SUITE_PREFIX", "dockerspawner-test")
_jh_xy = ".".join(__import__("jupyterhub").__version__.split(".")[:2])
STAND_IN_TAGS = [
    f"quay.io/jupyterhub/singleuser:{_jh_xy}",  # DockerSpawner's default image
    "quay.io/jupyterhub/singleuser:4.0",
    "quay.io/jupyterhub/singleuser:4",
    "busybox:1.29.1",
]


def _bridge_gateway(client) -> str:
    for cfg in client.networks.get("bridge").attrs["IPAM"]["Config"] or []:
        if cfg.get("Gateway"):
            return cfg["Gateway"]
    return "172.17.0.1"


# the containers reach the hub on the host's address on Docker's bridge
MockHub.hub_ip = "0.0.0.0"
MockHub.hub_connect_ip = os.environ.get("HUB_CONNECT_IP") or _bridge_gateway(docker_py.from_env())


def pytest_collection_modifyitems(items):
    # the hub (`app`) lives for a module: its async tests share the module's event loop
    for item in items:
        if pytest_asyncio.is_async_test(item):
            marker = item.get_closest_marker("asyncio")
            if not marker or not marker.kwargs:
                item.add_marker(pytest.mark.asyncio(loop_scope="module"), append=False)


@pytest.fixture
def app(jupyterhub_app):  # noqa: F811
    hub = jupyterhub_app
    hub.config.DockerSpawner.prefix = PREFIX
    for section, values in json.loads(os.environ.get("DS_SUITE_CONFIG") or "{}").items():
        for trait, value in values.items():
            setattr(hub.config[section], trait, value)
    return hub


@pytest.fixture
def named_servers(app):
    with mock.patch.dict(app.tornado_settings, {"allow_named_servers": True, "named_server_limit_per_user": 2}):
        yield


@pytest.fixture
def dockerspawner_configured_app(app, named_servers):
    with mock.patch.dict(app.tornado_settings, {"spawner_class": SPAWNER}):
        yield app


@pytest.fixture(scope="session")
def suite_docker():
    """A client of the engine; the run's containers and networks are removed at the end."""
    client = docker_py.from_env()
    made = []
    yield client, made
    for c in client.containers.list(all=True, filters={"name": PREFIX}):
        if c.name.startswith(PREFIX):
            c.remove(force=True)
    for net in client.networks.list(names=[PREFIX]):
        if net.name.startswith(PREFIX):
            try:
                net.remove()
            except docker_py.errors.APIError:
                pass
    # the stand-in tags stay: the two suites run at once, and one that untagged them at its end took
    # busybox:1.29.1 away from the other mid-test ("No such image"); the contract test removes them


@pytest.fixture(autouse=True)
def stand_in_images(suite_docker):
    """The images the tests name, as tags of a local image (a test may have removed one)."""
    client, made = suite_docker
    source = os.environ.get("DS_SUITE_IMAGE")
    if source:
        for tag in STAND_IN_TAGS:
            try:
                client.images.get(tag)
            except docker_py.errors.ImageNotFound:
                repo, _, version = tag.rpartition(":")
                client.images.get(source).tag(repo, version)
                if tag not in made:
                    made.append(tag)


_outcomes: dict[str, dict] = {}


def pytest_runtest_logreport(report):
    entry = _outcomes.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else f"error in {report.when}"
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash else str(report.longrepr)
        entry["message"] = (entry["message"] + "\n" + message).strip()[:2000]
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"


def pytest_sessionfinish(session):
    path = os.environ.get("DS_SUITE_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(
                {
                    "class": f"{SPAWNER.__module__}.{SPAWNER.__qualname__}",
                    "dockerspawner": dockerspawner.__file__,
                    "tests": _outcomes,
                },
                f,
                indent=1,
            )
