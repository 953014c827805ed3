"""The store agent: a node's home store, served to the hub over HTTP, on separate machines.

    python -m workspace.store.agent --root /srv/workspace/store --listen 10.0.0.12:8765 \\
        --token-file /run/secrets/workspace-store-agent

On one machine the hub reaches every node's store as a mount of its own. On a
swarm of separate machines it cannot: restores, saves and snapshot sends are
btrfs operations on the node's disk. So each node runs this agent (as root:
the only privileged code of ours on a node), and the hub (the spawner, the
service, the culler) calls it through `AgentStore` (agent_store.py), which has the
home store's methods. The agent of the hub's own store (`store_agent_url`) takes
part in replication like any node's.

**Calls** (`POST /v1/call`, `{"op": ..., "args": {...}}`): an allow-list of
the store's operations (`OPS`); every argument is checked (store keys by
`homes.valid_key`, numbers as numbers), so a caller names keys, never
paths. **Snapshots between agents** (`POST /v1/receive`): the target agent
pulls `GET /v1/send` from the source agent (node to node, not through the
hub) into `btrfs receive -e --chroot` of a partial subvolume, checks that
what arrived is read-only and has the identity the hub expects, then
publishes it (replication.py explains the identity and the partial name);
it answers with JSON lines of progress (bytes so far), then the outcome.

Every request needs `Authorization: Bearer <token>`, compared in constant
time; the token is a file of the node (a Docker secret on a swarm), never an
argument. Serve it on the cluster's private network or behind TLS
(`--certfile`, `--keyfile`): the token travels with every request.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import socketserver
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

import requests

from workspace.store import btrfs_send
from workspace.store.homes import BtrfsHomeStore, HomeStoreError, StoreFullError, is_full, store_for, valid_key

log = logging.getLogger("workspace.store_agent")

AREAS = ("snapshots", "datasets")
CHUNK = 1 << 20
MAX_BODY = 64 * 1024  # a call's JSON; streams are not bodies of calls


class BadCall(ValueError):
    """A call the agent refuses: unknown operation or a malformed argument (400)."""


def _key(value) -> str:
    if not isinstance(value, str):
        raise BadCall("a store key must be a string")
    try:
        return valid_key(value)
    except (ValueError, HomeStoreError) as e:
        raise BadCall(str(e)) from None


def _key_or_none(value):
    return None if value is None else _key(value)


def _count_or_none(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadCall("a size must be a whole number of bytes")
    return value


def _count(value) -> int:
    if value is None:
        raise BadCall("a number is missing")
    return _count_or_none(value)


def _area(value) -> str:
    if value not in AREAS:
        raise BadCall(f"area must be one of {', '.join(AREAS)}")
    return value


# op: {argument: its check}
OPS: dict[str, dict[str, Callable]] = {
    "restore": {"snapshot": _key_or_none, "live": _key},
    "save": {"live": _key, "snapshot": _key, "parent": _key_or_none},
    "release": {"live": _key},
    "delete": {"snapshot": _key},
    "has_live": {"key": _key},
    "has_snapshot": {"key": _key},
    "has_dataset": {"key": _key},
    "measure": {"snapshot": _key},
    "limit_home": {"live": _key, "limit": _count_or_none},
    "home_usage": {"live": _key},
    "usage": {},
    "count_files": {"live": _key, "limit": _count_or_none},
    "filesystem": {},
    "ids": {"area": _area, "key": _key},
    "changes": {"area": _area, "key": _key, "since": _count},
}


def checked(op, args) -> tuple[str, dict]:
    """The call's operation and arguments, checked (BadCall otherwise)."""
    if not isinstance(op, str) or op not in OPS:
        raise BadCall(f"unknown operation {op!r}")
    if not isinstance(args, dict) or set(args) - set(OPS[op]):
        raise BadCall(f"{op} takes {', '.join(OPS[op]) or 'no arguments'}")
    return op, {name: check(args.get(name)) for name, check in OPS[op].items()}


