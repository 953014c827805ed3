"""The `workspace` command's deployments part (#33): serve a saved output behind /serve/YOU/NAME/.

workspace deploy NAME --from W[#N] | --dataset REF --image I [--port 8080] [--replicas N] [--type T]
                 [--ready PATH] [--access private|course|public] [--course C] [--idle SECONDS] [--wait]
                 -- COMMAND...
    makes the deployment, or gives an existing one a new version (rolled out without downtime: what is
    not given is kept); --wait prints its state until it serves (or its rollout fails)
workspace deployments ls | show NAME | stop NAME | start NAME | rm NAME
workspace deployments set NAME [--replicas N] [--access A] [--course C] [--idle SECONDS]
workspace deployments logs NAME [--replica SERVER] [-f]     a replica's log (the first ready one's)
workspace deployments key NAME [--label TEXT]               a new API key (printed once)
workspace deployments revoke NAME ID                        refused from now on
"""

from __future__ import annotations

import sys
import time
from urllib.parse import urljoin

from workspace.cli.base import CLIError, print_listing, print_stream, user_locale
from workspace.i18n import translate

COMMANDS = ("deploy", "deployments")
WAIT = 900  # s, --wait at most


def add_parsers(cmds) -> None:
    loc = user_locale()
    d = cmds.add_parser("deploy", help=translate(loc, "serve a saved output (or give a deployment a new version)"))
    d.add_argument("name")
    source = d.add_mutually_exclusive_group()
    source.add_argument("--from", dest="source", metavar="W[#N]", help=translate(loc, "a workspace's saved output"))
    source.add_argument("--dataset", metavar="OWNER/NAME[:V]", help=translate(loc, "a dataset version"))
    d.add_argument("--image")
    d.add_argument("--port", type=int)
    d.add_argument("--replicas", type=int)
    d.add_argument("--type", dest="resource_type")
    d.add_argument("--ready", metavar="PATH", help=translate(loc, "the path that answers once the app is ready"))
    d.add_argument("--access", choices=("private", "course", "public"))
    d.add_argument("--course")
    d.add_argument("--idle", type=int, metavar="SECONDS", help=translate(loc, "scale to zero after this long"))
    d.add_argument("--wait", action="store_true", help=translate(loc, "until it serves"))
    d.add_argument("serve_command", nargs="*", metavar="COMMAND", help=translate(loc, "after --: what serves"))
    ds = cmds.add_parser("deployments", help=translate(loc, "your deployments")).add_subparsers(
        dest="deployments_command", required=True
    )
    ds.add_parser("ls").add_argument("--json", action="store_true")
    for name in ("show", "stop", "start", "rm"):
        p = ds.add_parser(name)
        p.add_argument("name")
        if name == "show":
            p.add_argument("--json", action="store_true")
    p = ds.add_parser("set")
    p.add_argument("name")
    p.add_argument("--replicas", type=int)
    p.add_argument("--access", choices=("private", "course", "public"))
    p.add_argument("--course")
    p.add_argument("--idle", type=int, metavar="SECONDS")
    p = ds.add_parser("logs")
    p.add_argument("name")
    p.add_argument("--replica", metavar="SERVER")
    p.add_argument("-f", "--follow", action="store_true")
    p = ds.add_parser("key")
    p.add_argument("name")
    p.add_argument("--label", default="key")
    p = ds.add_parser("revoke")
    p.add_argument("name")
    p.add_argument("id", type=int)


def run(args, client, out=sys.stdout) -> None:
    if args.command == "deploy":
        return deploy(client, args, out)
    what, name = args.deployments_command, getattr(args, "name", None)
    path = f"/deployments/{name}"
    if what == "ls":
        print_listing(client.call("GET", "/deployments"), args.json, lambda ds: [line(d) for d in ds], out)
    elif what == "show":
        print_listing(client.call("GET", path), args.json, details, out)
    elif what in ("stop", "start"):
        print(line(client.call("POST", f"{path}/{what}")), file=out)
    elif what == "rm":
        client.call("DELETE", path)
        print(translate(user_locale(), "deleted {name}", name=name), file=out)
    elif what == "set":
        body = {k: v for k, v in _settings(args).items() if v is not None}
        print(line(client.call("POST", f"{path}/settings", json=body)), file=out)
    elif what == "logs":
        logs(client, name, args.replica, args.follow, out)
    elif what == "key":
        made = client.call("POST", f"{path}/keys", json={"label": args.label})
        print(made["key"], file=out)
        print(
            translate(user_locale(), "key {id} of {name}: shown only now; keep it", id=made["id"], name=name),
            file=sys.stderr,
        )
    else:
        client.call("DELETE", f"{path}/keys/{args.id}")
        print(translate(user_locale(), "revoked key {id} of {name}", id=args.id, name=name), file=out)


