"""The `workspace` command: the workspace service's REST API from a terminal.

    workspace ls [--user U]                        your workspaces (instructors: a student's)
    workspace start NAME [--continue N|latest|fresh] [--dataset REF ...] [--type T] [--image I] [--cleanup]
                                                   start (prints the progress); prints the URL
    workspace stop NAME                            stop, and wait for the home to be saved
    workspace executions NAME [--user U]           a workspace's executions
    workspace courses                              instructors: each course's students, their workspaces
    workspace course-setup COURSE --roster FILE [--workspace W] [--type T] [--image I] [--dataset REF ...]
                           [--starter WORKSPACE:N]  set a course up from its roster in one step
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

Every listing takes --json; --user reads another user's (administrators, and
instructors for their course's students). The hub is $WORKSPACE_URL (default
http://localhost:8000); the token is $WORKSPACE_TOKEN or $JUPYTERHUB_API_TOKEN
(inside a workspace the latter is already set). Errors print the server's
sentence and exit 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

from workspace.cli import images as cli_images
from workspace.cli import outputs as cli_outputs
from workspace.cli import ssh as cli_ssh
from workspace.cli import tasks as cli_tasks
from workspace.cli.base import (
    Client,
    CLIError,
    follow_progress,
    print_listing,
    size_text,
    user_locale,
    whoami,
)
from workspace.i18n import N_, aligned, translate

UPLOAD_CHUNK = 256 << 20
READ_BLOCK = 4 << 20
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


def _ref(value: str) -> str:
    if value.count("/") != 1:
        raise CLIError(translate(user_locale(), "“{value}” is not a dataset reference; write OWNER/NAME.", value=value))
    return value


def upload(client: Client, ref: str, path: str, unpack: bool, out=sys.stdout) -> dict:
    """Upload a file as a new version; resumes an interrupted upload of the same file."""
    size = os.path.getsize(path)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(READ_BLOCK):
            digest.update(block)
    state_file = f"{path}.workspace-upload"
    upload_id = None
    if os.path.exists(state_file):
        saved = json.loads(open(state_file).read())
        if saved.get("sha256") == digest.hexdigest() and saved.get("ref") == ref:
            upload_id = saved["id"]
    offset = 0
    if upload_id:
        try:
            offset = client.call("GET", f"/datasets/{ref}/uploads/{upload_id}")["offset"]
            print(
                translate(user_locale(), "resuming at {done} of {size}", done=size_text(offset), size=size_text(size)),
                file=out,
                flush=True,
            )
        except CLIError:
            upload_id = None
    if not upload_id:
        created = client.call(
            "POST",
            f"/datasets/{ref}/uploads",
            json={
                "filename": os.path.basename(path),
                "size": size,
                "sha256": digest.hexdigest(),
                "unpack": unpack,
            },
        )
        upload_id = created["id"]
        with open(state_file, "w") as f:
            json.dump({"id": upload_id, "sha256": digest.hexdigest(), "ref": ref}, f)
    started, sent_at_start = time.monotonic(), offset
    with open(path, "rb") as f:
        while offset < size:
            f.seek(offset)
            length = min(UPLOAD_CHUNK, size - offset)

            def body(left=length):
                while left:
                    block = f.read(min(READ_BLOCK, left))
                    if not block:
                        return
                    left -= len(block)
                    yield block

            offset = client.call("PUT", f"/datasets/{ref}/uploads/{upload_id}", params={"offset": offset}, data=body())[
                "offset"
            ]
            rate = (offset - sent_at_start) / 1e6 / max(time.monotonic() - started, 1e-6)
            print(
                translate(
                    user_locale(),
                    "uploaded {done} of {size}, {rate:,.1f} MB/s",
                    done=size_text(offset),
                    size=size_text(size),
                    rate=rate,
                ),
                file=out,
                flush=True,
            )
    version = client.call("POST", f"/datasets/{ref}/uploads/{upload_id}/complete", json={})
    os.unlink(state_file)
    return version


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


def run(args, client: Client, out=sys.stdout) -> None:
    js = getattr(args, "json", False)
    whose = {"user": args.user} if getattr(args, "user", None) else {}
    if args.command == "ls":
        print_listing(
            client.call("GET", "/workspaces", params=whose),
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
    elif args.command == "executions":
        print_listing(
            client.call("GET", f"/workspaces/{args.name}/executions", params=whose),
            js,
            lambda rows: [execution_line(e) for e in rows],
            out,
        )
    elif args.command == "datasets":
        datasets(args, client, js, out)
    elif args.command == "types":
        print_listing(client.call("GET", "/resource-types"), js, type_lines, out)
    elif args.command == "quota":
        print_listing(client.call("GET", "/storage", params=whose), js, quota_lines, out)
    elif args.command == "cleanup":
        print_listing(client.call("POST", "/storage/cleanup", json={"keep": args.keep}), js, cleanup_lines, out)
    elif args.command == "delete-output":
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
    elif args.command == "accounting":
        params = whose | {k: v for k, v in (("since", args.since), ("until", args.until)) if v}
        if args.all:
            params["all"] = "true"
        print_listing(client.call("GET", "/accounting", params=params), js, accounting_lines, out)
    elif args.command == "courses":
        print_listing(client.call("GET", "/courses"), js, course_lines, out)
    elif args.command in cli_ssh.COMMANDS:
        cli_ssh.run(args, client, out)
    elif args.command in cli_outputs.COMMANDS:
        cli_outputs.run(args, client, out)
    elif args.command in cli_tasks.COMMANDS:
        cli_tasks.run(args, client, out)
    elif args.command in cli_images.COMMANDS:
        cli_images.run(args, client, out)
    elif args.command == "course-setup":
        print(client.call("PUT", f"/courses/{args.course}", json=course_setup_body(args))["message"], file=out)


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


def dataset_lines(d: dict):
    """The rows of `workspace datasets ls`."""
    loc = user_locale()
    for group in ("mine", "shared", "public"):
        for ds in d[group]:
            latest = ds["versions"][-1] if ds["versions"] else None
            if latest:
                yield translate(
                    loc,
                    "{ref:<32} {group:<7} {count} version(s), latest {version}: {size}",
                    ref=ds["ref"],
                    group=group,
                    count=len(ds["versions"]),
                    version=latest["version"],
                    size=size_text(latest["bytes"]),
                )
            else:
                yield translate(
                    loc,
                    "{ref:<32} {group:<7} {count} version(s)",
                    ref=ds["ref"],
                    group=group,
                    count=len(ds["versions"]),
                )


def dataset_show_lines(d: dict) -> list[str]:
    """What `workspace datasets show` prints."""
    loc = user_locale()
    return [
        f"{d['ref']} ({d['visibility']}): {d['description']}",
        *(
            "  "
            + translate(
                loc,
                "version {version}: {size}, {files:,} files, from {origin} {origin_detail}",
                version=v["version"],
                size=size_text(v["bytes"]),
                files=v["files"],
                origin=v["origin"],
                origin_detail=v["origin_detail"] or "",
            )
            for v in d["versions"]
        ),
        *(
            "  " + translate(loc, "shared with {kind} {principal}", kind=s["kind"], principal=s["principal"])
            for s in d["shares"]
        ),
    ]


def _version_line(ref: str, v: dict) -> str:
    return translate(
        user_locale(),
        "{ref} version {version}: {size}, {files:,} files",
        ref=ref,
        version=v["version"],
        size=size_text(v["bytes"]),
        files=v["files"],
    )


def datasets(args, client: Client, js: bool, out) -> None:
    loc = user_locale()
    sub = args.datasets_command
    if sub == "ls":
        print_listing(client.call("GET", "/datasets"), js, dataset_lines, out)
    elif sub == "show":
        print_listing(client.call("GET", f"/datasets/{_ref(args.ref)}"), js, dataset_show_lines, out)
    elif sub == "create":
        d = client.call(
            "POST",
            "/datasets",
            json={
                "name": args.name,
                "description": args.description,
                "visibility": "public" if args.public else "private",
            },
        )
        print(translate(loc, "created {ref}", ref=d["ref"]), file=out)
    elif sub == "upload":
        v = upload(client, _ref(args.ref), args.file, args.unpack, out)
        print(_version_line(args.ref, v), file=out)
    elif sub == "from-execution":
        v = client.call(
            "POST",
            f"/datasets/{_ref(args.ref)}/versions",
            json={
                "from_execution": {"workspace": args.workspace, "number": args.number, "path": args.path},
            },
        )
        print(_version_line(args.ref, v), file=out)
    elif sub == "import":
        v = client.call("POST", f"/datasets/{_ref(args.ref)}/versions", json={"from_path": args.path})
        print(_version_line(args.ref, v), file=out)
    elif sub in ("share", "unshare"):
        kind, principal = ("user", args.user) if args.user else ("group", args.group)
        if sub == "share":
            client.call("POST", f"/datasets/{_ref(args.ref)}/shares", json={kind: principal})
            done = translate(loc, "{ref}: shared with {kind} {principal}", ref=args.ref, kind=kind, principal=principal)
        else:
            client.call("DELETE", f"/datasets/{_ref(args.ref)}/shares/{kind}/{principal}")
            done = translate(
                loc, "{ref}: unshared with {kind} {principal}", ref=args.ref, kind=kind, principal=principal
            )
        print(done, file=out)
    elif sub == "delete":
        client.call("DELETE", f"/datasets/{_ref(args.ref)}/versions/{args.version}")
        print(translate(loc, "deleted version {version} of {ref}", version=args.version, ref=args.ref), file=out)


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
    for name, text in (
        ("types", translate(loc, "the resource types you may choose")),
        ("quota", translate(loc, "your storage against your quota, and what takes the space")),
        ("courses", translate(loc, "instructors: each course's students and their workspaces")),
    ):
        cmds.add_parser(name, help=text).add_argument("--json", action="store_true")
    cl = cmds.add_parser("cleanup", help=translate(loc, "delete old outputs, keeping the newest of each workspace"))
    cl.add_argument("--keep", type=int, default=1, help=translate(loc, "outputs to keep per workspace (default 1)"))
    cl.add_argument("--json", action="store_true")
    do = cmds.add_parser("delete-output", help=translate(loc, "delete one execution's saved output"))
    do.add_argument("name")
    do.add_argument("number", type=int)
    ac = cmds.add_parser("accounting", help=translate(loc, "CPU-hours and GPU-hours of your executions"))
    ac.add_argument("--since", help=translate(loc, "ISO time, e.g. 2026-09-01"))
    ac.add_argument("--until", help=translate(loc, "ISO time"))
    ac.add_argument("--all", action="store_true", help=translate(loc, "administrators: every user"))
    ac.add_argument("--json", action="store_true")
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
    for sub in (ls, ex, cmds.choices["quota"], ac):
        sub.add_argument(
            "--user", metavar="U", help=translate(loc, "another user's (administrators; instructors: their students)")
        )
    ds = cmds.add_parser("datasets", help=translate(loc, "datasets")).add_subparsers(
        dest="datasets_command", required=True
    )
    d = ds.add_parser("ls")
    d.add_argument("--json", action="store_true")
    d = ds.add_parser("show")
    d.add_argument("ref")
    d.add_argument("--json", action="store_true")
    d = ds.add_parser("create")
    d.add_argument("name")
    d.add_argument("--description", default="")
    d.add_argument("--public", action="store_true")
    d = ds.add_parser("upload")
    d.add_argument("ref")
    d.add_argument("file")
    d.add_argument("--unpack", action="store_true", help=translate(loc, "unpack a tar or zip archive into the version"))
    d = ds.add_parser("from-execution")
    d.add_argument("ref")
    d.add_argument("workspace")
    d.add_argument("number", type=int)
    d.add_argument("--path", default="", help=translate(loc, "a directory of the output (default: all of it)"))
    d = ds.add_parser("import", help=translate(loc, "admins: a directory on the server"))
    d.add_argument("ref")
    d.add_argument("path")
    for name in ("share", "unshare"):
        d = ds.add_parser(name)
        d.add_argument("ref")
        who = d.add_mutually_exclusive_group(required=True)
        who.add_argument("--user")
        who.add_argument("--group")
    d = ds.add_parser("delete")
    d.add_argument("ref")
    d.add_argument("version", type=int)
    cli_ssh.add_parsers(cmds)
    cli_outputs.add_parsers(cmds)
    cli_tasks.add_parsers(cmds)
    cli_images.add_parsers(cmds)
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
