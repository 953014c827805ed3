"""The `workspace` command's datasets part: list, show, create, upload (resumable, checksummed), make a
version from an execution's output or a server directory, share, delete a version.

    workspace datasets ls                          mine, shared with me, public
    workspace datasets show OWNER/NAME
    workspace datasets create NAME [--description TEXT] [--public]
    workspace datasets upload OWNER/NAME FILE [--unpack]
    workspace datasets from-execution OWNER/NAME WORKSPACE NUMBER [--path DIR]
    workspace datasets import OWNER/NAME /PATH/ON/THE/SERVER          admins
    workspace datasets share|unshare OWNER/NAME (--user U | --group G)
    workspace datasets delete OWNER/NAME VERSION
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

from workspace.cli.base import Client, CLIError, print_listing, size_text, user_locale
from workspace.i18n import translate

COMMANDS = ("datasets",)
UPLOAD_CHUNK = 256 << 20
READ_BLOCK = 4 << 20


def add_parsers(cmds) -> None:
    loc = user_locale()
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


def run(args, client: Client, out=sys.stdout) -> None:
    datasets(args, client, getattr(args, "json", False), out)


def _ref(value: str) -> str:
    if value.count("/") != 1:
        raise CLIError(translate(user_locale(), "“{value}” is not a dataset reference; write OWNER/NAME.", value=value))
    return value


def upload(client: Client, ref: str, path: str, unpack: bool, out=sys.stdout) -> dict:
    """Upload a file as a new version; resumes an interrupted upload of the same file."""
    size = os.path.getsize(path)
    sha256 = file_sha256(path)
    state_file = f"{path}.workspace-upload"
    upload_id, offset = resumed_upload(client, ref, state_file, sha256, size, out)
    if not upload_id:
        upload_id = new_upload(client, ref, path, size, sha256, unpack, state_file)
    send_file(client, ref, upload_id, path, offset, size, out)
    version = client.call("POST", f"/datasets/{ref}/uploads/{upload_id}/complete", json={})
    os.unlink(state_file)
    return version


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def resumed_upload(client: Client, ref: str, state_file: str, sha256: str, size: int, out) -> tuple[str | None, int]:
    """The upload the state file names and how much of it the server has, where it was of this same file to
    this same dataset and the server still has it; (None, 0) otherwise."""
    upload_id = None
    if os.path.exists(state_file):
        saved = json.loads(open(state_file).read())
        if saved.get("sha256") == sha256 and saved.get("ref") == ref:
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
            upload_id, offset = None, 0
    return upload_id, offset


def new_upload(client: Client, ref: str, path: str, size: int, sha256: str, unpack: bool, state_file: str) -> str:
    """Ask for an upload of the file; its id, kept in the state file for a later run to resume it."""
    created = client.call(
        "POST",
        f"/datasets/{ref}/uploads",
        json={
            "filename": os.path.basename(path),
            "size": size,
            "sha256": sha256,
            "unpack": unpack,
        },
    )
    upload_id = created["id"]
    with open(state_file, "w") as f:
        json.dump({"id": upload_id, "sha256": sha256, "ref": ref}, f)
    return upload_id


class Part:
    """`length` bytes of an open file from `offset` on, read as they are sent. requests sends a body with a
    length with its Content-Length; a generator would go chunked, which the proxy cuts into 64 KiB pieces,
    each a round of Python in the service (#34: 260 against 500 MB/s). A read gives up to READ_BLOCK
    whatever is asked, so the sending loop goes round once per block, not per 16 KiB."""

    def __init__(self, f, offset: int, length: int):
        self.f, self.left = f, length
        f.seek(offset)

    def __len__(self) -> int:
        return self.left

    def read(self, n: int = -1) -> bytes:
        block = self.f.read(min(max(n, READ_BLOCK), self.left)) if self.left > 0 else b""
        self.left -= len(block)
        return block


def send_file(client: Client, ref: str, upload_id: str, path: str, offset: int, size: int, out) -> None:
    """Send the file from `offset` on, a chunk a request, printing the progress and the rate after each."""
    started, sent_at_start = time.monotonic(), offset
    with open(path, "rb") as f:
        while offset < size:
            body = Part(f, offset, min(UPLOAD_CHUNK, size - offset))
            offset = client.call("PUT", f"/datasets/{ref}/uploads/{upload_id}", params={"offset": offset}, data=body)[
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
