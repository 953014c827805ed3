"""Suite-wide rules.

Docker tests (marker `docker`, given to everything under tests/integration)
skip with a reason when no engine answers. Under CI (`CI=true`) such a skip
is turned into a failure: CI always has an engine, so a skip there means the
setup is broken and the suite would prove nothing.

PostgreSQL tests (marker `postgres`, the PostgreSQL half of the unit tests'
`database` fixture) follow the same rule: they skip with a reason where no
PostgreSQL server can run, and fail under CI, whose set-up (`make test`)
installs and starts one.

A test marked `optional_image` checks an image that is built only by choice
(`WORKSPACE_BUILD_IMAGES=...,pytorch`): it skips where the image is absent,
CI included.

`make test` runs the files in parallel workers (pytest-xdist, with the scheduler below): each file is one
unit, so its module fixtures (a hub with its own settings) start once and its tests keep their order; the cluster
tests are one unit, as they share the one swarm of namespaced engines this machine can hold.
"""

import os

import pytest

# The suite reads English: the CLI follows the locale environment (workspace/i18n.py), and a developer's
# LANG=zh_CN.UTF-8 would turn the sentences it checks into Chinese. Tests of the languages say theirs.
for _name in ("LC_ALL", "LC_MESSAGES", "LANGUAGE"):
    os.environ.pop(_name, None)
os.environ["LANG"] = "C.UTF-8"


def pytest_xdist_make_scheduler(config, log):
    """Each file is one unit of work, and the cluster tests' files are one together.

    A scheduler of our own rather than `--dist loadgroup` with `xdist_group` markers: pytest 9.2 keeps a
    node's id where xdist 3.8 no longer writes the group into it, so the groups silently fell apart (and
    two workers each tried to bring up the one cluster).
    """
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/cluster/" if path.startswith("tests/cluster/") else path

    return FileScheduling(config, log)


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and _under_ci()):
        return
    if item.get_closest_marker("optional_image"):
        return  # a check of an image a site builds by choice (the pytorch one): it runs where it is present
    for marker, what in (("docker", "A Docker test"), ("postgres", "A PostgreSQL test")):
        if item.get_closest_marker(marker):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            report.outcome = "failed"
            report.longrepr = f"{what} was skipped under CI=true, which is a failure: {reason}"
            return


@pytest.fixture(autouse=True)
def _umask_kept():
    """Loading jupyterhub_config.py sets the hub's umask (077, workspace/data_dir.py) in the process that loads
    it, as it must for the hub; a test that loads it must not change the modes of what later tests create."""
    umask = os.umask(0o022)
    os.umask(umask)
    yield
    os.umask(umask)
