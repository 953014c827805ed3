"""`make test` from a checkout in a private folder (#37).

Debian gives new accounts 0700 home folders, and `/root` is 0700: a checkout
there is out of reach of every other account, the `postgres` server user
included. The test PostgreSQL (workspace/setup/postgres.py) must run whatever
the checkout's parents allow, without opening them: this copies the tracked
tree into a 0700 folder and runs the database tests from there, as `make test`
would, with their own data directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workspace.setup import deploy, postgres

pytestmark = pytest.mark.postgres


def private_checkout(parent: Path) -> Path:
    """The working tree's tracked files (as they are now, not as committed), in `parent/checkout`, `parent` 0700."""
    parent.mkdir(mode=0o700, exist_ok=True)
    parent.chmod(0o700)
    checkout = parent / "checkout"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=deploy.ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = deploy.ROOT / name
        if not source.is_file():
            continue  # deleted in the working tree
        target = checkout / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return checkout


def test_the_database_tests_run_from_a_checkout_in_a_private_folder(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the private-folder case is root's: an ordinary user's cluster lives in its own data directory")
    if postgres.bindir() is None:
        pytest.skip("PostgreSQL is not installed (`make test` installs Debian's postgresql)")
    checkout = private_checkout(tmp_path / "home")
    data_dir = checkout / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKSPACE_")}
    env.update(PYTHONPATH=str(checkout), CI="true")  # a skip of the database tests is a failure
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "postgres", "-n", "0"]
            + ["tests/unit/test_migrations.py"],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-3000:]
        # the cluster is the server user's, outside the private folder, and the folder was not opened
        cluster = postgres.home(data_dir)
        assert checkout not in cluster.parents
        assert (tmp_path / "home").stat().st_mode & 0o777 == 0o700
        assert cluster.stat().st_mode & 0o077 == 0
    finally:
        postgres.stop(data_dir, purge=True)
    assert not postgres.home(data_dir).exists()


def test_a_cluster_whose_data_directory_is_gone_is_removed_at_the_next_start(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("clusters outside the data directory are root's (see workspace/setup/postgres.py)")
    if postgres.bindir() is None:
        pytest.skip("PostgreSQL is not installed (`make test` installs Debian's postgresql)")
    gone = tmp_path / "gone"
    gone.mkdir()
    postgres.start(gone)
    cluster = postgres.home(gone)
    assert postgres.running(gone)
    shutil.rmtree(gone)
    assert cluster in postgres.remove_orphans()
    assert not cluster.exists()
