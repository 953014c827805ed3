"""The hub's side of the store agents (agent.py): a node's home store reached over HTTP.

`AgentStore` has the home store's methods, each a call to the node's agent;
its `pull` moves a snapshot between two agents (replication.replicate calls
it), the target pulling from the source node to node, while this process only
follows the progress.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from workspace.store import btrfs_send, replication
from workspace.store.copier import Progress, Transfer
from workspace.store.homes import HomeStoreError, StoreFullError, valid_key

log = logging.getLogger("workspace.store_agent")


class AgentStore:
    """A node's home store reached through its agent: the home store's methods, over HTTP.

    `root` is the store's directory on its node: the paths it gives (`live_path`, `dataset_path`) are
    for the node's engine (bind mounts), never opened here.
    """

    kind = "btrfs"
    remote = True

    def __init__(self, url: str, root: str, token: str, timeout: float = 600):
        self.url, self.root, self.token, self.timeout = url.rstrip("/"), root, token, timeout
        self.log = log

    def __repr__(self) -> str:
        return f"AgentStore({self.url})"

    def setup(self, clean: bool = True) -> "AgentStore":
        return self  # the agent sets its store up (and cleans partials) at its own start

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.token}"}

    def call(self, op: str, **args):
        try:
            r = requests.post(
                f"{self.url}/v1/call",
                json={"op": op, "args": args},
                headers=self._headers(),
                timeout=(10, self.timeout),
            )
        except requests.RequestException as e:
            raise HomeStoreError(f"the store agent at {self.url} does not answer ({e})") from e
        return self._result(r)

    def _result(self, r: requests.Response):
        try:
            body = r.json()
        except ValueError:
            body = {"error": r.text[:300]}
        if r.status_code == 200:
            return body.get("result")
        message = f"the store agent at {self.url}: {body.get('error') or r.status_code}"
        raise (StoreFullError if body.get("full") else HomeStoreError)(message)

    # the home store's methods (workspace/store/homes.py)
    def live_path(self, key: str) -> Path:
        return Path(self.root) / "live" / valid_key(key)

    def snapshot_path(self, key: str) -> Path:
        return Path(self.root) / "snapshots" / valid_key(key)

    def dataset_path(self, key: str) -> Path:
        return Path(self.root) / "datasets" / valid_key(key)

    def restore(self, snapshot: str | None, live: str, progress: Progress | None = None) -> Transfer:
        return _transfer(self.call("restore", snapshot=snapshot, live=live))

    def save(self, live: str, snapshot: str, parent: str | None, progress: Progress | None = None) -> Transfer:
        return _transfer(self.call("save", live=live, snapshot=snapshot, parent=parent))

    def release(self, live: str) -> None:
        self.call("release", live=live)

    def delete(self, snapshot: str) -> None:
        self.call("delete", snapshot=snapshot)

    def has_live(self, key: str) -> bool:
        return bool(self.call("has_live", key=key))

    def has_snapshot(self, key: str) -> bool:
        return bool(self.call("has_snapshot", key=key))

    def has_dataset(self, key: str) -> bool:
        return bool(self.call("has_dataset", key=key))

    def measure(self, snapshot: str) -> tuple[int, int]:
        size, files = self.call("measure", snapshot=snapshot)
        return size, files

    def limit_home(self, live: str, limit: int | None) -> bool:
        return bool(self.call("limit_home", live=live, limit=limit))

    def home_usage(self, live: str) -> int:
        return int(self.call("home_usage", live=live))

    def usage(self) -> int:
        return int(self.call("usage"))

    def count_files(self, live: str, limit: int | None = None) -> int:
        return int(self.call("count_files", live=live, limit=limit))

    def filesystem(self) -> dict:
        return self.call("filesystem")

    def ids(self, area: str, key: str) -> btrfs_send.Ids | None:
        found = self.call("ids", area=area, key=key)
        return btrfs_send.Ids(**found) if found else None

    def changes(self, area: str, key: str, since: int) -> int:
        return int(self.call("changes", area=area, key=key, since=since))

    def receive(self, area: str, key: str, identity: str, source: "AgentStore", parent: str | None) -> Iterator[dict]:
        """Have this agent pull area/key from `source`'s agent; its progress lines, then the outcome."""
        body = {"area": area, "key": key, "identity": identity, "source": source.url, "parent": parent}
        try:
            with requests.post(
                f"{self.url}/v1/receive", json=body, headers=self._headers(), stream=True, timeout=(10, self.timeout)
            ) as r:
                if r.status_code != 200:
                    self._result(r)
                for line in r.iter_lines():
                    if line:
                        yield json.loads(line)
        except requests.RequestException as e:
            raise HomeStoreError(f"the store agent at {self.url} stopped answering during a receive ({e})") from e

    def pull(
        self,
        source: "AgentStore",
        area: str,
        key: str,
        parents: list[str],
        progress: Progress | None = None,
        size: int | None = None,
        interval: float = 0.5,
    ) -> replication.Replication:
        """replication.replicate between two agents: this one pulls from `source`'s, incrementally from the
        nearest of `parents` both hold as the same snapshot; this process only follows the progress."""
        mine = source.ids(area, key)
        if mine is None:
            raise HomeStoreError(f"{area[:-1]} {key} is not on {source.url}")
        if not mine.readonly:
            raise HomeStoreError(f"{key} is not read-only; only saved snapshots can be sent")
        theirs = self.ids(area, key)
        if theirs is not None:
            if btrfs_send.same_snapshot(mine, theirs):
                return replication.Replication(snapshot=key, sent=False)
            raise HomeStoreError(f"{self.url} holds another {area[:-1]} named {key} (another origin)")
        parent = replication.choose_parent(parents, lambda k: source.ids(area, k), lambda k: self.ids(area, k))
        stats = replication.Replication(snapshot=key, parent=parent)
        if parent is not None:
            stats.bytes_total = source.changes(area, key, source.ids(area, parent).generation)
        elif size is not None:
            stats.bytes_total = size
        elif area == "snapshots":
            stats.bytes_total = source.measure(key)[0]
        if progress is not None:
            progress(stats)
        return self._follow(self.receive(area, key, mine.identity, source, parent), stats, progress, interval)

    def _follow(
        self, events: Iterator[dict], stats: replication.Replication, progress: Progress | None, interval: float
    ) -> replication.Replication:
        """`stats` kept up with a receive's progress lines (told to `progress` every `interval` s), to its
        outcome."""
        last = time.monotonic()
        for event in events:
            if "error" in event:
                raise (StoreFullError if event.get("full") else HomeStoreError)(
                    f"sending {stats.snapshot} failed: {event['error']}"
                )
            stats.bytes = event.get("bytes", stats.bytes)
            stats.tick()
            if event.get("done"):
                stats.sent = event.get("sent", True)
                stats.bytes_total = stats.bytes
                if progress is not None:
                    progress(stats)
                return stats
            if progress is not None and time.monotonic() - last >= interval:
                progress(stats)
                last = time.monotonic()
        raise HomeStoreError(f"the store agent at {self.url} ended the receive of {stats.snapshot} without an outcome")


def read_token(path: str) -> str:
    """The agents' token from its file ("" where none is configured)."""
    return Path(path).read_text().strip() if path else ""


def _transfer(d: dict) -> Transfer:
    t = Transfer(files=d.get("files", 0), bytes=d.get("bytes", 0), seconds=d.get("seconds", 0.0))
    t.shared_files = d.get("shared_files", 0)
    return t
