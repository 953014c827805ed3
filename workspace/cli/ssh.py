"""The `workspace` command's SSH part (#16): keys, connecting, ~/.ssh/config entries.

`workspace ssh NAME` and the entries of `workspace ssh-config` pin the gateway's host key as the API
(over the hub's HTTPS) reports it, in ~/.config/workspace/known_hosts: the first connection asks
nothing and trusts nothing it has not been told.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from urllib.parse import quote

from workspace.cli.base import CLIError, print_listing, user_locale, whoami
from workspace.i18n import translate
from workspace.ssh_directions import Gateway

COMMANDS = ("ssh-key", "ssh", "ssh-config")


def add_parsers(cmds) -> None:
    loc = user_locale()
    sk = cmds.add_parser("ssh-key", help=translate(loc, "your SSH public keys")).add_subparsers(
        dest="ssh_key_command", required=True
    )
    k = sk.add_parser("add", help=translate(loc, "register a public key (a .pub file, or - for standard input)"))
    k.add_argument("file", nargs="?", default=str(Path.home() / ".ssh" / "id_ed25519.pub"))
    k.add_argument(
        "--comment", help=translate(loc, "a name for it, like “lab laptop” (default: the key's own comment)")
    )
    k = sk.add_parser("ls", help=translate(loc, "your keys and their fingerprints"))
    k.add_argument("--json", action="store_true")
    k = sk.add_parser("rm", help=translate(loc, "remove a key: its number or its SHA256: fingerprint"))
    k.add_argument("key")
    c = cmds.add_parser("ssh", help=translate(loc, "connect to a workspace through the SSH gateway"))
    c.add_argument("name")
    c.add_argument("--start", action="store_true", help=translate(loc, "start it first if it is not running"))
    c.add_argument("-i", "--identity", help=translate(loc, "the private key to use (default: ssh's own choice)"))
    c.add_argument("ssh_args", nargs="*", help=translate(loc, "passed to ssh after the destination (a command to run)"))
    c = cmds.add_parser("ssh-config", help=translate(loc, "~/.ssh/config entries for every workspace of yours"))
    c.add_argument(
        "--prefix",
        default="ws-",
        help=translate(loc, "put before each workspace's name (default ws-: `ssh ws-thesis`)"),
    )
    c.add_argument(
        "-i", "--identity", help=translate(loc, "the private key the entries use (default: ssh's own choice)")
    )


def run(args, client, out=sys.stdout) -> None:
    if args.command == "ssh-key":
        ssh_key(args, client, out)
    elif args.command == "ssh-config":
        d = directions(client)
        names = [w["name"] for w in d["workspaces"]]
        print(_config(d, client, names, args.prefix, args.identity), end="", file=out)
    else:
        connect(client, args.name, args.start, args.identity, args.ssh_args)


def ssh_key_lines(keys: list[dict]) -> list[str]:
    return [f"{k['id']:<4} {k['type']:<22} {k['fingerprint']}  {k['comment']}".rstrip() for k in keys] or [
        translate(user_locale(), "no SSH keys yet: add one with `workspace ssh-key add ~/.ssh/id_ed25519.pub`")
    ]


def ssh_key(args, client, out) -> None:
    if args.ssh_key_command == "ls":
        print_listing(client.call("GET", "/ssh-keys"), args.json, ssh_key_lines, out)
    elif args.ssh_key_command == "add":
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        body = {"key": text, **({"comment": args.comment} if args.comment is not None else {})}
        k = client.call("POST", "/ssh-keys", json=body)
        print(
            translate(
                user_locale(),
                "added {key_type} key {fingerprint} {comment}",
                key_type=k["type"],
                fingerprint=k["fingerprint"],
                comment=k["comment"],
            ).rstrip(),
            file=out,
        )
    else:
        k = client.call("DELETE", f"/ssh-keys/{quote(args.key, safe='')}")["removed"]
        print(
            translate(
                user_locale(),
                "removed {key_type} key {fingerprint}; it no longer opens your workspaces",
                key_type=k["type"],
                fingerprint=k["fingerprint"],
            ),
            file=out,
        )


def directions(client) -> dict:
    d = client.call("GET", "/ssh")
    if not d.get("enabled"):
        raise CLIError(
            translate(
                user_locale(), "SSH is not offered on this platform (its administrator has not set the gateway up)."
            )
        )
    return d


def known_hosts_file(gateway: dict) -> Path:
    """~/.config/workspace/known_hosts, holding the gateway's key as the API reported it."""
    path = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "workspace" / "known_hosts"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    alias = gateway["known_hosts"].split(" ", 1)[0]
    lines = [
        line for line in (path.read_text().splitlines() if path.exists() else []) if not line.startswith(alias + " ")
    ]
    path.write_text("\n".join([*lines, gateway["known_hosts"]]) + "\n")
    return path


def _config(d: dict, client, names: list[str], prefix: str, identity: str | None) -> str:
    g = d["gateway"]
    gateway = Gateway(host=g["host"], port=g["port"], host_key=g["host_key"], fingerprint=g["fingerprint"])
    identity = str(Path(identity).expanduser().resolve()) if identity else ""
    return gateway.config(whoami(client), names, prefix, known_hosts=str(known_hosts_file(g)), identity=identity)


def connect(client, name: str, start: bool, identity: str | None, ssh_args: list[str]) -> None:
    d = directions(client)
    g = d["gateway"]
    ssh = shutil.which("ssh")
    if ssh is None:
        raise CLIError(
            translate(
                user_locale(), "ssh is not installed here: install OpenSSH's client (apt install openssh-client)."
            )
        )
    login = f"{whoami(client)}+{name}" + ("+start" if start else "")
    alias = g["known_hosts"].split(" ", 1)[0]
    command = [
        ssh,
        "-p",
        str(g["port"]),
        "-o",
        f"HostKeyAlias={alias}",
        "-o",
        f"UserKnownHostsFile={known_hosts_file(g)}",
        "-o",
        "StrictHostKeyChecking=yes",
        *(["-i", identity] if identity else []),
        f"{login}@{g['host']}",
        *ssh_args,
    ]
    os.execv(ssh, command)
