"""The databases in a backup: a consistent copy of each, what the workspace database's copy holds, and their
restore onto an empty machine.

A copy is one moment of the database, taken while the hub writes:

- SQLite: the online backup API (`sqlite3.Connection.backup`) copies every page in one read transaction, so
  the copy is one committed state, never a half-written one (copying the file would not be, with its WAL
  beside it); the copy is then a single file (journal mode DELETE).
- PostgreSQL: `pg_dump` (custom format) in a snapshot this process exports (`pg_export_snapshot()`) and
  reads the outputs from in the same transaction, so the list of outputs a backup sends is exactly what
  the dump holds. pg_dump is the host's (the PostgreSQL client, of the server's version or newer).

The records of a copy are read with the ORM's columns and nothing else (no sealed column is opened: the
key that seals them is not needed to back up). After a restore `settle` makes the records say what the
backup could not hold: executions running or saving when it was taken end without an output, and an
output deleted while it was taken is deleted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from sqlalchemy import create_engine, insert, inspect, select, text, update
from sqlalchemy.engine import make_url

from workspace.datasets import DatasetVersion
from workspace.db import utcnow
from workspace.executions import UNFINISHED, Execution, Snapshot, Transition
from workspace.setup import postgres
from workspace.setup.backup_sets import BackupError, Records

CHUNK = 1 << 20


def kind_of(url: str) -> str:
    """The kind of database a URL names, "sqlite" or "postgresql"; BackupError for another."""
    backend = make_url(url).get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise BackupError(f"A {backend} database cannot be backed up here; only SQLite and PostgreSQL can.")
    return backend


def sha256_of(path: Path) -> str:
    """A file's SHA-256 (hex), read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def read_records(conn) -> Records:
    """The outputs, the lineage and the dataset versions the database on `conn` holds."""
    return Records(
        snapshots=[
            (i, k, d is not None) for i, k, d in conn.execute(select(Snapshot.id, Snapshot.key, Snapshot.deleted))
        ],
        executions=[
            tuple(r) for r in conn.execute(select(Execution.id, Execution.snapshot_id, Execution.restored_from_id))
        ],
        versions=[
            tuple(r)
            for r in conn.execute(
                select(DatasetVersion.key, DatasetVersion.dataset_id, DatasetVersion.number).where(
                    DatasetVersion.deleted.is_(None)
                )
            )
        ],
    )


# -- a consistent copy ----------------------------------------------------------------------------


def copy(url: str, target_dir: Path, name: str, records: bool = False) -> tuple[dict, Records | None]:
    """Copy the database at `url` into `target_dir` as `name.sqlite` or `name.pgdump`; (what the manifest says
    of it, and with `records` the records of that very copy)."""
    kind = kind_of(url)
    if kind == "sqlite":
        target = target_dir / f"{name}.sqlite"
        _sqlite_copy(Path(make_url(url).database), target)
        found = None
        if records:
            engine = create_engine(f"sqlite:///{target}")
            try:
                with engine.connect() as conn:
                    found = read_records(conn)
            finally:
                engine.dispose()
    else:
        target = target_dir / f"{name}.pgdump"
        found = _pg_copy(url, target, records)
    entry = {"kind": kind, "file": f"{target_dir.name}/{target.name}", "sha256": sha256_of(target)}
    entry["bytes"] = target.stat().st_size
    return entry, found


def _sqlite_copy(path: Path, target: Path) -> None:
    if not path.is_file():
        raise BackupError(f"The database {path} does not exist; is WORKSPACE_DATA_DIR (or the database's URL) right?")
    src = sqlite3.connect(path, timeout=60)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)  # all pages in one step: one committed state
            dst.execute("PRAGMA journal_mode=DELETE")  # one file, whatever the original's WAL
        finally:
            dst.close()
    except sqlite3.Error as e:
        raise BackupError(f"Copying the database {path} failed ({e}).") from e
    finally:
        src.close()


def _pg_copy(url: str, target: Path, records: bool) -> Records | None:
    """pg_dump of `url` in a snapshot this transaction exports, and the records read in the same snapshot."""
    engine = create_engine(url, isolation_level="REPEATABLE READ")
    try:
        with engine.connect() as conn, conn.begin():
            conn.execute(text("SET TRANSACTION READ ONLY"))
            snapshot = conn.execute(text("SELECT pg_export_snapshot()")).scalar_one()
            found = read_records(conn) if records else None
            _pg_run("pg_dump", url, ["--format=custom", f"--snapshot={snapshot}", f"--file={target}"])
        return found
    except BackupError:
        raise
    except Exception as e:  # noqa: BLE001  (a server that does not answer, a refused login: the sentence says)
        raise BackupError(f"Reading the database {make_url(url).render_as_string()} failed ({_first_line(e)}).") from e
    finally:
        engine.dispose()


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _pg_tool(name: str) -> str:
    found = shutil.which(name) or (str(postgres.bindir() / name) if postgres.bindir() else None)
    if not found:
        raise BackupError(
            f"{name} is not installed; install the PostgreSQL client of the server's version or newer "
            "(`apt-get install postgresql-client`) and try again."
        )
    return found


