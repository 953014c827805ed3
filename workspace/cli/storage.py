"""The `workspace` command's storage part: your storage against your quota, deleting old outputs.

workspace quota [--user U]                     your storage against your quota, what takes the space
workspace cleanup [--keep N]                   delete old outputs, keeping the newest N per workspace
workspace delete-output NAME NUMBER            delete one execution's saved output
"""

from __future__ import annotations

import sys

from workspace.cli.base import Client, add_user_option, print_listing, size_text, user_locale, whose
from workspace.i18n import translate

COMMANDS = ("quota", "cleanup", "delete-output")


def add_parsers(cmds) -> None:
    loc = user_locale()
    qu = cmds.add_parser("quota", help=translate(loc, "your storage against your quota, and what takes the space"))
    qu.add_argument("--json", action="store_true")
    add_user_option(qu)
    cl = cmds.add_parser("cleanup", help=translate(loc, "delete old outputs, keeping the newest of each workspace"))
    cl.add_argument("--keep", type=int, default=1, help=translate(loc, "outputs to keep per workspace (default 1)"))
    cl.add_argument("--json", action="store_true")
    do = cmds.add_parser("delete-output", help=translate(loc, "delete one execution's saved output"))
    do.add_argument("name")
    do.add_argument("number", type=int)


def run(args, client: Client, out=sys.stdout) -> None:
    js = getattr(args, "json", False)
    if args.command == "quota":
        print_listing(client.call("GET", "/storage", params=whose(args)), js, quota_lines, out)
    elif args.command == "cleanup":
        print_listing(client.call("POST", "/storage/cleanup", json={"keep": args.keep}), js, cleanup_lines, out)
    else:
        d = client.call("DELETE", f"/workspaces/{args.name}/executions/{args.number}/output")["deleted"]
        print(
            translate(
                user_locale(),
                "deleted the output of {workspace} #{number}: {size}, {files:,} files",
                workspace=d["workspace"],
                number=d["number"],
                size=size_text(d["bytes"]),
                files=d["files"],
            ),
            file=out,
        )


def quota_lines(d: dict) -> list[str]:
    loc = user_locale()
    used, limit = d["usage"], d["limit"]

    def of(value, cap, fmt):
        if cap:
            return translate(loc, "{used} of {limit} ({share:.0%})", used=fmt(value), limit=fmt(cap), share=value / cap)
        return translate(loc, "{used} (no limit)", used=fmt(value))

    def files(n):
        return translate(loc, "{files:,} files", files=n)

    lines = [
        translate(
            loc,
            "storage: {bytes}, {files}",
            bytes=of(used["bytes"], limit["bytes"], size_text),
            files=of(used["files"], limit["files"], files),
        )
    ]
    if d.get("warning"):
        lines.append(d["warning"])
    for item in d["items"][:10]:
        lines.append(
            "  "
            + translate(
                loc,
                "{label:<36} {size:>10} {files:>9,} files   frees {frees} if deleted",
                label=item["label"],
                size=size_text(item["bytes"]),
                files=item["files"],
                frees=size_text(item["unique_bytes"]),
            )
        )
    return lines


def cleanup_lines(r: dict) -> list[str]:
    """What `workspace cleanup` did."""
    loc = user_locale()
    lines = [
        translate(
            loc,
            "deleted {workspace} #{number}: {size}, {files:,} files",
            workspace=d["workspace"],
            number=d["number"],
            size=size_text(d["bytes"]),
            files=d["files"],
        )
        for d in r["deleted"]
    ]
    lines += [
        translate(
            loc,
            "kept {workspace} #{number}: {reason}",
            workspace=k["workspace"],
            number=k["number"],
            reason=k["reason"],
        )
        for k in r["kept"]
    ]
    # an output shares files with the outputs continued from it: what it frees is in `quota`
    if r["deleted"]:
        lines.append(
            translate(
                loc,
                "deleted {count} output(s) of {size}",
                count=len(r["deleted"]),
                size=size_text(sum(d["bytes"] for d in r["deleted"])),
            )
        )
    else:
        lines.append(translate(loc, "nothing to delete"))
    return [*lines, *quota_lines(r["storage"])[:1]]
