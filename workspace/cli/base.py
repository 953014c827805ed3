"""What every command family of the `workspace` command shares: the user's locale, the client of the REST
API and its errors, printing a listing, and the arguments several families take.

The families (workspaces, datasets, ssh, ...) import this module and nothing else of the CLI; `main`
imports them, so no family reaches another (what two of them need lives here).
"""

from __future__ import annotations

import json
import os
import sys

import requests

from workspace.i18n import DEFAULT, TAGS, from_tag, translate


def user_locale(environ=None) -> str:
    """The locale the user's environment asks for, as a POSIX tool reads it: the first of LC_ALL,
    LC_MESSAGES and LANG that is set (else LANGUAGE's first entry); English for C, POSIX, nothing set, or a
    language we do not have."""
    env = os.environ if environ is None else environ
    value = next((env[var] for var in ("LC_ALL", "LC_MESSAGES", "LANG") if env.get(var)), None)
    if value is None:
        value = (env.get("LANGUAGE") or "").split(":")[0]
    return from_tag(value) or DEFAULT


class CLIError(Exception):
    pass


class Client:
    def __init__(self, url: str, token: str, locale: str | None = None):
        self.url = url.rstrip("/")
        self.base = self.url + "/services/workspace/api"
        self.locale = locale or user_locale()
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {token}"
        # the server's sentences (its errors) in the user's language
        self.session.headers["Accept-Language"] = TAGS[self.locale]

    def hub(self, method: str, path: str, **kwargs):
        """The hub's own REST API (start, stop, progress)."""
        return self.call(method, path, base=self.url + "/hub/api", **kwargs)

    def call(self, method: str, path: str, base: str | None = None, **kwargs):
        try:
            r = self.session.request(method, (base or self.base) + path, timeout=kwargs.pop("timeout", 600), **kwargs)
        except requests.ConnectionError:
            raise CLIError(
                translate(
                    user_locale(),
                    "Cannot reach the hub at {url}; is it running (make up) and is WORKSPACE_URL right?",
                    url=self.base,
                )
            )
        if r.status_code >= 400:
            raise server_error(r)
        return r.json() if r.content else None


def server_error(r) -> CLIError:
    """A refused answer as the error the user reads: the server's sentence (its JSON's message, already in
    the user's language), else the status."""
    try:
        message = r.json().get("message") or r.reason
    except ValueError:
        message = f"{r.status_code} {r.reason}"
    return CLIError(message)


def get_stream(client, path: str, params: dict | None = None):
    """A streamed GET of the workspace service's API; the server's sentence as a CLIError."""
    try:
        r = client.session.get(client.base + path, params=params or {}, stream=True, timeout=(30, 600))
    except requests.ConnectionError:
        raise CLIError(
            translate(
                user_locale(),
                "Cannot reach the hub at {url}; is it running and is WORKSPACE_URL right?",
                url=client.base,
            )
        )
    if r.status_code >= 400:
        error = server_error(r)
        r.close()
        raise error
    return r


def print_stream(client, path: str, params: dict | None, out) -> None:
    """Copy a streamed text answer (a log, followed or not) to `out` as it comes."""
    r = get_stream(client, path, params)
    try:
        for block in r.iter_content(chunk_size=None):
            out.buffer.write(block) if hasattr(out, "buffer") else out.write(block.decode(errors="replace"))
            out.flush()
    finally:
        r.close()


def whoami(client: Client) -> str:
    return client.hub("GET", "/user")["name"]


def follow_progress(client: Client, me: str, name: str, out=sys.stdout) -> dict | None:
    """Print a start's progress (the hub's event stream) until it is ready: its last event; None when the
    stream ends first (the start is no longer pending: a task that already ended)."""
    try:
        with client.session.get(
            f"{client.url}/hub/api/users/{me}/servers/{name}/progress", stream=True, timeout=3600
        ) as r:
            for line in r.iter_lines(decode_unicode=True):
                if not line or not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                if event.get("failed"):
                    # the hub's own words before the reason (the spawner says the reason in our language)
                    reason = (event.get("message") or "").removeprefix("Spawn failed: ")
                    raise CLIError(translate(user_locale(), "{name} did not start: {reason}", name=name, reason=reason))
                if event.get("message"):
                    print(f"[{event.get('progress', 0):>3}%] {event['message']}", file=out, flush=True)
                if event.get("ready"):
                    return event
    except requests.ConnectionError:
        raise CLIError(
            translate(user_locale(), "The connection to the hub dropped; `workspace ls` shows whether it started.")
        )
    return None


def name_and_number(what: str) -> tuple[str, int | None]:
    """NAME#N as (NAME, N); NAME alone as (NAME, None), for the caller to pick which of its executions."""
    name, _, number = what.partition("#")
    if not number:
        return name, None
    if not number.isdigit():
        raise CLIError(
            translate(
                user_locale(),
                "“{what}” is not NAME#N: the execution's number is a whole number, like thesis#3.",
                what=what,
            )
        )
    return name, int(number)


def size_text(n: int) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def print_listing(data, as_json: bool, lines, out=sys.stdout) -> None:
    if as_json:
        print(json.dumps(data, indent=2), file=out)
    else:
        for line in lines(data):
            print(line, file=out)


def add_user_option(command) -> None:
    """--user: the listings an administrator (an instructor, for their students) may read of another user."""
    command.add_argument(
        "--user",
        metavar="U",
        help=translate(user_locale(), "another user's (administrators; instructors: their students)"),
    )


def whose(args) -> dict:
    """The query parameter naming the user given with --user (none: your own)."""
    return {"user": args.user} if getattr(args, "user", None) else {}
