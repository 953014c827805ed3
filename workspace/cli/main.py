"""The `workspace` command: the workspace service's REST API from a terminal.

    workspace ls [--user U]                        your workspaces (instructors: a student's)
    workspace start NAME [--continue N|latest|fresh] [--dataset REF ...] [--type T] [--image I] [--cleanup]
                                                   start (prints the progress); prints the URL
    workspace stop NAME                            stop, and wait for the home to be saved
    workspace executions NAME [--user U]           a workspace's executions
    workspace courses                              instructors: each course's students, their workspaces
    workspace course-setup COURSE --roster FILE [--workspace W] [--type T] [--image I] [--dataset REF ...]
                           [--starter WORKSPACE:N]  set a course up from its roster in one step
    workspace labelling COURSE                     a course's labelling projects (Label Studio), your role
    workspace labelling-start COURSE TITLE --dataset REF --labels "a, b" [--reviewer NAME ...]
                                                   instructors: a Label Studio for the course's team
    workspace labelling-export COURSE KEY --dataset NAME [--format F] [--all]
                                                   instructors: the accepted labels as a dataset version
    workspace types                                the resource types you may choose, what is free now
    workspace quota [--user U]                     your storage against your quota, what takes the space
    workspace cleanup [--keep N]                   delete old outputs, keeping the newest N per workspace
    workspace delete-output NAME NUMBER            delete one execution's saved output
    workspace accounting [--since T] [--until T] [--all | --user U]   CPU-hours and GPU-hours
    workspace datasets ls                          mine, shared with me, public
    workspace datasets show OWNER/NAME
    workspace datasets create NAME [--description TEXT] [--public]
    workspace datasets upload OWNER/NAME FILE [--unpack]      resumable, checksummed
    workspace datasets from-execution OWNER/NAME WORKSPACE NUMBER [--path DIR]
    workspace datasets import OWNER/NAME /PATH/ON/THE/SERVER          admins
    workspace datasets share OWNER/NAME (--user U | --group G)
    workspace datasets unshare OWNER/NAME (--user U | --group G)
    workspace datasets delete OWNER/NAME VERSION
    workspace ssh-key add [FILE | -] [--comment TEXT]   register an SSH public key (default ~/.ssh/id_ed25519.pub)
    workspace ssh-key ls                           your SSH keys and their fingerprints
    workspace ssh-key rm N|SHA256:...              remove one (it no longer opens your workspaces)
    workspace ssh NAME [SSH ARGUMENTS ...]         connect to a workspace through the gateway (its host key pinned)
    workspace ssh-config [--prefix ws-]            ~/.ssh/config entries for all your workspaces (editors, scp)
    workspace download NAME[#N] [PATH] [-o DEST] [--user U]   a saved output (or a directory or file of it):
                                                   a directory is unpacked safely, or kept as .tar.gz/.zip
    workspace collect COURSE --path DIR [--before TIME] [-o FILE]   instructors: each student's DIR of their
                                                   latest output, in one archive with a manifest
    workspace image build NAME --from IMAGE [--apt FILE] [--pip FILE] [--script FILE] [--share VISIBILITY]
                                                   build your own image (prints its log as it is written)
    workspace image ls | log OWNER/NAME [-f] | share OWNER/NAME VISIBILITY | rm OWNER/NAME
    workspace deploy NAME --from W[#N] --image I [--port 8080] [--replicas N] [--type T] [--access A] -- COMMAND
                                                   serve a saved output at /serve/YOU/NAME/ (again: a new version)
    workspace deployments ls | show | stop | start | rm | set | logs | key | revoke NAME ...

Every listing takes --json; --user reads another user's (administrators, and
instructors for their course's students). The hub is $WORKSPACE_URL (default
http://localhost:8000); the token is $WORKSPACE_TOKEN or $JUPYTERHUB_API_TOKEN
(inside a workspace the latter is already set). Errors print the server's
sentence and exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys

from workspace.cli import (
    accounting,
    courses,
    datasets,
    deployments,
    images,
    labelling,
    outputs,
    resource_types,
    ssh,
    storage,
    sweeps,
    tasks,
    workspaces,
)
from workspace.cli.base import Client, CLIError, user_locale
from workspace.i18n import N_, translate

# each command family: its COMMANDS, its add_parsers(cmds) and its run(args, client, out); in the order
# `workspace -h` lists them
FAMILIES = (
    workspaces,
    resource_types,
    storage,
    accounting,
    courses,
    labelling,
    datasets,
    ssh,
    outputs,
    tasks,
    sweeps,
    images,
    deployments,
)

# the help's description and closing paragraph (the module's docstring says them too: `workspace -h` in
# English is the docstring, as before); the synopsis between them is commands and options, shown as written
DESCRIPTION = N_("The `workspace` command: the workspace service's REST API from a terminal.")
HELP_NOTE = N_(
    "Every listing takes --json; --user reads another user's (administrators, and\n"
    "instructors for their course's students). The hub is $WORKSPACE_URL (default\n"
    "http://localhost:8000); the token is $WORKSPACE_TOKEN or $JUPYTERHUB_API_TOKEN\n"
    "(inside a workspace the latter is already set). Errors print the server's\n"
    "sentence and exit 1."
)


def run(args, client: Client, out=sys.stdout) -> None:
    """Hand the command to its family."""
    family = next(f for f in FAMILIES if args.command in f.COMMANDS)
    family.run(args, client, out)


def parser() -> argparse.ArgumentParser:
    loc = user_locale()
    description = translate(loc, DESCRIPTION)
    synopsis = __doc__.split("\n\n")[1]  # commands and options
    p = argparse.ArgumentParser(
        prog="workspace",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{description}\n\n{synopsis}\n\n{translate(loc, HELP_NOTE)}\n",  # in English: the docstring
    )
    cmds = p.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.add_parsers(cmds)
    return p


def main(argv=None) -> None:
    loc = user_locale()
    args = parser().parse_args(argv)
    token = os.environ.get("WORKSPACE_TOKEN") or os.environ.get("JUPYTERHUB_API_TOKEN")
    if not token:
        sys.exit(translate(loc, "error: set WORKSPACE_TOKEN to a JupyterHub API token (Token page of the hub)."))
    client = Client(os.environ.get("WORKSPACE_URL", "http://localhost:8000"), token, loc)
    try:
        run(args, client)
    except CLIError as e:
        sys.exit(translate(loc, "error: {error}", error=e))
    except FileNotFoundError as e:
        sys.exit(translate(loc, "error: {path} does not exist.", path=e.filename))


if __name__ == "__main__":
    main()
