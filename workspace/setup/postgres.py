"""A throwaway PostgreSQL server for the tests: Debian's binaries, a cluster under the data directory.

    python -m workspace.setup.postgres start   initdb (once) and start it; print its URL
    python -m workspace.setup.postgres stop    stop it (its data stays; `stop --purge` deletes it)

The cluster listens only on a unix socket in its own directory (no TCP port:
nothing else on the machine can reach it, and no port can clash), trusts local
connections, and trades durability for speed (`fsync=off`): it holds nothing
but test databases. `make test`'s preparation starts it; the unit tests'
`database` fixture finds it (and starts it when it is not running). Starting it
again reuses a running server.

Where it lives: run as an ordinary user, in `<data dir>/postgres`. As root
(which `initdb` refuses) the cluster belongs to the `postgres` user that
Debian's package creates, and the commands run as that user; that user must
reach the cluster's directory, and a checkout in a private folder (a 0700 home,
`/root`) is out of its reach. So it lives in the server user's own home,
`~postgres/workspace-tests/<hash of the data dir>/` (0700, the server user's),
whatever the checkout's parents allow; the parents are never opened. Each
cluster notes which data directory it serves, and a start removes the clusters
whose data directory is gone: they go with the suite's data.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

from workspace.setup.steps import SetupError, apt_install, fail, run_logged, say, step

PREFIX = "postgres"
SERVER_USER = "postgres"  # the OS user that owns the cluster when we are root (Debian's package creates it)
# test databases only: durability is not wanted, speed is
SETTINGS = {
    "listen_addresses": "''",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "32MB",
}


def bindir() -> Path | None:
    """The newest installed PostgreSQL's bin directory (/usr/lib/postgresql/<version>/bin), or None."""
    found = [
        p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists() and p.parent.name.isdigit()
    ]
    return max(found, key=lambda p: int(p.parent.name)) if found else None


def ensure_installed(log: Path) -> Path:
    """PostgreSQL's binaries, installing Debian's `postgresql` when they are missing (as root)."""
    found = bindir()
    if found is None:
        with step(PREFIX, "install postgresql (Debian)"):
            apt_install(["postgresql"], log, "The tests on PostgreSQL")
        found = bindir()
        if found is None:
            raise SetupError("Debian's postgresql is installed but no /usr/lib/postgresql/<version>/bin/initdb.", log)
    return found


CLUSTERS = "workspace-tests"  # the folder of the test clusters in the server user's home (as root)
SERVES = "data-dir"  # in a cluster's directory: the data directory it serves


def home(data_dir: Path) -> Path:
    """The server's directory: its socket, its log, and its cluster in `data/` (see the module's text)."""
    if os.geteuid() != 0:
        return Path(data_dir) / "postgres"
    key = hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:16]
    return _clusters() / key


def _clusters() -> Path:
    return Path(pwd.getpwnam(SERVER_USER).pw_dir) / CLUSTERS


def _owned_dir(path: Path) -> None:
    """`path` as a directory of the server user's alone (as root)."""
    owner = pwd.getpwnam(SERVER_USER)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.chown(path, owner.pw_uid, owner.pw_gid)
    path.chmod(0o700)


def remove_orphans() -> list[Path]:
    """Stop and delete the clusters whose data directory is gone (as root); the ones removed."""
    if os.geteuid() != 0 or not _clusters().is_dir():
        return []
    removed = []
    for d in sorted(_clusters().iterdir()):
        try:
            served = Path((d / SERVES).read_text().strip())
        except OSError:
            continue  # not one of ours, or one being created: leave it
        if served.is_dir():
            continue
        b = bindir()
        if b is not None and (d / "data" / "PG_VERSION").exists():
            subprocess.run(
                _as_owner([str(b / "pg_ctl"), "stop", "-w", "-m", "immediate", "-D", str(d / "data")]),
                capture_output=True,
            )
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def url(data_dir: Path, database: str = "postgres") -> str:
    """The SQLAlchemy URL of `database` on the test server (psycopg 3, over the unix socket)."""
    return f"postgresql+psycopg://{_user()}@/{database}?host={quote(str(home(data_dir)), safe='/')}"


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", SERVER_USER, "--", *cmd] if os.geteuid() == 0 else cmd