class Agent:
    """The operations of one store, as the HTTP handler calls them (no HTTP here)."""

    def __init__(self, store: BtrfsHomeStore, token: str):
        if not token or len(token) < 32:
            raise SystemExit("the store agent's token must be at least 32 characters")
        self.store = store
        self.token = token
        self._receiving: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def authorized(self, header: str | None) -> bool:
        given = (header or "").removeprefix("Bearer ").encode()
        return hmac.compare_digest(given, self.token.encode())

    def call(self, op: str, args: dict):
        op, args = checked(op, args)
        store = self.store
        if op == "restore":
            return store.restore(args["snapshot"], args["live"]).as_dict()
        if op == "save":
            stats = store.save(args["live"], args["snapshot"], args["parent"])
            return {**stats.as_dict(), "shared_files": stats.shared_files}
        if op == "release":
            return store.release(args["live"])
        if op == "delete":
            return store.delete(args["snapshot"])
        if op == "has_live":
            return store.has_live(args["key"])
        if op == "has_snapshot":
            return store.has_snapshot(args["key"])
        if op == "has_dataset":
            return store.dataset_path(args["key"]).exists()
        if op == "measure":
            return list(store.measure(args["snapshot"]))
        if op == "limit_home":
            return store.limit_home(args["live"], args["limit"])
        if op == "home_usage":
            return store.home_usage(args["live"])
        if op == "usage":
            return store.usage()
        if op == "count_files":
            return store.count_files(args["live"], args["limit"])
        if op == "filesystem":
            return store.filesystem()
        path = Path(store.root) / args["area"] / args["key"]
        if op == "ids":
            if not path.exists():
                return None
            ids = btrfs_send.subvolume_ids(store, path)
            return {
                "uuid": ids.uuid,
                "received_uuid": ids.received_uuid,
                "generation": ids.generation,
                "readonly": ids.readonly,
            }
        if op == "changes":
            return store.changes(path, args["since"])[0]
        raise BadCall(op)  # unreachable: OPS and this dispatch list the same operations

    # -- streams -------------------------------------------------------------------------

    def send(self, area: str, key: str, parent: str | None, out) -> None:
        """Write `btrfs send [-p parent]` of area/key to `out`, its first command renamed to the partial name
        (the receiving agent receives into `.partial-<key>`, publishing only once complete)."""
        area, key, parent = _area(area), _key(key), _key_or_none(parent)
        base = Path(self.store.root) / area
        if not (base / key).exists() or (parent and not (base / parent).exists()):
            raise HomeStoreError(f"{area[:-1]} {key if not (base / key).exists() else parent} is not on this node")
        cmd = [self.store.btrfs, "send", *(["-p", str(base / parent)] if parent else []), str(base / key)]
        began = False
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
            try:
                head = btrfs_send.renamed_head(proc.stdout.fileno(), key)
                if head is None:
                    proc.wait()
                    err.seek(0)
                    raise HomeStoreError(f"btrfs send failed: {err.read()[-1000:].decode(errors='replace')}")
                out.begin()
                began = True
                out.write(head)
                while chunk := proc.stdout.read(CHUNK):
                    out.write(chunk)
            finally:
                proc.stdout.close()
                if proc.wait() != 0 and began:
                    err.seek(0)
                    log.error("btrfs send of %s/%s failed: %s", area, key, err.read()[-1000:].decode(errors="replace"))
                    raise ConnectionAbortedError("the send failed mid-stream")  # the receiver's stream ends short

    def receive(self, area: str, key: str, identity: str, source: str, parent: str | None) -> Iterator[dict]:
        """Pull area/key from the agent at `source` into this store; yield progress, then the outcome."""
        area, key, parent = _area(area), _key(key), _key_or_none(parent)
        if not isinstance(identity, str) or not identity:
            raise BadCall("identity must be the snapshot's UUID")
        url = urlparse(source if isinstance(source, str) else "")
        if url.scheme not in ("http", "https") or not url.netloc:
            raise BadCall("source must be the URL of another store agent")
        with self._guard:
            lock = self._receiving.setdefault(f"{area}/{key}", threading.Lock())
        with lock:  # one receive of a key at a time (replication.py)
            yield from self._receive(area, key, identity, source.rstrip("/"), parent)

    def _receive(self, area, key, identity, source, parent) -> Iterator[dict]:
        dest = Path(self.store.root) / area
        if btrfs_send.held(self.store, dest / key, identity):
            yield {"done": True, "sent": False, "bytes": 0}
            return
        sent = 0
        with btrfs_send.receiving(self.store, dest, key, identity), tempfile.TemporaryFile() as err:
            recv = subprocess.Popen(
                [self.store.btrfs, "receive", "-e", "--chroot", str(dest)],
                stdin=subprocess.PIPE,
                stdout=err,
                stderr=err,
            )
            try:
                last = time.monotonic()
                for sent in self._pull(source, area, key, parent, recv.stdin):
                    if time.monotonic() - last >= 0.5:
                        last = time.monotonic()
                        yield {"bytes": sent}
                recv.stdin.close()
                if recv.wait() != 0:
                    err.seek(0)
                    message = err.read()[-1000:].decode(errors="replace")
                    raise (StoreFullError if is_full(message) else HomeStoreError)(f"btrfs receive failed: {message}")
            except BaseException:
                if recv.poll() is None:
                    recv.kill()
                    recv.wait()
                raise
        yield {"done": True, "sent": True, "bytes": sent}

    def _pull(self, source: str, area: str, key: str, parent: str | None, into) -> Iterator[int]:
        """Copy the source agent's send of area/key into `into` (the receive's stdin), yielding the bytes
        so far after each chunk."""
        query = urlencode({"area": area, "key": key, **({"parent": parent} if parent else {})})
        sent = 0
        with requests.get(
            f"{source}/v1/send?{query}",
            headers={"Authorization": f"Bearer {self.token}"},
            stream=True,
            timeout=(10, 600),
        ) as r:
            if r.status_code != 200:
                raise HomeStoreError(f"the source agent refused the send: {r.status_code} {r.text[:300]}")
            for chunk in r.iter_content(CHUNK):
                into.write(chunk)
                sent += len(chunk)
                yield sent


