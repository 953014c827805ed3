"""The hostile-student suite runs against the real thing, like tests/integration (same fixtures)."""

import pytest

from tests.integration.conftest import btrfs_dir, docker_client, image, pytest_runtest_makereport, start_hub  # noqa: F401


def pytest_collection_modifyitems(items):
    for item in items:
        if "/security/" in str(item.fspath):
            item.add_marker(pytest.mark.docker)