def running(data_dir: Path) -> bool:
    """Whether the server of `data_dir` runs (pg_ctl status)."""
    b = bindir()
    if b is None:  # nor, as root, its server user yet
        return False
    cluster = home(data_dir) / "data"
    if not (cluster / "PG_VERSION").exists():
        return False
    return (
        subprocess.run(_as_owner([str(b / "pg_ctl"), "status", "-D", str(cluster)]), capture_output=True).returncode
        == 0
    )


def start(data_dir: Path) -> str:
    """Create (once) and start the server of `data_dir`, or reuse it when it runs; its URL. One process
    at a time (a lock file in the logs): the test workers of a run with no `make test` before it each
    came to start it, and a second pg_ctl beside the first failed."""
    if running(data_dir):
        return url(data_dir)
    logs = Path(data_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "postgres-start.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if running(data_dir):  # started by whoever held the lock before
            return url(data_dir)
        return _start(data_dir, logs)


def _start(data_dir: Path, logs: Path) -> str:
    b = ensure_installed(logs / "tools.log")
    d = home(data_dir)  # as root, in the server user's home: it exists once the package is installed
    log = d / "setup.log"
    if os.geteuid() == 0:
        remove_orphans()
        _owned_dir(d.parent)
        _owned_dir(d)
        (d / SERVES).write_text(f"{Path(data_dir).resolve()}\n")
    else:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(d, 0o700)  # the server's alone: its socket, its log, its cluster (#28)
    cluster = d / "data"
    socket = d / ".s.PGSQL.5432"
    if len(str(socket)) > 107:
        raise SetupError(
            f"The PostgreSQL socket path {socket} is longer than a unix socket may be; use a shorter data dir."
        )
    with step(PREFIX, f"start the test PostgreSQL {b.parent.name} (socket in {d})"):
        if os.geteuid() == 0 and subprocess.run(["runuser", "-u", SERVER_USER, "--", "test", "-w", str(d)]).returncode:
            raise SetupError(f"The `{SERVER_USER}` user cannot write to {d}, its own directory; check its home.")
        if not (cluster / "PG_VERSION").exists():
            run_logged(
                _as_owner(
                    [str(b / "initdb"), "-D", str(cluster), "-U", _user(), "--auth=trust", "-E", "UTF8", "--no-sync"]
                ),
                log,
                "initdb of the test PostgreSQL failed",
            )
            with open(cluster / "postgresql.conf", "a") as conf:
                conf.write("\n# workspace.setup.postgres: a throwaway server for the tests\n")
                conf.write(f"unix_socket_directories = '{d}'\n")
                for key, value in SETTINGS.items():
                    conf.write(f"{key} = {value}\n")
        run_logged(
            _as_owner([str(b / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(cluster), "-l", str(d / "server.log")]),
            log,
            f"Starting the test PostgreSQL failed (its own log: {d / 'server.log'})",
        )
    return url(data_dir)


def _user() -> str:
    return SERVER_USER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name


def stop(data_dir: Path, purge: bool = False) -> bool:
    """Stop the server of `data_dir` (fast shutdown), and with `purge` delete its cluster; whether one ran."""
    d = home(data_dir)
    ran = running(data_dir)
    if ran:
        with step(PREFIX, "stop the test PostgreSQL"):
            run_logged(
                _as_owner([str(bindir() / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(d / "data")]),
                d / "setup.log",
                "Stopping the test PostgreSQL failed",
            )
    if purge:
        shutil.rmtree(d, ignore_errors=True)
    return ran


def main(argv=None) -> None:
    from workspace.settings import Settings
    from workspace.setup.steps import ROOT

    parser = argparse.ArgumentParser(
        prog="python -m workspace.setup.postgres",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("--purge", action="store_true", help="with stop: delete the cluster too")
    args = parser.parse_args(argv)
    data_dir = Settings.from_env(base=ROOT).data_dir
    try:
        if args.command == "start":
            print(start(data_dir))
        elif not stop(data_dir, purge=args.purge):
            say(PREFIX, "the test PostgreSQL is not running")
    except SetupError as e:
        fail(e)


if __name__ == "__main__":
    main()