class Handler(BaseHTTPRequestHandler):
    agent: Agent  # set on the class by serve()
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # requests go to the agent's log, not stderr
        log.info("%s %s", self.address_string(), fmt % args)

    def _json(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, e: BaseException) -> None:
        if isinstance(e, BadCall):
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(e)})
        elif isinstance(e, HomeStoreError):
            full = isinstance(e, StoreFullError)
            self._json(
                HTTPStatus.INSUFFICIENT_STORAGE if full else HTTPStatus.CONFLICT, {"error": str(e), "full": full}
            )
        else:
            log.exception("store agent: %s failed", self.path)
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(e).__name__}: {e}"})

    def _allowed(self) -> bool:
        if self.agent.authorized(self.headers.get("Authorization")):
            return True
        self._json(HTTPStatus.UNAUTHORIZED, {"error": "a valid agent token is needed"})
        return False

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise BadCall("the call is too large")
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            raise BadCall("the body must be JSON") from None
        if not isinstance(body, dict):
            raise BadCall("the body must be a JSON object")
        return body

    def do_POST(self):
        if not self._allowed():
            return
        try:
            body = self._body()
            if self.path == "/v1/call":
                result = self.agent.call(body.get("op"), body.get("args") or {})
                return self._json(HTTPStatus.OK, {"result": result})
            if self.path == "/v1/receive":
                events = self.agent.receive(
                    body.get("area"), body.get("key"), body.get("identity"), body.get("source"), body.get("parent")
                )
                first = next(events)  # argument errors surface before the stream's headers
                return self._stream_lines(first, events)
            self._json(HTTPStatus.NOT_FOUND, {"error": "no such call"})
        except Exception as e:
            self._error(e)

    def _stream_lines(self, first: dict, events: Iterator[dict]) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Connection", "close")  # the stream's end is the connection's
        self.end_headers()
        self.close_connection = True
        event = first
        while True:
            self.wfile.write(json.dumps(event).encode() + b"\n")
            self.wfile.flush()
            try:
                event = next(events)
            except StopIteration:
                return
            except Exception as e:  # the outcome, in the stream: the status line is gone
                full = isinstance(e, StoreFullError)
                if not isinstance(e, HomeStoreError):
                    log.exception("store agent: receive failed")
                self.wfile.write(json.dumps({"error": str(e), "full": full}).encode() + b"\n")
                return

    def do_GET(self):
        if not self._allowed():
            return
        url = urlparse(self.path)
        if url.path != "/v1/send":
            return self._json(HTTPStatus.NOT_FOUND, {"error": "no such call"})
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        handler = self

        class Out:
            def begin(self):
                handler.send_response(HTTPStatus.OK)
                handler.send_header("Content-Type", "application/octet-stream")
                handler.send_header("Connection", "close")
                handler.end_headers()
                handler.close_connection = True

            def write(self, data):
                handler.wfile.write(data)

        try:
            self.agent.send(q.get("area"), q.get("key"), q.get("parent"), Out())
        except ConnectionAbortedError:
            self.close_connection = True
        except Exception as e:
            self._error(e)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self):
        # http.server looks up the address's fully qualified name here: a DNS query that waits out its
        # timeouts (10 s) on a node without a resolver. The name is not needed.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def serve(agent: Agent, host: str, port: int, certfile: str | None = None, keyfile: str | None = None):
    """The agent's HTTP server (not yet serving: call serve_forever())."""
    handler = type("BoundHandler", (Handler,), {"agent": agent})
    server = Server((host, port), handler)
    if certfile:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile, keyfile)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    return server


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="workspace-store-agent", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="the node's home store (a btrfs filesystem)")
    parser.add_argument("--listen", default="127.0.0.1:8765", help="ADDRESS:PORT to serve on")
    parser.add_argument("--token-file", required=True, help="a file holding the agents' shared token")
    parser.add_argument("--certfile", help="TLS certificate (serve HTTPS)")
    parser.add_argument("--keyfile", help="TLS key")
    parser.add_argument(
        "--id-offset",
        type=int,
        default=0,
        help="the host uid of a container's root on this node (its engine's userns-remap range; 0: none)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s store-agent %(levelname)s %(message)s")
    token = Path(args.token_file).read_text().strip()
    # this node's saves are this agent's: clean here
    store = store_for(args.root, clean=True, backend="btrfs", id_offset=args.id_offset)
    host, _, port = args.listen.rpartition(":")
    server = serve(Agent(store, token), host, int(port), args.certfile, args.keyfile)
    log.info("store agent for %s on %s", args.root, args.listen)
    server.serve_forever()


if __name__ == "__main__":
    main()
