"""`workspace-admin`: the operator's command.

    workspace-admin up | down | images | prepare       the deployment (workspace/setup/deploy.py; `make up`)
    workspace-admin upgrade [--backup DEST]            onto a new release in place (upgrade.py; `make upgrade`)
    workspace-admin backup DEST [--key-dest DIR] [--keep N] [--every 24h]
                                                     back up into DEST (workspace/setup/backup.py)
    workspace-admin restore SRC [--key FILE] [--set NAME] [--force]
                                                     restore a backup onto an empty machine (restore.py)

docs/backup.md tells backups and restores for administrators. Every command prints its steps with their
figures; a failure ends with one sentence saying what to do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workspace import data_dir
from workspace.settings import Settings
from workspace.setup import backup, deploy, restore, upgrade
from workspace.setup.backup_sets import BackupError, parse_every
from workspace.setup.steps import ROOT, SetupError, fail

DEPLOY = ("up", "down", "images", "prepare")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="workspace-admin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = p.add_subparsers(dest="command", required=True)
    for name in DEPLOY:
        commands.add_parser(name, help=f"see `python -m workspace.setup.deploy --help` ({name})")
    commands.add_parser("upgrade", help="onto a new release in place (see `python -m workspace.setup.upgrade --help`)")
    b = commands.add_parser("backup", help="back the deployment up into DEST (a new set; incremental)")
    b.add_argument("dest", type=Path, help="the backups' directory (0700; apart from the data directory)")
    b.add_argument("--key-dest", type=Path, help="a directory apart from DEST for the key sealing the secrets")
    b.add_argument("--keep", type=int, help="keep only the newest N backups (and what they use)")
    b.add_argument("--every", help="back up again every interval (30m, 24h, 7d) until stopped: run it as a service")
    r = commands.add_parser("restore", help="restore a backup onto an empty machine")
    r.add_argument("src", type=Path, help="the backups' directory (its newest backup) or one backup's directory")
    r.add_argument("--key", type=Path, help="the key file `backup --key-dest` wrote")
    r.add_argument("--set", dest="name", help="which backup of SRC (its directory's name; default: the newest)")
    r.add_argument("--force", action="store_true", help="restore into a data directory that is not empty")
    return p


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in DEPLOY:
        deploy.main(argv)
        return
    if argv and argv[0] == "upgrade":
        upgrade.main(argv[1:])
        return
    args = parser().parse_args(argv)
    settings = Settings.from_env(base=ROOT)
    data_dir.restrict_umask()  # backups and restored files are root's alone
    try:
        if args.command == "backup":
            if args.every:
                backup.every(settings, args.dest, parse_every(args.every), args.key_dest, args.keep)
            else:
                backup.backup(settings, args.dest, args.key_dest, args.keep)
        else:
            restore.restore(settings, args.src, args.key, args.force, args.name)
    except BackupError as e:
        fail(SetupError(str(e)))
    except OSError as e:  # what the steps above do not name themselves (a disk that fails, a permission)
        fail(SetupError(f"The {args.command} failed: {e.strerror or e} ({e.filename}); fix that and run it again."))
    except KeyboardInterrupt:
        if args.command == "backup":
            fail(SetupError("Interrupted; the unfinished backup is removed by the next one."))
        fail(SetupError("Interrupted; the data directory is incomplete: restore again with --force."))


if __name__ == "__main__":
    main()
