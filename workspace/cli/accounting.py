"""The `workspace` command's accounting part: CPU-hours and GPU-hours of executions.

workspace accounting [--since T] [--until T] [--all | --user U]
"""

from __future__ import annotations

import sys

from workspace.cli.base import Client, add_user_option, print_listing, user_locale, whose
from workspace.i18n import translate

COMMANDS = ("accounting",)


def add_parsers(cmds) -> None:
    loc = user_locale()
    ac = cmds.add_parser("accounting", help=translate(loc, "CPU-hours and GPU-hours of your executions"))
    ac.add_argument("--since", help=translate(loc, "ISO time, e.g. 2026-09-01"))
    ac.add_argument("--until", help=translate(loc, "ISO time"))
    ac.add_argument("--all", action="store_true", help=translate(loc, "administrators: every user"))
    ac.add_argument("--json", action="store_true")
    add_user_option(ac)


def run(args, client: Client, out=sys.stdout) -> None:
    params = whose(args) | {k: v for k, v in (("since", args.since), ("until", args.until)) if v}
    if args.all:
        params["all"] = "true"
    print_listing(client.call("GET", "/accounting", params=params), args.json, accounting_lines, out)


def accounting_lines(d: dict) -> list[str]:
    lines = [f"{'user':<16} {'executions':>10} {'hours':>8} {'CPU-hours':>10} {'CPU used':>9} {'GPU-hours':>10}"]
    for u in d["users"]:
        lines.append(
            f"{u['user']:<16} {u['executions']:>10} {u['runtime_s'] / 3600:>8.2f} {u['cpu_hours']:>10.2f} "
            f"{u['cpu_used_hours']:>9.2f} {u['gpu_hours']:>10.2f}"
        )
    if not d["users"]:
        lines.append(translate(user_locale(), "no executions ran in this period"))
    return lines