def _pg_run(tool: str, url: str, args: list[str]) -> None:
    """Run pg_dump or pg_restore against the database at `url` (libpq's connection from the URL's parts)."""
    u = make_url(url)
    env = dict(os.environ)
    if u.password:
        env["PGPASSWORD"] = str(u.password)  # never on the command line, where `ps` shows it
    where = {"host": u.query.get("host") or u.host, "port": u.port, "username": u.username}
    cmd = [_pg_tool(tool), *(f"--{k}={v}" for k, v in where.items() if v), f"--dbname={u.database}", *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip().splitlines()
        raise BackupError(f"{tool} of {u.render_as_string()} failed ({message[-1] if message else proc.returncode}).")


# -- restore ----------------------------------------------------------------------------------------


def check_target(entry: dict, url: str, force: bool, what: str) -> None:
    """Refuse before anything is written: a database of another kind than the copy's, or one that is not
    empty (unless `force`)."""
    kind = kind_of(url)
    if kind != entry["kind"]:
        raise BackupError(
            f"The backup's {what} database is {entry['kind']}, and this machine's is {kind}; "
            f"set its URL to a {entry['kind']} one to restore it."
        )
    if force:
        return
    if kind == "sqlite":
        path = Path(make_url(url).database)
        if path.exists():
            raise BackupError(f"The {what} database {path} exists already; restore onto an empty machine, or --force.")
        return
    engine = create_engine(url)
    try:
        tables = inspect(engine).get_table_names()
    except Exception as e:  # noqa: BLE001
        raise BackupError(f"The {what} database {make_url(url).render_as_string()} does not answer ({_first_line(e)}).")
    finally:
        engine.dispose()
    if tables:
        raise BackupError(
            f"The {what} database {make_url(url).render_as_string()} is not empty; "
            "restore into an empty database, or --force."
        )


def restore(entry: dict, copy_file: Path, url: str, force: bool) -> None:
    """Put the copy `copy_file` in place as the database at `url` (checked with `check_target` first)."""
    if entry["kind"] == "sqlite":
        path = Path(make_url(url).database)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".restore-{path.name}")
        shutil.copyfile(copy_file, tmp)
        os.chmod(tmp, 0o600)
        for stale in (Path(f"{path}-wal"), Path(f"{path}-shm")):  # a --force restore over an old database
            stale.unlink(missing_ok=True)
        os.replace(tmp, path)
        return
    options = ["--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction"]
    _pg_run("pg_restore", url, [*options, *(["--clean", "--if-exists"] if force else []), str(copy_file)])


def settle(url: str, missing: list[dict], backup: str) -> tuple[int, int]:
    """Make the restored records say what backup `backup` could not hold; (executions ended, outputs deleted).

    An execution queued, running or saving when the database was copied had no output yet: it ends,
    stopped, without one (its next start restores the latest output before it). An output or dataset
    version deleted between the database's copy and its own is deleted."""
    now = utcnow()
    sentence = (
        f"Its home was not in the backup {backup} this deployment was restored from: it was running or "
        "being saved when the backup was taken."
    )
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            ended = [r[0] for r in conn.execute(select(Execution.id).where(Execution.state.in_(UNFINISHED)))]
            if ended:
                unfinished = Execution.id.in_(ended)
                conn.execute(
                    update(Execution)
                    .where(unfinished)
                    .values(state="stopped", stopped=now, error=sentence, save_progress=None, lease_owner=None)
                )
                conn.execute(
                    update(Execution).where(unfinished, Execution.stop_reason.is_(None)).values(stop_reason="lost")
                )
                conn.execute(
                    insert(Transition),
                    [{"execution_id": i, "state": "stopped", "at": now, "message": sentence} for i in ended],
                )
            gone = {m["key"] for m in missing}
            deleted = conn.execute(
                update(Snapshot).where(Snapshot.key.in_(gone), Snapshot.deleted.is_(None)).values(deleted=now)
            ).rowcount
            deleted += conn.execute(
                update(DatasetVersion)
                .where(DatasetVersion.key.in_(gone), DatasetVersion.deleted.is_(None))
                .values(deleted=now)
            ).rowcount
    finally:
        engine.dispose()
    return len(ended), deleted
