"""The `workspace` command's labelling part (#36): a course's labelling projects, each a Label Studio its
members open with their hub login.

    workspace labelling COURSE                                     the projects, your role, their addresses
    workspace labelling-start COURSE TITLE --dataset OWNER/NAME[:N] --labels "cat, dog" [--reviewer NAME ...]
    workspace labelling-export COURSE KEY --dataset NAME [--format JSON|COCO|YOLO|VOC|CSV|JSON_MIN] [--all]
"""

from __future__ import annotations

import sys
from urllib.parse import quote

from workspace.cli.base import Client, print_listing, user_locale
from workspace.i18n import N_, translate

COMMANDS = ("labelling", "labelling-start", "labelling-export")
FORMATS = ("JSON", "JSON_MIN", "CSV", "COCO", "YOLO", "VOC")
ROLES = {"manager": N_("manager"), "reviewer": N_("reviewer"), "annotator": N_("labeller")}


def add_parsers(cmds) -> None:
    loc = user_locale()
    ls = cmds.add_parser("labelling", help=translate(loc, "a course's labelling projects, and your role in each"))
    ls.add_argument("course", help=translate(loc, "the course (its JupyterHub group)"))
    ls.add_argument("--json", action="store_true")
    st = cmds.add_parser(
        "labelling-start", help=translate(loc, "instructors: a Label Studio for the course over a dataset")
    )
    st.add_argument("course", help=translate(loc, "the course (its JupyterHub group)"))
    st.add_argument("title", help=translate(loc, "the project's title (3–50 characters)"))
    st.add_argument("--dataset", required=True, metavar="OWNER/NAME[:VERSION]", help=translate(loc, "the images"))
    st.add_argument("--labels", required=True, help=translate(loc, "the labels, separated by commas"))
    st.add_argument("--reviewer", action="append", metavar="NAME", help=translate(loc, "a student who reviews; repeat"))
    ex = cmds.add_parser(
        "labelling-export", help=translate(loc, "instructors: a project's accepted labels as a dataset version")
    )
    ex.add_argument("course", help=translate(loc, "the course (its JupyterHub group)"))
    ex.add_argument("key", help=translate(loc, "the project's key (`workspace labelling COURSE` lists them)"))
    ex.add_argument("--dataset", required=True, metavar="NAME", help=translate(loc, "your dataset (made if new)"))
    ex.add_argument("--format", default="JSON", choices=FORMATS)
    ex.add_argument("--all", action="store_true", help=translate(loc, "every annotation, not only the accepted"))


def run(args, client: Client, out=sys.stdout) -> None:
    course = quote(args.course, safe="")
    if args.command == "labelling":
        found = client.call("GET", f"/courses/{course}/labelling")
        print_listing(found, args.json, lambda projects: project_lines(projects, client.url), out)
    elif args.command == "labelling-start":
        body = {"title": args.title, "dataset": args.dataset, "labels": args.labels, "reviewers": args.reviewer or []}
        made = client.call("POST", f"/courses/{course}/labelling", json=body)
        print("\n".join(project_lines([made], client.url)), file=out)
    else:
        body = {"dataset": args.dataset, "format": args.format, "accepted_only": not args.all}
        version = client.call("POST", f"/courses/{course}/labelling/{quote(args.key, safe='')}/export", json=body)
        loc = user_locale()
        made = translate(
            loc, "Made version {number} of your dataset {dataset}.", number=version["version"], dataset=args.dataset
        )
        print(made, file=out)


def project_lines(projects: list[dict], url: str) -> list[str]:
    loc = user_locale()
    if not projects:
        return [translate(loc, "No labelling projects.")]
    lines = []
    for p in projects:
        role = translate(loc, ROLES.get(p["role"], p["role"] or ""))
        lines.append(f"{p['key']}  {p['title']}  {p['dataset']}  {role}  {url}{p['url']}")
    return lines
