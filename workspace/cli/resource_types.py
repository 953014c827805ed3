"""The `workspace` command's resource types part: the types you may choose, and what is free now.

workspace types
"""

from __future__ import annotations

import sys

from workspace.cli.base import Client, print_listing, user_locale
from workspace.i18n import aligned, translate

COMMANDS = ("types",)


def add_parsers(cmds) -> None:
    loc = user_locale()
    cmds.add_parser("types", help=translate(loc, "the resource types you may choose")).add_argument(
        "--json", action="store_true"
    )


def run(args, client: Client, out=sys.stdout) -> None:
    print_listing(client.call("GET", "/resource-types"), args.json, type_lines, out)


def type_lines(d: dict) -> list[str]:
    """The rows of `workspace types`."""
    loc = user_locale()
    lines = []
    for t in d["types"]:
        if t["name"] == d["default"]:
            lines.append(
                translate(
                    loc,
                    "{name:<16} {summary:<48} {free}  (default)",
                    name=t["name"],
                    summary=t["summary"],
                    free=t["free"],
                )
            )
        else:
            row = aligned("{name:<16} {summary:<48} {free}", name=t["name"], summary=t["summary"], free=t["free"])
            lines.append(row)
    return lines or [translate(loc, "this hub has no resource types: every workspace gets the same resources")]
