"""The `workspace` command's sweeps part (#31): one command once per combination of parameters.

workspace run NAME --sweep lr=0.1,0.01 --sweep seed=1,2 [--from now|latest|N] [...] --
        python train.py --lr {lr} --seed {seed}
    starts one run beside the workspace per combination ({name} in the command is replaced by the
    run's value, shell-quoted); they wait in the queue as capacity allows. Prints the sweep's number
    and page; --wait: then waits for every run and prints the table (exits 1 if any failed)
workspace sweep NAME#N [--wait] [--cancel] [--download FILE]
    a sweep's runs: parameters, state (and place in the queue), exit code, duration, last log line;
    --cancel stops every run that has not ended; --download saves every run's output as one archive
    (.tar.gz, or .zip by the file's name)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from urllib.parse import quote

from workspace.cli.base import CLIError, get_stream, name_and_number, size_text, user_locale
from workspace.cli.outputs import save_stream
from workspace.i18n import translate

COMMANDS = ("sweep",)
POLL_S = 3.0


def add_parsers(cmds) -> None:
    loc = user_locale()
    s = cmds.add_parser("sweep", help=translate(loc, "a sweep's runs: their state; --cancel, --download FILE"))
    s.add_argument("what", metavar="NAME#N")
    s.add_argument("--wait", action="store_true", help=translate(loc, "until every run has ended"))
    s.add_argument("--cancel", action="store_true", help=translate(loc, "stop every run that has not ended"))
    s.add_argument("--download", metavar="FILE", help=translate(loc, "every run's output in one archive"))


def run(args, client, out=sys.stdout) -> None:
    name, number = name_and_number(args.what)
    if number is None:
        sweeps = client.call("GET", f"/workspaces/{quote(name, safe='')}/sweeps") or []
        if not sweeps:
            raise CLIError(translate(user_locale(), "Workspace “{name}” has no sweep.", name=name))
        number = sweeps[0]["number"]
    base = f"/workspaces/{quote(name, safe='')}/sweeps/{number}"
    if args.cancel:
        done = client.call("POST", f"{base}/cancel")
        print(
            translate(
                user_locale(),
                "cancelled sweep #{number}: {count} run(s) stopped",
                number=number,
                count=done["cancelled"],
            ),
            file=out,
        )
        return
    if args.download:
        target = Path(args.download)
        kind = "zip" if target.name.endswith(".zip") else "tar.gz"
        size = save_stream(get_stream(client, f"{base}/outputs", {"archive": kind}), target)
        print(translate(user_locale(), "saved {path} ({size})", path=target, size=size_text(size)), file=out)
        return
    code = show(client, base, args.wait, out)
    if code:
        raise SystemExit(code)


def start(client, args, command: list[str], body: dict, out) -> int:
    """`workspace run NAME --sweep …`: start the sweep; with --wait (not --detach), its table at the end."""
    body = {**body, "command": command, "sweep": list(args.sweep)}
    sweep = client.call("POST", f"/workspaces/{quote(args.name, safe='')}/sweeps", json=body)
    loc = user_locale()
    print(
        translate(
            loc,
            "sweep {name}#{number}: {count} runs of {command}",
            name=args.name,
            number=sweep["number"],
            count=sweep["runs_total"],
            command=sweep["command"],
        ),
        file=out,
        flush=True,
    )
    print(
        translate(
            loc, "follow it with: workspace sweep {name}#{number} --wait", name=args.name, number=sweep["number"]
        ),
        file=out,
    )
    if args.detach:
        return 0
    return show(client, f"/workspaces/{quote(args.name, safe='')}/sweeps/{sweep['number']}", True, out)


def show(client, base: str, wait: bool, out) -> int:
    """Print the sweep's table (after every run ended, with `wait`); 1 when a run failed, else 0."""
    sweep = client.call("GET", base)
    while wait and not sweep["done"]:
        time.sleep(POLL_S)
        sweep = client.call("GET", base)
    for r in sweep["runs"]:
        state = r["state"]
        if r.get("queue"):
            state += f" ({r['queue']['position']}/{r['queue']['waiting']})"
        number = f"#{r['number']}" if r.get("number") else "-"
        seconds = f"{round(r['seconds'])} s" if r.get("seconds") is not None else ""
        code = "" if r.get("exit_code") is None else str(r["exit_code"])
        print(
            f"{number:>5}  {r['label']:<30}  {state:<22}  {code:>4}  {seconds:>7}  {r.get('last_line') or ''}", file=out
        )
    counts = ", ".join(f"{k}: {v}" for k, v in sweep["states"].items())
    print(
        translate(
            user_locale(),
            "{total} runs, {ok} finished successfully ({counts})",
            total=sweep["runs_total"],
            ok=sweep["succeeded"],
            counts=counts,
        ),
        file=out,
    )
    failed = [r for r in sweep["runs"] if r["state"] in ("failed", "refused") or (r.get("exit_code") not in (None, 0))]
    return 1 if sweep["done"] and failed else 0
