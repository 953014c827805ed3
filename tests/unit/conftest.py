"""Fixtures the unit tests share: a real database on each engine, and a copying home store in a temporary directory.

`database` (and `database_url`, for a test that opens the same database twice)
is parametrized: every test that takes it runs on SQLite (a file in the test's
temporary directory) and on PostgreSQL (a fresh database of its own on the
throwaway server of workspace/setup/postgres.py, dropped afterwards). The
PostgreSQL variant is marked `postgres`: it skips with the reason when no
server can run here, and fails under CI=true (tests/conftest.py).
`WORKSPACE_TEST_POSTGRES_URL` points the tests at another server instead (a
URL to a database from which the tests may create and drop databases).
"""

import os
import uuid

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from workspace.db import Database
from workspace.settings import Settings
from workspace.setup import deploy, postgres
from workspace.setup.steps import SetupError
from workspace.store.homes import CopyHomeStore


@pytest.fixture(scope="session")
def postgres_admin():
    """An AUTOCOMMIT engine on the test server's maintenance database (starts the server when needed)."""
    admin_url = os.environ.get("WORKSPACE_TEST_POSTGRES_URL")
    if not admin_url:
        if postgres.bindir() is None:
            pytest.skip("PostgreSQL is not installed (`make test` installs Debian's postgresql)")
        try:
            admin_url = postgres.start(Settings.from_env(base=deploy.ROOT).data_dir)
        except SetupError as e:
            pytest.skip(f"The test PostgreSQL did not start: {e}")
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as e:  # noqa: BLE001  (any failure to connect is the reason to skip)
        pytest.skip(f"The test PostgreSQL at {engine.url} does not answer: {str(e).strip().splitlines()[0]}")
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request, tmp_path):
    """The URL of a fresh, empty database: a SQLite file, or a PostgreSQL database of this test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'w.sqlite'}"
    else:
        yield request.getfixturevalue("postgres_url")


@pytest.fixture
def postgres_url(postgres_admin):
    """A fresh, empty PostgreSQL database of this test's own, dropped afterwards (mark the test `postgres`)."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    with postgres_admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(postgres_admin.url).set(database=name).render_as_string(hide_password=False)
    with postgres_admin.connect() as conn:
        # FORCE: a connection the test left open (a pool not disposed) does not keep it alive
        conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))


@pytest.fixture
def database(database_url, tmp_path) -> Database:
    """A migrated database on SQLite and on PostgreSQL (the test runs once on each), its secrets sealed with
    a key of the test's own (workspace/vault.py)."""
    db = Database(database_url, key_file=tmp_path / "secrets" / "workspace.key")
    yield db
    db.engine.dispose()


@pytest.fixture
def store(tmp_path) -> CopyHomeStore:
    return CopyHomeStore(root=str(tmp_path / "store"), uid=os.getuid(), gid=os.getgid()).setup()
