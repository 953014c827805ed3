"""The `workspace` command's workspaces part: list them, start one (printing its progress), stop one (waiting
for its home to be saved), list a workspace's executions.

    workspace ls [--user U]
    workspace start NAME [--continue N|latest|fresh] [--dataset REF ...] [--type T] [--image I] [--cleanup]
    workspace stop NAME
    workspace executions NAME [--user U]
"""

from __future__ import annotations

import sys
import time

from workspace.cli.base import (
    Client,
    CLIError,
    add_user_option,
    follow_progress,
    print_listing,
    size_text,
    user_locale,
    whoami,
    whose,
)
from workspace.i18n import translate

COMMANDS = ("ls", "start", "stop", "executions")


def add_parsers(cmds) -> None:
    loc = user_locale()
    ls = cmds.add_parser("ls", help=translate(loc, "your workspaces"))
    ls.add_argument("--json", action="store_true")
    st = cmds.add_parser("start", help=translate(loc, "start a workspace (a new execution); prints the progress"))
    st.add_argument("name")
    st.add_argument(
        "--continue",
        dest="continue_from",
        default="latest",
        metavar="N|latest|fresh",
        help=translate(loc, "the execution whose home to continue from (default: latest)"),
    )
    st.add_argument(
        "--dataset",
        action="append",
        metavar="OWNER/NAME[:VERSION]",
        help=translate(loc, "a dataset to mount read-only (/input0 …); repeat for up to five"),
    )
    st.add_argument("--type", metavar="T", help=translate(loc, "the resource type (see `workspace types`)"))
    st.add_argument("--image", help=translate(loc, "the image, where the hub offers several"))
    st.add_argument(
        "--cleanup",
        action="store_true",
        help=translate(
            loc, "cleanup mode: a small, short workspace that is allowed over the storage quota, to delete files"
        ),
    )
    sp = cmds.add_parser("stop", help=translate(loc, "stop a workspace and wait for its home to be saved"))
    sp.add_argument("name")
    ex = cmds.add_parser("executions", help=translate(loc, "a workspace's executions"))
    ex.add_argument("name")
    ex.add_argument("--json", action="store_true")
    add_user_option(ls)
    add_user_option(ex)


def run(args, client: Client, out=sys.stdout) -> None:
    js = getattr(args, "json", False)
    if args.command == "ls":
        print_listing(
            client.call("GET", "/workspaces", params=whose(args)),
            js,
            lambda rows: [workspace_line(w) for w in rows] or [translate(user_locale(), "no workspaces yet")],
            out,
        )
    elif args.command == "start":
        options = {"resource_type": args.type, "image": args.image, "cleanup": args.cleanup or None}
        start(
            client,
            args.name,
            args.continue_from,
            args.dataset,
            out,
            **{k: v for k, v in options.items() if v is not None},
        )
    elif args.command == "stop":
        stop(client, args.name, out)
    else:
        print_listing(
            client.call("GET", f"/workspaces/{args.name}/executions", params=whose(args)),
            js,
            lambda rows: [execution_line(e) for e in rows],
            out,
        )


def workspace_line(w: dict) -> str:
    """A row of `workspace ls`."""
    loc = user_locale()
    if w["current"]:
        return translate(
            loc,
            "{name:<24} {executions:>3} executions, #{number} {state}",
            name=w["name"],
            executions=w["executions"],
            number=w["current"]["number"],
            state=w["current"]["state"],
        )
    return translate(loc, "{name:<24} {executions:>3} executions", name=w["name"], executions=w["executions"])


def execution_line(e: dict) -> str:
    """A row of `workspace executions`."""
    return translate(
        user_locale(),
        "#{number:<4} {state:<11} from {parent:<6} {stop_reason:<11} {started:<28} {size}",
        number=e["number"],
        state=e["state"],
        parent=("#" + str(e["parent"])) if e["parent"] else "fresh",
        stop_reason=e["stop_reason"] or "",
        started=e["started"] or "",
        size=size_text(e["snapshot_bytes"]) if e["snapshot_bytes"] is not None else "",
    )


def start(client: Client, name: str, continue_from: str, refs: list[str] | None, out=sys.stdout, **choices) -> None:
    """Start a workspace and print its progress until JupyterLab answers.

    `choices`: the other user_options (resource_type, image, cleanup)."""
    me = whoami(client)
    options = {"continue_from": continue_from, **choices}
    if refs:
        options["datasets"] = refs
    client.hub("POST", f"/users/{me}/servers/{name}", json={"user_options": options, "display_name": name})
    event = follow_progress(client, me, name, out)
    if event is None:
        raise CLIError(
            translate(
                user_locale(),
                "The hub stopped reporting the start of {name}; `workspace ls` shows whether it runs.",
                name=name,
            )
        )
    url = event.get("url") or f"/user/{me}/{name}/"
    # a path on the hub's origin, or a URL on the user's own subdomain
    base = "" if url.startswith(("http://", "https://")) else client.url
    print(translate(user_locale(), "{name} is running: {url}", name=name, url=f"{base}{url.rstrip('/')}/lab"), file=out)


def stop(client: Client, name: str, out=sys.stdout, poll: float = 0.5) -> None:
    """Stop a workspace; wait until its home is saved, printing the save's progress."""
    me = whoami(client)
    rows = client.call("GET", f"/workspaces/{name}/executions")
    if not rows:
        raise CLIError(translate(user_locale(), "Workspace “{name}” has no executions.", name=name))
    number = rows[-1]["number"]
    client.hub("DELETE", f"/users/{me}/servers/{name}")
    shown = None
    while True:
        ex = client.call("GET", f"/workspaces/{name}/executions/{number}")
        text = (ex.get("save_progress") or {}).get("text")
        if text and text != shown:
            print(translate(user_locale(), "saving: {progress}", progress=text), file=out, flush=True)
            shown = text
        if ex["state"] in ("stopped", "failed", "save_failed"):
            break
        time.sleep(poll)
    loc = user_locale()
    if ex["state"] == "save_failed":
        raise CLIError(
            ex.get("error")
            or translate(loc, "The home of {name} #{number} could not be saved yet.", name=name, number=number)
        )
    save = ex.get("save") or {}
    if save:
        print(
            translate(
                loc,
                "{name} #{number} stopped; home saved ({files:,} changed files, {size} in {seconds:.1f} s)",
                name=name,
                number=number,
                files=save.get("files") or 0,
                size=size_text(save.get("bytes") or 0),
                seconds=save.get("seconds") or 0,
            ),
            file=out,
        )
    else:
        print(translate(loc, "{name} #{number} stopped; home saved", name=name, number=number), file=out)
