"""The `workspace` command's images part (#18): images users define.

workspace image build NAME --from IMAGE [--apt packages.txt] [--pip requirements.txt] [--script post-build.sh]
                           [--share private|public|group:COURSE] [--detach]
    builds (or rebuilds) an image from IMAGE with the Debian packages, pip requirements and post-build
    script in those files, printing its log as it is written; exits 1 if the build fails
workspace image build NAME --dockerfile Dockerfile [--context DIR] [--share ...] [--detach]
    the same from a Dockerfile (#32): its FROM names the image, COPY and ADD read the context (DIR, by
    default the Dockerfile's folder; sent as a tar archive, .git left out)
workspace image ls           the site's images and the users' images you may use
workspace image log OWNER/NAME [-f]
workspace image share OWNER/NAME private|public|group:COURSE
workspace image approve OWNER/NAME [--for public|group:COURSE]   (an administrator; an instructor for a course)
workspace image revoke OWNER/NAME [--for public|group:COURSE]
workspace image pending      the shared images whose build waits for your approval
workspace image rm OWNER/NAME
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from workspace.cli.base import CLIError, print_stream, user_locale
from workspace.i18n import translate

COMMANDS = ("image",)


def add_parsers(cmds) -> None:
    loc = user_locale()
    im = cmds.add_parser("image", help=translate(loc, "images you build: packages on top of an image of the site"))
    sub = im.add_subparsers(dest="image_command", required=True)
    b = sub.add_parser("build", help=translate(loc, "build (or rebuild) an image and print its log"))
    b.add_argument("name", help=translate(loc, "the image's name (yours: it becomes YOU/NAME)"))
    b.add_argument("--from", dest="base", help=translate(loc, "the image to start from (see `workspace image ls`)"))
    b.add_argument("--dockerfile", type=Path, metavar="FILE", help=translate(loc, "a Dockerfile (instead of --from)"))
    b.add_argument(
        "--context", type=Path, metavar="DIR", help=translate(loc, "the Dockerfile's files (default: its folder)")
    )
    b.add_argument("--apt", type=Path, metavar="FILE", help=translate(loc, "Debian packages, one per line"))
    b.add_argument("--pip", type=Path, metavar="FILE", help=translate(loc, "a pip requirements file"))
    b.add_argument(
        "--script", type=Path, metavar="FILE", help=translate(loc, "a bash script run as root after the packages")
    )
    b.add_argument("--share", default="private", help=translate(loc, "private (default), public or group:COURSE"))
    b.add_argument("--detach", action="store_true", help=translate(loc, "ask for the build and return"))
    sub.add_parser("ls", help=translate(loc, "the images you may use")).add_argument("--json", action="store_true")
    lg = sub.add_parser("log", help=translate(loc, "an image's build log"))
    lg.add_argument("image", metavar="OWNER/NAME")
    lg.add_argument("-f", "--follow", action="store_true", help=translate(loc, "until the build ends"))
    sh = sub.add_parser("share", help=translate(loc, "who may use an image"))
    sh.add_argument("image", metavar="OWNER/NAME")
    sh.add_argument("visibility", help=translate(loc, "private, public or group:COURSE"))
    for verb, said in (
        ("approve", translate(loc, "let others start this build of an image (administrators, instructors)")),
        ("revoke", translate(loc, "take an approval back")),
    ):
        ap = sub.add_parser(verb, help=said)
        ap.add_argument("image", metavar="OWNER/NAME")
        ap.add_argument(
            "--for",
            dest="audience",
            metavar="public|group:COURSE",
            help=translate(loc, "for whom (default: those it is shared with)"),
        )
    sub.add_parser("pending", help=translate(loc, "the shared images waiting for your approval"))
    sub.add_parser("rm", help=translate(loc, "delete an image")).add_argument("image", metavar="OWNER/NAME")


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
    elif what in ("approve", "revoke"):
        body = {"for": args.audience} if args.audience else {}
        image = client.call("POST", f"/images/{_path(args.image)}/{what}", json=body)
        for line in approval_lines(image):
            print(line, file=out)
    elif what == "pending":
        for line in lines(client.call("GET", "/images/pending")):
            print(line, file=out)
    elif what == "rm":
        client.call("DELETE", f"/images/{_path(args.image)}")
        print(translate(user_locale(), "deleted {image}", image=args.image), file=out)


def _path(full_name: str) -> str:
    from urllib.parse import quote

    owner, _, name = full_name.partition("/")
    if not owner or not name:
        raise CLIError(
            translate(user_locale(), "“{image}” is not OWNER/NAME (see `workspace image ls`).", image=full_name)
        )
    return f"{quote(owner, safe='')}/{quote(name, safe='')}"


def _read(path: Path | None, what: str) -> str | None:
    """The text of the file given for `what` (apt, pip or script)."""
    if path is None:
        return None
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        loc = user_locale()
        if what == "apt":
            raise CLIError(translate(loc, "Cannot read the package list {path}: {error}", path=path, error=e))
        if what == "pip":
            raise CLIError(translate(loc, "Cannot read the requirements file {path}: {error}", path=path, error=e))
        if what == "dockerfile":
            raise CLIError(translate(loc, "Cannot read the Dockerfile {path}: {error}", path=path, error=e))
        raise CLIError(translate(loc, "Cannot read the script {path}: {error}", path=path, error=e))


CONTEXT_LIMIT = 256 * 1024 * 1024  # the service's bound (images/dockerfiles.py)


def context_archive(folder: Path) -> str:
    """`folder` as the build's context: a gzipped tar archive of its files (its .git left out), in base64;
    links are sent as links (the service refuses them, naming the first)."""
    import base64
    import io
    import tarfile

    loc = user_locale()
    if not folder.is_dir():
        raise CLIError(translate(loc, "The build's context {path} is not a folder.", path=folder))
    buf, total = io.BytesIO(), 0
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if relative.parts[0] == ".git":
                continue
            total += path.lstat().st_size if path.is_file() and not path.is_symlink() else 0
            if total > CONTEXT_LIMIT:
                raise CLIError(
                    translate(loc, "The build's context {path} is larger than {mb} MB.", path=folder, mb=256)
                )
            tar.add(path, arcname=str(relative), recursive=False)
    return base64.b64encode(buf.getvalue()).decode()


def build_request(args) -> dict:
    """The body of `POST /images`: an image from --from with its files, or a Dockerfile with its context."""
    if (args.base is None) == (getattr(args, "dockerfile", None) is None):
        raise CLIError(
            translate(
                user_locale(), "Say what to build: --from IMAGE (with --apt, --pip, --script) or --dockerfile FILE."
            )
        )
    if args.base is not None:
        body = {
            "name": args.name,
            "from": args.base,
            "apt": _read(args.apt, "apt"),
            "pip": _read(args.pip, "pip"),
            "script": _read(args.script, "script"),
            "visibility": args.share,
        }
        return {k: v for k, v in body.items() if v is not None}
    return {
        "name": args.name,
        "dockerfile": _read(args.dockerfile, "dockerfile"),
        "context": context_archive(args.context or args.dockerfile.parent),
        "visibility": args.share,
    }


def build(client, args, out) -> str:
    loc = user_locale()
    image = client.call("POST", "/images", json=build_request(args))
    print(
        translate(
            loc,
            "building {image} (build {build}) from {base}",
            image=image["name"],
            build=image["build"],
            base=image["base"],
        ),
        file=out,
        flush=True,
    )
    if args.detach:
        print(translate(loc, "follow it with: workspace image log {image} -f", image=image["name"]), file=out)
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
            translate(
                loc,
                "{image} is ready ({size:,.1f} MB over {base}, built in {seconds} s): "
                "start a workspace with image {image}",
                image=record["name"],
                size=size,
                base=record["base"],
                seconds=record.get("build_seconds"),
            ),
            file=out,
        )
    else:
        print(f"{record['name']}: {record.get('error') or record['state']}", file=out)
    return record["state"]


def print_log(client, full_name: str, follow: bool, out) -> None:
    print_stream(client, f"/images/{_path(full_name)}/log", {"follow": 1} if follow else None, out)


def lines(images: list[dict]) -> list[str]:
    loc = user_locale()
    out = []
    for i in images:
        size = f"{(i.get('size') or i.get('bytes') or 0) / 1e9:.2f} GB"
        versions = ", ".join(f"{k} {v}" for k, v in (i.get("versions") or {}).items())
        if i.get("kind") == "user":
            state = i["state"] + (f" ({i['progress']})" if i.get("progress") else "")
            out.append(
                translate(
                    loc,
                    "{image:<32} {state:<10} {size:>9}  from {base}, {visibility}  {versions}",
                    image=i["name"],
                    state=state,
                    size=size,
                    base=i["base"],
                    visibility=i["visibility"],
                    versions=versions,
                )
            )
        else:
            # the site's images: "site" where a user's image shows its state
            name = translate(loc, "{image} (default)", image=i["name"]) if i.get("default") else i["name"]
            out.append(f"{name:<32} {'site':<10} {size:>9}  {versions}")
    return out


def approval_lines(image: dict) -> list[str]:
    """An image's approvals, one a line: for whom, by whom, and whether for its current build."""
    loc = user_locale()
    out = [
        translate(
            loc,
            "{image}: built by {owner}, build {build}",
            image=image["name"],
            owner=image["owner"],
            build=image["build"],
        )
    ]
    for a in image.get("approvals") or []:
        if a["current"]:
            out.append(
                translate(loc, "  approved for {audience} by {who} at {at}", audience=a["for"], who=a["by"], at=a["at"])
            )
        else:
            out.append(
                translate(
                    loc,
                    "  build {build} was approved for {audience} by {who}; this build is not",
                    build=a["build"],
                    audience=a["for"],
                    who=a["by"],
                )
            )
    if not image.get("approvals"):
        out.append(translate(loc, "  not approved for anyone: it runs only for its owner"))
    return out
