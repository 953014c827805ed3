"""The `workspace` command's courses part (instructors): each course's students and their workspaces, and
setting a course up from its roster in one step.

    workspace courses
    workspace course-setup COURSE --roster FILE [--workspace W] [--type T] [--image I] [--dataset REF ...]
                           [--starter WORKSPACE:N]
"""

from __future__ import annotations

import sys

from workspace.cli.base import Client, CLIError, print_listing, size_text, user_locale
from workspace.i18n import translate

COMMANDS = ("courses", "course-setup")


def add_parsers(cmds) -> None:
    loc = user_locale()
    co = cmds.add_parser("courses", help=translate(loc, "instructors: each course's students and their workspaces"))
    co.add_argument("--json", action="store_true")
    cs = cmds.add_parser(
        "course-setup", help=translate(loc, "instructors: set a course up from its roster in one step")
    )
    cs.add_argument("course", help=translate(loc, "the course (its JupyterHub group)"))
    cs.add_argument(
        "--roster",
        required=True,
        metavar="FILE",
        help=translate(loc, "one username per line, or CSV whose first column is the username"),
    )
    cs.add_argument("--workspace", help=translate(loc, "the workspace each student gets (default: the course's name)"))
    cs.add_argument("--type", metavar="T", help=translate(loc, "its resource type"))
    cs.add_argument("--image", help=translate(loc, "its image"))
    cs.add_argument(
        "--dataset", action="append", metavar="OWNER/NAME", help=translate(loc, "a dataset of yours; repeat")
    )
    cs.add_argument(
        "--starter", metavar="WORKSPACE:N", help=translate(loc, "your execution whose output each first start restores")
    )


def run(args, client: Client, out=sys.stdout) -> None:
    if args.command == "courses":
        print_listing(client.call("GET", "/courses"), args.json, course_lines, out)
    else:
        print(client.call("PUT", f"/courses/{args.course}", json=course_setup_body(args))["message"], file=out)


def course_setup_body(args) -> dict:
    """The set-up request of `course-setup`: the roster file's text (the server parses it and names a bad
    line) and the template."""
    with open(args.roster, encoding="utf-8-sig") as f:
        body = {
            "students": f.read(),
            "workspace": args.workspace,
            "resource_type": args.type,
            "image": args.image,
            "datasets": args.dataset or [],
        }
    if args.starter:
        workspace, _, number = args.starter.rpartition(":")
        if not workspace or not number.isdigit():
            raise CLIError(
                translate(
                    user_locale(), "“{starter}” is not a starter; write WORKSPACE:N, like prep:3.", starter=args.starter
                )
            )
        body["starter"] = {"workspace": workspace, "number": int(number)}
    return {k: v for k, v in body.items() if v is not None}


def course_lines(courses: list[dict]) -> list[str]:
    loc = user_locale()
    lines = []
    for c in courses:
        n = len(c["students"])
        course = c["name"] or translate(loc, "students given to you by name")
        if n == 1:
            lines.append(
                translate(loc, "{course}: 1 student, {running} running now", course=course, running=c["running"])
            )
        else:
            lines.append(
                translate(
                    loc,
                    "{course}: {count} students, {running} running now",
                    course=course,
                    count=n,
                    running=c["running"],
                )
            )
        for st in c["students"]:
            storage = st["storage"]
            lines.append(
                f"  {st['name']:<16} {size_text(storage['bytes']) if storage else '–':>10}  "
                + (
                    ", ".join(
                        f"{w['name']} #{w['number']} {w['state']}"
                        if w["number"]
                        else translate(loc, "{workspace} new", workspace=w["name"])
                        for w in st["workspaces"]
                    )
                    or translate(loc, "no workspaces yet")
                )
            )
    return lines or [translate(loc, "no courses yet")]
