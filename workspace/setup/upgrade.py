"""`make upgrade`: the deployment onto a new release in place, the running workspaces kept running.

    git pull  (or unpack the new release over the checkout)
    make upgrade [BACKUP=/backups/workspace]

What it does, each step a line with its duration (docs/upgrade.md tells the administrator's side):

1. the new release's engine, proxy, tools and images (only those whose definition changed);
2. with BACKUP, a backup first (workspace/setup/backup.py; incremental after the first), so that a
   release that goes wrong is undone with `workspace-admin restore`;
3. the running hub stops, and only the hub: `cleanup_servers` is off (jupyterhub_config.py), so every
   workspace keeps running and its home keeps what its owner is writing. The proxy is a process of its
   own (workspace/setup/proxy.py) and keeps every route: open notebooks and terminals never notice.
   (From a release whose hub started the proxy itself, the routes go with that hub once, and answer
   again when the new hub has started: seconds, measured in the upgrade test);
4. both databases are brought to the new schema while nothing uses them: JupyterHub's (`upgrade-db`,
   which copies a SQLite file beside it first) and the workspace database's (workspace/migrations);
5. the new hub starts and finds every running workspace again from its spawner state; the command
   waits until each one that ran before is ready again and says how many were kept.

A start that was under way when the hub stopped is ended by the new hub as a restart ends it (its
execution `stopped`, with a sentence; its owner starts again). tests/integration/test_upgrade.py runs
the previous release from its own `make up`, fills it, and upgrades it with this command.
"""

from __future__ import annotations

import argparse
import logging
import time
import urllib.error
from pathlib import Path

from workspace import data_dir
from workspace.settings import Settings
from workspace.setup import backup, deploy
from workspace.setup.backup_sets import BackupError
from workspace.setup.steps import ROOT, SetupError, fail, say, step, terminate

PREFIX = "upgrade"


def running_servers(settings: Settings) -> set[tuple[str, str]]:
    """(user, server name) of every server the hub has running and ready."""
    if not deploy.hub_answers(settings):
        return set()
    try:
        users = deploy.api(settings, "GET", "/users?state=active")
    except (OSError, urllib.error.HTTPError) as e:
        raise SetupError(f"The running hub did not list its workspaces ({e}); is the admin API token right?") from e
    return {(u["name"], name) for u in users for name, s in u.get("servers", {}).items() if s.get("ready")}


def stop_hub(pid: int) -> None:
    """Stop the hub process alone: its services go with it; the workspaces and the proxy `make up` runs
    apart from it stay (an older release's hub stops the proxy it started itself)."""
    with step(PREFIX, f"stop the running hub (pid {pid}); the workspaces keep running"):
        if not terminate(pid, 60):
            say(PREFIX, f"the hub (pid {pid}) did not exit in 60 s; it was killed")


def migrate(settings: Settings) -> None:
    """Both databases to the new release's schema, while no process uses them."""
    from jupyterhub import dbutil

    from workspace import db

    with step(PREFIX, "bring JupyterHub's database to this release's schema"):
        try:
            # on SQLite it first copies the file beside it (jupyterhub.sqlite.<date>)
            dbutil.upgrade_if_needed(settings.hub_db_url, log=logging.getLogger("upgrade"))
        except Exception as e:
            raise SetupError(f"Upgrading JupyterHub's database failed ({e}); restore it from the backup.") from e
    with step(PREFIX, "bring the workspace database to this release's schema"):
        try:
            db.upgrade(db.make_engine(settings.db_url))
        except Exception as e:
            raise SetupError(f"Migrating the workspace database failed ({e}); restore it from the backup.") from e


def wait_kept(settings: Settings, before: set[tuple[str, str]], wait_s: float = 120) -> set[tuple[str, str]]:
    """Wait until every workspace that ran before the upgrade is ready again; return those that are not."""
    deadline = time.monotonic() + wait_s
    missing = set(before)
    while missing and time.monotonic() < deadline:
        missing -= running_servers(settings)
        if missing:
            time.sleep(1)
    return missing


def upgrade(settings: Settings, backup_dest: Path | None = None) -> None:
    started = time.monotonic()
    deploy.prepare(settings)
    deploy.ensure_store(settings, prefix=PREFIX)
    settings.generate_missing_secrets()  # a secret a new release adds
    if backup_dest is not None:
        with step(PREFIX, f"back up into {backup_dest} first"):
            backup.backup(settings, backup_dest)
    before = running_servers(settings)
    pid = deploy.hub_pid(settings)
    if pid:
        stop_hub(pid)
    else:
        say(PREFIX, "no hub is running: the new one starts after the migrations")
    stopped = time.monotonic()
    migrate(settings)
    kept_routes = deploy.start_hub(settings, prefix=PREFIX)
    missing = wait_kept(settings, before)
    if missing:
        names = ", ".join(f"{u}/{s}" for u, s in sorted(missing))
        raise SetupError(
            f"{len(missing)} workspace(s) that ran before the upgrade did not come back: {names}; "
            "their homes are kept in their containers: read the hub's log, then stop and start them.",
            settings.path("logs", "jupyterhub.log"),
        )
    if kept_routes:
        routes = "the proxy kept their routes: their open pages and connections never stopped"
    else:  # from a release whose hub started the proxy itself: once, its routes went with it
        routes = f"their addresses answered again {time.monotonic() - stopped:.1f} s after the old hub stopped"
    say(PREFIX, f"upgraded in {time.monotonic() - started:.1f} s; {len(before)} running workspace(s) kept, {routes}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="make upgrade", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backup", type=Path, help="back up into this directory before the hub stops")
    args = parser.parse_args(argv)
    deploy.default_origins()
    settings = Settings.from_env(base=ROOT)
    data_dir.restrict_umask()
    try:
        upgrade(settings, args.backup)
    except SetupError as e:
        fail(e)
    except BackupError as e:
        fail(SetupError(f"The backup before the upgrade failed, and nothing was changed: {e}"))
    except KeyboardInterrupt:
        fail(SetupError("Interrupted; run `make upgrade` again (each step is safe to repeat)."))


if __name__ == "__main__":
    main()
