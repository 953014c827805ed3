"""The `workspace` command's tasks part (#17): run a command as an execution, read its log, cancel it.

workspace run NAME [--continue N] [--type T] [--dataset REF]... [--image I] [--detach] -- COMMAND...
    starts the task, prints its start's progress (its place in the queue too), then its log as it
    is written, then how it ended; exits with the task's exit code (--detach: only starts it)
workspace run NAME --from now|latest|N [...] -- COMMAND...
    the same as a run beside the workspace (#31): while it is open, beside its other runs; `now` is its
    home as it is at the request (its unsaved files too); the run's output never becomes its "latest"
workspace run NAME --nodes N [--processes P] [--type T] [...] -- torchrun ...
    (or -- mpirun -np P --hostfile $WORKSPACE_HOSTFILE ...)
    a job over N nodes (#31): one container a node, all admitted together; rank 0's home is its output
workspace run NAME --sweep lr=0.1,0.01 [--sweep seed=1,2] [...] -- COMMAND with {lr} {seed}...
    one run beside the workspace per combination (cli/sweeps.py)
workspace logs NAME[#N] [-f]
    a task's log (the latest task's without #N); -f follows it until the task ends
workspace cancel NAME[#N]
    stops a running task (its home is saved as its output)
workspace webhook [URL | --remove]
    shows, sets or removes the URL called (signed with the printed secret) when a task of yours ends
"""

from __future__ import annotations

import sys
import time

from workspace.cli import sweeps
from workspace.cli.base import CLIError, follow_progress, name_and_number, print_stream, user_locale, whoami
from workspace.i18n import translate

COMMANDS = ("run", "logs", "cancel", "webhook")


def add_parsers(cmds) -> None:
    loc = user_locale()
    r = cmds.add_parser(
        "run", help=translate(loc, "run a command to completion as a new execution (a task) of a workspace")
    )
    r.add_argument("name", help=translate(loc, "the workspace (created if it does not exist)"))
    r.add_argument(
        "--continue", dest="continue_from", default="latest", help=translate(loc, "N, latest (default) or fresh")
    )
    r.add_argument(
        "--from",
        dest="beside_from",
        metavar="now|latest|N",
        help=translate(loc, "run beside the workspace (while it is open), from its home now, its latest or #N"),
    )
    r.add_argument(
        "--sweep",
        action="append",
        metavar="NAME=V1,V2",
        help=translate(loc, "one run beside the workspace per combination; {NAME} in the command is its value"),
    )
    r.add_argument(
        "--nodes", type=int, help=translate(loc, "a job over N nodes beside the workspace (one container a node)")
    )
    r.add_argument(
        "--processes", type=int, help=translate(loc, "with --nodes: how many processes mpirun starts in all")
    )
    r.add_argument("--type", dest="resource_type", help=translate(loc, "the resource type"))
    r.add_argument(
        "--dataset",
        dest="datasets",
        action="append",
        metavar="OWNER/NAME[:VERSION]",
        help=translate(loc, "a dataset to mount read-only (/input0 …); repeat for up to five"),
    )
    r.add_argument("--image", help=translate(loc, "the image"))
    r.add_argument(
        "--detach", action="store_true", help=translate(loc, "start it and return (read it with `workspace logs`)")
    )
    r.add_argument(
        "task_command", nargs="+", metavar="COMMAND", help=translate(loc, "after --: what to run in the home")
    )
    lg = cmds.add_parser("logs", help=translate(loc, "a task's log"))
    lg.add_argument("what", metavar="NAME[#N]")
    lg.add_argument("-f", "--follow", action="store_true", help=translate(loc, "until the task ends"))
    c = cmds.add_parser("cancel", help=translate(loc, "stop a running task (its home is saved)"))
    c.add_argument("what", metavar="NAME[#N]")
    w = cmds.add_parser(
        "webhook", help=translate(loc, "the URL called when a task of yours ends (show, set, --remove)")
    )
    w.add_argument("url", nargs="?")
    w.add_argument("--remove", action="store_true")


def run(args, client, out=sys.stdout) -> None:
    if args.command == "run":
        code = run_task(client, args, out)
        if code:
            raise SystemExit(code)
    elif args.command == "webhook":
        webhook(client, args.url, args.remove, out)
    elif args.command == "logs":
        name, number = task_of(client, args.what)
        print_log(client, name, number, args.follow, out)
    else:
        name, number = task_of(client, args.what)
        client.call("POST", f"/workspaces/{name}/executions/{number}/cancel")
        print(
            translate(
                user_locale(), "cancelling {name} #{number}; its home is saved as its output", name=name, number=number
            ),
            file=out,
        )


