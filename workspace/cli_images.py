"""The `workspace` command's images part (#18): images users define.

workspace image build NAME --from IMAGE [--apt packages.txt] [--pip requirements.txt] [--script post-build.sh]
                           [--share private|public|group:COURSE] [--detach]
    builds (or rebuilds) an image from IMAGE with the Debian packages, pip requirements and post-build
    script in those files, printing its log as it is written; exits 1 if the build fails
workspace image ls           the site's images and the users' images you may use
workspace image log OWNER/NAME [-f]
workspace image share OWNER/NAME private|public|group:COURSE
workspace image rm OWNER/NAME
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

COMMANDS = ("image",)


def add_parsers(cmds) -> None:
    im = cmds.add_parser("image", help="images you build: packages on top of an image of the site")
    sub = im.add_subparsers(dest="image_command", required=True)
    b = sub.add_parser("build", help="build (or rebuild) an image and print its log")
    b.add_argument("name", help="the image's name (yours: it becomes YOU/NAME)")
    b.add_argument("--from", dest="base", required=True, help="the image to start from (see `workspace image ls`)")
    b.add_argument("--apt", type=Path, metavar="FILE", help="Debian packages, one per line")
    b.add_argument("--pip", type=Path, metavar="FILE", help="a pip requirements file")
    b.add_argument("--script", type=Path, metavar="FILE", help="a bash script run as root after the packages")
    b.add_argument("--share", default="private", help="private (default), public or group:COURSE")
    b.add_argument("--detach", action="store_true", help="ask for the build and return")
    sub.add_parser("ls", help="the images you may use").add_argument("--json", action="store_true")
    lg = sub.add_parser("log", help="an image's build log")
    lg.add_argument("image", metavar="OWNER/NAME")
    lg.add_argument("-f", "--follow", action="store_true", help="until the build ends")
    sh = sub.add_parser("share", help="who may use an image")
    sh.add_argument("image", metavar="OWNER/NAME")
    sh.add_argument("visibility", help="private, public or group:COURSE")
    sub.add_parser("rm", help="delete an image").add_argument("image", metavar="OWNER/NAME")


def run(args, client, out=sys.stdout) -> None:
    what = args.image_command
    if what == "build":
        if build(client, args, out) != "ready":
            raise SystemExit(1)
    elif what == "ls":
        images = client.call("GET", "/images")
        if args.json:
            import json

            print(json.dumps(images, indent=2), file=out)
        else:
            for line in lines(images):
                print(line, file=out)
    elif what == "log":
        print_log(client, args.image, args.follow, out)
    elif what == "share":
        image = client.call("PATCH", f"/images/{_path(args.image)}", json={"visibility": args.visibility})
        print(f"{image['name']}: {image['visibility']}", file=out)
    elif what == "rm":
        client.call("DELETE", f"/images/{_path(args.image)}")
        print(f"deleted {args.image}", file=out)


def _path(full_name: str) -> str:
    from urllib.parse import quote

    from .cli import CLIError

    owner, _, name = full_name.partition("/")
    if not owner or not name:
        raise CLIError(f"“{full_name}” is not OWNER/NAME (see `workspace image ls`).")
    return f"{quote(owner, safe='')}/{quote(name, safe='')}"


def _read(path: Path | None, what: str) -> str | None:
    from .cli import CLIError

    if path is None:
        return None
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise CLIError(f"Cannot read {what} {path}: {e}")


def build(client, args, out) -> str:
    body = {
        "name": args.name,
        "from": args.base,
        "apt": _read(args.apt, "the package list"),
        "pip": _read(args.pip, "the requirements file"),
        "script": _read(args.script, "the script"),
        "visibility": args.share,
    }
    image = client.call("POST", "/images", json={k: v for k, v in body.items() if v is not None})
    print(f"building {image['name']} (build {image['build']}) from {image['base']}", file=out, flush=True)
    if args.detach:
        print(f"follow it with: workspace image log {image['name']} -f", file=out)
        return "ready"
    print_log(client, image["name"], True, out)
    deadline = time.monotonic() + 120
    while True:  # the log ends with the build; its record follows
        record = client.call("GET", f"/images/{_path(image['name'])}")
        if record["state"] not in ("queued", "building") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if record["state"] == "ready":
        size = (record.get("bytes") or 0) / 1e6
        print(
            f"{record['name']} is ready ({size:,.1f} MB over {record['base']}, "
            f"built in {record.get('build_seconds')} s): start a workspace with image {record['name']}",
            file=out,
        )
    else:
        print(f"{record['name']}: {record.get('error') or record['state']}", file=out)
    return record["state"]


def print_log(client, full_name: str, follow: bool, out) -> None:
    from .cli_outputs import print_stream

    print_stream(client, f"/images/{_path(full_name)}/log", {"follow": 1} if follow else None, out)


def lines(images: list[dict]) -> list[str]:
    out = []
    for i in images:
        size = f"{(i.get('size') or i.get('bytes') or 0) / 1e9:.2f} GB"
        versions = ", ".join(f"{k} {v}" for k, v in (i.get("versions") or {}).items())
        if i.get("kind") == "user":
            state = i["state"] + (f" ({i['progress']})" if i.get("progress") else "")
            out.append(f"{i['name']:<32} {state:<10} {size:>9}  from {i['base']}, {i['visibility']}  {versions}")
        else:
            default = " (default)" if i.get("default") else ""
            out.append(f"{i['name'] + default:<32} {'site':<10} {size:>9}  {versions}")
    return out
