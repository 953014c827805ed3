"""The workspace database: engine, sessions, schema version, time.

SQLite by default (a file in the data directory), PostgreSQL in production.
The schema is versioned with Alembic (already a dependency of JupyterHub):
`upgrade()` brings any database to the newest schema, keeping its records;
every later change to the models comes with a migration in
`workspace/migrations/versions/`.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import threading
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

from workspace import vault

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class Base(DeclarativeBase):
    pass


# -- time -------------------------------------------------------------------------
# One clock for the whole package, so that tests can move it.

_offset = dt.timedelta(0)
_frozen: dt.datetime | None = None  # tests: time stands still (it moves only by move_clock)


def utcnow() -> dt.datetime:
    """Now, in UTC, without tzinfo (as stored in the database)."""
    if _frozen is not None:
        return _frozen + _offset
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) + _offset


def iso(t: dt.datetime | None) -> str | None:
    """A stored (UTC, naive) time as ISO 8601 with the Z the API promises."""
    return t.isoformat() + "Z" if t else None


def move_clock(delta: dt.timedelta) -> None:
    """Tests only: shift utcnow() by `delta`."""
    global _offset
    _offset += delta


def freeze_clock(frozen: bool = True) -> None:
    """Tests only: stop utcnow() where it is (so that no real time leaks into a figure), or let it run."""
    global _frozen
    _frozen = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) if frozen else None


# -- engine ------------------------------------------------------------------------


def make_engine(url: str) -> Engine:
    kwargs = {}
    if url.startswith("sqlite"):
        # the hub and the workspace service share the file: wait for locks
        kwargs["connect_args"] = {"timeout": 30, "check_same_thread": False}
    else:
        # a server (PostgreSQL) may restart or drop idle connections: test each before use
        kwargs["pool_pre_ping"] = True
    engine = create_engine(url, future=True, **kwargs)
    if url.startswith("sqlite"):

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(conn, _record):
            cur = conn.cursor()
            # WAL: readers (the REST API) never block the writer (the spawner)
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=FULL")
            cur.close()

    return engine


def upgrade(engine: Engine) -> None:
    """Migrate the database to the newest schema (safe to call from several processes)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with _migration_lock(engine):
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")


@contextmanager
def _migration_lock(engine: Engine):
    if engine.url.get_backend_name() == "sqlite" and engine.url.database:
        lock_path = f"{engine.url.database}.migrate.lock"
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    elif engine.url.get_backend_name() == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(72616)"))
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(72616)"))
    else:
        yield


class Database:
    """An engine and its session factory, migrated on creation.

    `key_file`: the key that seals the secrets kept in it (workspace/vault.py), made there when missing;
    None: those columns are refused (a tool that reads only the other records)."""

    def __init__(self, url: str, migrate: bool = True, key_file: str | os.PathLike | None = None):
        if url.startswith("sqlite:///"):
            Path(url[len("sqlite:///") :]).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.url = url
        self.engine = make_engine(url)
        vault.attach(self.engine, vault.Vault.from_file(key_file) if key_file else None)
        if migrate:
            upgrade(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False, future=True)

    @contextmanager
    def session(self):
        """A session that commits on success and rolls back on error."""
        s: Session = self._sessions()
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()


_databases: dict[str, Database] = {}
_databases_lock = threading.Lock()


def database(url: str, key_file: str | os.PathLike | None) -> Database:
    """The process-wide Database for `url`, its secrets sealed with the key in `key_file` (created and
    migrated once, also when several threads ask for it at the same time)."""
    with _databases_lock:
        if url not in _databases:
            _databases[url] = Database(url, key_file=key_file)
        return _databases[url]


def default_url(data_dir: str | os.PathLike) -> str:
    return f"sqlite:///{Path(data_dir) / 'workspace.sqlite'}"