def _settings(args) -> dict:
    return {"replicas": args.replicas, "access": args.access, "course": args.course, "idle_seconds": args.idle}


def deploy(client, args, out) -> None:
    command = [c for c in args.serve_command if c != "--"] or None
    body = {
        "from": args.source,
        "dataset": args.dataset,
        "image": args.image,
        "port": args.port,
        "ready": args.ready,
        "command": command,
    }
    body = {k: v for k, v in body.items() if v is not None}
    existing = {d["name"] for d in client.call("GET", "/deployments") or []}
    if args.name in existing:
        version = client.call("POST", f"/deployments/{args.name}/versions", json=body)
        print(
            translate(
                user_locale(),
                "{name}: version {version} is being rolled out",
                name=args.name,
                version=version["version"],
            ),
            file=out,
        )
        settings = {k: v for k, v in {**_settings(args), "resource_type": None}.items() if v is not None}
        if settings:
            client.call("POST", f"/deployments/{args.name}/settings", json=settings)
    else:
        body.update({k: v for k, v in _settings(args).items() if v is not None})
        if args.resource_type:
            body["resource_type"] = args.resource_type
        made = client.call("POST", "/deployments", json={"name": args.name, **body})
        url = urljoin(client.url, made["address"])  # on the owner's own origin with per-user origins
        print(translate(user_locale(), "{name}: made; it is served at {url}", name=args.name, url=url), file=out)
    if args.wait:
        wait(client, args.name, out)


def wait(client, name: str, out) -> None:
    """Print its state as it changes until it serves (or its rollout is given up)."""
    last, deadline = None, time.monotonic() + WAIT
    while time.monotonic() < deadline:
        d = client.call("GET", f"/deployments/{name}")
        now = line(d)
        if now != last:
            print(now, file=out, flush=True)
            last = now
        if d["status"] == "serving":
            return
        if d["status"] in ("failed", "stopped") or (d["status"] == "unavailable" and d.get("message")):
            raise CLIError(d.get("message") or d["status"])
        if d["rolling"] is None and d.get("message") and d["status"] != "updating":
            raise CLIError(d["message"])
        time.sleep(2)
    raise CLIError(translate(user_locale(), "{name} is not serving after {seconds} s.", name=name, seconds=WAIT))


def logs(client, name: str, replica: str | None, follow: bool, out) -> None:
    d = client.call("GET", f"/deployments/{name}")
    replicas = [r for r in d["replica_list"] if r["execution"] and (replica is None or r["server"] == replica)]
    replicas.sort(key=lambda r: r["state"] != "ready")
    if not replicas:
        raise CLIError(translate(user_locale(), "{name} has no replica with a log yet.", name=name))
    path = f"/workspaces/{d['workspace']}/executions/{replicas[0]['execution']}/logs"
    print_stream(client, path, {"follow": 1} if follow else None, out)


def line(d: dict) -> str:
    ready = f"{d['ready']}/{d['replicas']}"
    version = f"v{d['serving']}" if d["serving"] else "-"
    rolling = f" → v{d['rolling']}" if d.get("rolling") else ""
    message = f"  {d['message']}" if d.get("message") else ""
    return (
        f"{d['name']:<24} {d['status']:<12} {version}{rolling:<6} {ready:>5}  {d['access']:<8} {d['address']}{message}"
    )


def details(d: dict) -> list[str]:
    out = [line(d), f"  restarts: {d['restarts']}  requests: {d['requests']}  failures: {d['failures']}"]
    for v in d["versions"]:
        failure = f"  {v['failure']}" if v.get("failure") else ""
        out.append(f"  v{v['version']:<3} {v['state']:<8} {v['source']:<20} {v['image']}  {v['command']}{failure}")
    for r in d["replica_list"]:
        out.append(f"  {r['server']}  v{r['version']}  {r['state']:<9} restarts {r['restarts']}  {r['node'] or ''}")
    for k in d["keys"]:
        out.append(f"  key {k['id']}: {k['prefix']}…  {k['label']}  {'revoked' if k['revoked'] else ''}")
    return out