def task_of(client, what: str) -> tuple[str, int]:
    """(workspace, number) of NAME#N, or of NAME's latest task."""
    name, number = name_and_number(what)
    if number is not None:
        return name, number
    tasks = [e for e in client.call("GET", f"/workspaces/{name}/executions") or [] if e.get("kind") == "task"]
    if not tasks:
        raise CLIError(translate(user_locale(), "Workspace “{name}” has run no task.", name=name))
    return name, tasks[-1]["number"]


def print_log(client, name: str, number: int, follow: bool, out) -> None:
    print_stream(client, f"/workspaces/{name}/executions/{number}/logs", {"follow": 1} if follow else None, out)


def run_task(client, args, out) -> int:
    command = list(args.task_command)
    if command and command[0] == "--":
        command = command[1:]
    beside = getattr(args, "beside_from", None)
    nodes, sweep = getattr(args, "nodes", None), getattr(args, "sweep", None)
    run_beside = beside is not None or nodes is not None or bool(sweep)  # a run on a server of its own (#31)
    if run_beside:
        body = {"command": command, "from": _continuation((beside or args.continue_from).lstrip("#"))}
    else:
        body = {"command": command, "continue_from": _continuation(args.continue_from)}
    for key in ("resource_type", "image", "datasets"):
        if getattr(args, key):
            body[key] = getattr(args, key)
    if nodes is not None:  # a job over several nodes: one container a node, admitted together
        body["job"] = {"nodes": nodes, **({"processes": args.processes} if args.processes else {})}
    if sweep:  # one run per combination: cli/sweeps.py
        return sweeps.start(client, args, command, body, out)
    started = client.call("POST", f"/workspaces/{args.name}/{'runs' if run_beside else 'tasks'}", json=body)
    ex = started.get("execution")
    loc = user_locale()
    if ex is None:
        raise CLIError(
            translate(
                loc, "The task was asked for, but {name} shows no new execution; see `workspace ls`.", name=args.name
            )
        )
    number = ex["number"]
    print(
        translate(loc, "task {name} #{number}: {command}", name=args.name, number=number, command=ex["command"]),
        file=out,
        flush=True,
    )
    if args.detach:
        print(
            translate(loc, "follow it with: workspace logs {name}#{number} -f", name=args.name, number=number), file=out
        )
        return 0
    follow_progress(client, whoami(client), started.get("server") or args.name, out)  # None: it already ended
    print_log(client, args.name, number, True, out)
    record = _ended(client, args.name, number)
    code = record.get("exit_code")
    outcome = record.get("stop_detail") or record["state"]
    if record.get("has_output"):
        ended = translate(
            loc, "{name} #{number}: {outcome} (its output is saved)", name=args.name, number=number, outcome=outcome
        )
    else:
        ended = translate(
            loc, "{name} #{number}: {outcome} (no output was saved)", name=args.name, number=number, outcome=outcome
        )
    print(ended, file=out)
    if record["state"] == "failed":
        return 1
    return code if isinstance(code, int) and 0 <= code < 256 else 0


def _continuation(value: str):
    return int(value) if value.isdigit() else value


def _ended(client, name: str, number: int, timeout: float = 120) -> dict:
    """The task's record once it is saved (its log ends when its container does; the save follows)."""
    deadline = time.monotonic() + timeout
    while True:
        record = client.call("GET", f"/workspaces/{name}/executions/{number}")
        if record["state"] in ("stopped", "failed", "save_failed") or time.monotonic() > deadline:
            return record
        time.sleep(0.5)


def webhook(client, url: str | None, remove: bool, out) -> None:
    loc = user_locale()
    if remove:
        client.call("DELETE", "/webhook")
        print(translate(loc, "webhook removed"), file=out)
        return
    hook = client.call("PUT", "/webhook", json={"url": url}) if url else client.call("GET", "/webhook")
    print(
        translate(
            loc,
            "url:    {url}\nsecret: {secret}  (X-Workspace-Signature: sha256=HMAC of the body)",
            url=hook["url"],
            secret=hook["secret"],
        ),
        file=out,
    )
    if hook.get("last_sent"):
        print(
            translate(loc, "last call: {when}: {result}", when=hook["last_sent"], result=hook["last_result"]), file=out
        )
