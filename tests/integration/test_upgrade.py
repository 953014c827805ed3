"""An upgrade in place (#30): the previous release, started from its own `make up`, filled with what a term
leaves behind (users, workspaces with outputs, datasets, a task, a course, running workspaces), then
`make upgrade` to this tree as an administrator runs it after `git pull`.

Afterwards every record of both databases is there with the same values, every output and dataset
version hashes as before, the users' tokens still work, the running workspaces are the same containers
(never restarted), their addresses answer through the new proxy, and when stopped they save what was
written before and after the upgrade; a workspace starts again and continues from its latest output.

The previous release is a commit of this repository: PREVIOUS_RELEASE, moved forward at each release
(after CI passed on it). Its tree comes from `git archive`, so the clone needs that commit (a shallow
clone is told to fetch it). The tree gets the files of this one the way `git pull` changes a checkout:
only the files that differ are written, and those the new release no longer has are removed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa

from workspace.setup import deploy
from workspace.store.homes import store_for

from .conftest import _running_hubs
from .hub import ROOT, Hub
from .test_datasets import upload
from .test_homes import tree_hash

# the last commit of session 16, which CI passed (stop 40): move it forward at each release
PREVIOUS_RELEASE = "23c9e06ed32a53141a8d25ad01ba6eba73a7ce65"

# tables the running workspaces add to or refresh while they run (their rows are checked to be kept, not equal)
LIVE_TABLES = {"usage_samples", "storage_usage", "transitions"}
# JupyterHub's records a term leaves (its roles and services are written anew from the configuration)
HUB_TABLES = ("users", "groups", "user_group_map", "spawners", "api_tokens", "oauth_clients")


def git(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, **kwargs)


class Deployment:
    """A checkout of its own (`tree`), run by its own Makefile; `hub` speaks to it."""

    def __init__(self, tree: Path, hub: Hub):
        self.tree, self.hub, self.said = tree, hub, ""

    def make(self, target: str, check: bool = True, timeout: float = 900) -> str:
        # the administrator's environment: the deployment's settings and nothing of this suite's (its venv,
        # an outer make's jobserver)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("WORKSPACE_", "VIRTUAL_ENV", "PYTHON", "MAKE", "MFLAGS", "PYTEST", "CI"))
        }
        env.update(self.hub.env)
        r = subprocess.run(["make", target], cwd=self.tree, env=env, capture_output=True, text=True, timeout=timeout)
        out = self.said = r.stdout + r.stderr
        if check:
            assert r.returncode == 0, f"`make {target}` failed:\n{out}\n--- hub log ---\n{self.hub.log_tail()}"
        return out

    def pull(self, files: list[str], previous: list[str]) -> int:
        """This tree's files over the checkout, as `git pull` would leave it; return how many changed."""
        changed = 0
        for name in set(previous) - set(files):
            (self.tree / name).unlink(missing_ok=True)
        for name in files:
            source, target = ROOT / name, self.tree / name
            if not source.is_file() or (target.is_file() and target.read_bytes() == source.read_bytes()):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)  # a new mtime, as a checkout gives: make sees what changed
            shutil.copymode(source, target)
            changed += 1
        return changed


@pytest.fixture(scope="module")
def previous(tmp_path_factory, image):
    if os.geteuid() != 0:
        pytest.skip("`make up` mounts the home store and starts the engine: it needs root")
    if git("cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}").returncode:
        pytest.skip(f"the previous release {PREVIOUS_RELEASE[:12]} is not in this clone: `git fetch --unshallow`")
    tree = tmp_path_factory.mktemp("upgrade") / "workspace"
    tree.mkdir()
    # the modes of a checkout (git archive's own umask is 002: group-writable files, which sshd refuses in its
    # image's config)
    archive = git("-c", "tar.umask=0022", "archive", PREVIOUS_RELEASE, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    # configurable-http-proxy as its `make up` would install it with npm: the same version, already here
    (tree / ".node").symlink_to(ROOT / ".node")
    hub = Hub(
        tree / "data",
        WORKSPACE_SUBDOMAIN_HOST="",  # one origin: the test's requests need no wildcard names
        WORKSPACE_COURSES=json.dumps({"cs101": {"instructors": ["prof"]}}),
        WORKSPACE_CULL_BROWSER_TIMEOUT="86400",  # the running workspaces have no browser open
        # its base image only: its `make up` tags `workspace-base:latest` as its own until the upgrade, and the
        # other files' hubs start that one meanwhile; the scientific one (the jobs' MPI) stays this tree's
        WORKSPACE_BUILD_IMAGES="base",
    )
    deployment = Deployment(tree, hub)
    _running_hubs.append(hub)  # its log in the report of a failure
    try:
        deployment.make("up")
        yield deployment
    finally:
        _running_hubs.remove(hub)
        deployment.make("down", check=False)
        deploy.remove_containers(hub.deployment)
        subprocess.run(["umount", "-l", str(hub.settings.store_dir)], check=False)


def fill(hub: Hub) -> dict[str, str]:
    """What a term leaves: outputs, datasets (from an output, uploaded), a course, a task, and two
    workspaces left running (one a course's, one continued from its first output). The users' tokens."""
    tokens = {name: hub.user_token(name) for name in ("prof", "ann", "dan")}
    prof = tokens["prof"]
    hub.start_workspace("prof", "prep", prof)
    hub.sh("prof", "prep", "mkdir week1 && echo 'print(42)' > week1/lab.py && head -c 3000000 /dev/urandom > w.bin")
    hub.sh("prof", "prep", "ln -s w.bin week1/weights && ln w.bin hard.bin")
    hub.stop_workspace("prof", "prep", prof)
    for name in ("handout", "weights"):
        assert hub.service_call("POST", "/datasets", prof, json={"name": name}).status_code == 201
    r = hub.service_call(
        "POST", "/datasets/prof/handout/versions", prof, json={"from_execution": {"workspace": "prep", "number": 1}}
    )
    assert r.status_code == 201, r.text
    r = upload(hub, prof, "prof/weights", "model.bin", os.urandom(500_000))
    assert r.status_code == 201, r.text
    course = {"students": "ann\nbob\n", "workspace": "lab1", "datasets": ["prof/handout"]}
    r = hub.service_call("PUT", "/courses/cs101", prof, json={**course, "starter": {"workspace": "prep", "number": 1}})
    assert r.status_code == 200, r.text
    r = hub.service_call("POST", "/workspaces/train/tasks", prof, json={"command": "echo trained > result.txt"})
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 120
    while (task := hub.service_call("GET", "/workspaces/train/executions/1", prof).json())["state"] != "stopped":
        assert time.monotonic() < deadline and task["state"] != "failed", task
        time.sleep(1)
    hub.wait_stopped("prof", "train")
    hub.start_workspace("ann", "lab1", tokens["ann"])
    assert hub.sh("ann", "lab1", "cat week1/lab.py; echo before > before.txt").strip() == "print(42)"
    hub.start_workspace("dan", "w", tokens["dan"])
    hub.sh("dan", "w", "echo first > first.txt")
    hub.stop_workspace("dan", "w", tokens["dan"])
    hub.start_workspace("dan", "w", tokens["dan"])
    hub.sh("dan", "w", "echo before > before.txt")
    return tokens


def records(url: str, tables=None) -> dict[str, dict[tuple, dict]]:
    """Every row of the database's tables (or of `tables`), by primary key; read by reflection, so that it
    reads the previous release's schema as well as this one's. The services' OAuth clients are left out:
    the hub writes them anew from its configuration at every start (a new secret each time)."""
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    meta.reflect(engine, only=tables)
    out = {}
    with engine.connect() as conn:
        for name, table in meta.tables.items():
            if tables and name not in tables:
                continue  # reflected only as what a table named refers to
            key = [c.name for c in table.primary_key.columns] or [c.name for c in table.columns]
            rows = conn.execute(sa.select(table)).mappings()
            if name == "oauth_clients":
                rows = [
                    r for r in rows if r["identifier"] != "jupyterhub" and not r["identifier"].startswith("service-")
                ]
            out[name] = {tuple(row[k] for k in key): dict(row) for row in rows}
    engine.dispose()
    return out


def head_revision() -> str:
    """This tree's newest migration of the workspace database."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(ROOT / "workspace" / "migrations"))
    return ScriptDirectory.from_config(config).get_current_head()


def lost_or_changed(before: dict, after: dict, live_executions: set, volatile=()) -> list[str]:
    """What of `before` is missing from `after`, or differs in a column both have; the executions still
    running (and the tables they write to) need only be there, and `volatile` columns may change."""
    problems = []
    for table, rows in before.items():
        for key, row in rows.items():
            new = after.get(table, {}).get(key)
            if new is None:
                problems.append(f"{table} {key}: gone")
            elif table not in LIVE_TABLES and not (table == "executions" and key[0] in live_executions):
                diff = {c: (v, new[c]) for c, v in row.items() if c in new and new[c] != v and c not in volatile}
                if diff:
                    problems.append(f"{table} {key}: {diff}")
    return problems


def outputs(hub: Hub, rows: dict) -> dict[str, str]:
    """Every saved output and dataset version the records hold, hashed as test_homes checks a home."""
    store = store_for(hub.settings.store_dir, clean=False)
    found = {k["key"]: tree_hash(store.snapshot_path(k["key"])) for k in rows["snapshots"].values() if not k["deleted"]}
    for v in rows["dataset_versions"].values():
        if not v["deleted"]:
            found[v["key"]] = tree_hash(store.dataset_path(v["key"]))
    return found


def status(hub: Hub, user: str, server: str, token: str, timeout: float = 5) -> int | str:
    """What the running workspace answers through the proxy when asked for its status: the HTTP status, or
    the request's error."""
    try:
        url = f"{hub.url}/user/{user}/{server}/api/status"
        return requests.get(url, headers={"Authorization": f"token {token}"}, timeout=timeout).status_code
    except requests.RequestException as e:
        return repr(e)


def watch(hub: Hub, user: str, server: str, token: str, during) -> tuple[int, list]:
    """Ask the running workspace for its status through the proxy, again and again, while `during()` runs:
    how many answered, and what failed."""
    answered, failures, done = [0], [], threading.Event()

    def ask() -> None:
        while not done.is_set():
            answer = status(hub, user, server, token)
            if answer == 200:
                answered[0] += 1
            else:
                failures.append(answer)
            time.sleep(0.05)

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        during()
    finally:
        done.set()
        asker.join()
    return answered[0], failures


def running_containers(hub: Hub) -> dict[str, tuple[str, str]]:
    return {c.name: (c.id, c.attrs["State"]["StartedAt"]) for c in hub.containers() if c.status == "running"}


def test_the_previous_release_upgrades_in_place_and_keeps_everything(previous):
    hub = previous.hub
    tokens = fill(hub)
    before = records(hub.settings.db_url)
    hub_before = records(hub.settings.hub_db_url, HUB_TABLES)
    hashes = outputs(hub, before)
    live = {key[0] for key, e in before["executions"].items() if e["state"] == "running"}
    containers = running_containers(hub)
    assert len(live) == 2 and len(containers) == 2 and len(hashes) >= 5, (live, containers, hashes)

    files = git("ls-files", "-co", "--exclude-standard", "-z", check=True, text=True).stdout.split("\0")
    old = git("ls-tree", "-r", "--name-only", "-z", PREVIOUS_RELEASE, check=True, text=True).stdout.split("\0")
    previous.pull([f for f in files if f], [f for f in old if f])
    said = previous.make("upgrade")
    print(said)
    assert "2 running workspace(s) kept" in said, said

    after = records(hub.settings.db_url)
    # the schema's version is the one row an upgrade moves: to this release's newest migration
    was, now = before.pop("alembic_version"), after.pop("alembic_version")
    assert list(now) == [(head_revision(),)], (was, now)
    assert not lost_or_changed(before, after, live), lost_or_changed(before, after, live)
    # the hub's own: everything kept; when each was last used may move
    hub_after = records(hub.settings.hub_db_url, HUB_TABLES)
    kept = lost_or_changed(hub_before, hub_after, set(), volatile=("last_activity", "state", "started"))
    assert not kept, kept
    assert outputs(hub, before) == hashes
    # the same containers, never restarted; reached through the new proxy with the tokens of before
    assert running_containers(hub) == containers
    for user, server in (("ann", "lab1"), ("dan", "w")):
        answer = status(hub, user, server, tokens[user], timeout=30)
        assert answer == 200, (user, answer)
        assert hub.sh(user, server, "cat before.txt; echo after > after.txt").strip() == "before"

    # again, this release onto itself: the proxy runs apart from the hub now (workspace/setup/proxy.py), so a
    # running workspace answers the whole time the hub is away
    answered, failures = watch(hub, "dan", "w", tokens["dan"], lambda: previous.make("upgrade"))
    print(previous.said)
    assert "the proxy kept their routes" in previous.said, previous.said
    assert not failures and answered > 20, (answered, failures[:5])
    assert running_containers(hub) == containers
    # a proxy that dies is started again by its keeper, and the hub gives it its routes again
    os.kill(int((hub.data_dir / "run" / "proxy.pid").read_text()), signal.SIGKILL)
    deadline = time.monotonic() + 60
    while status(hub, "dan", "w", tokens["dan"]) != 200:
        assert time.monotonic() < deadline, (hub.data_dir / "logs" / "proxy.log").read_text()[-3000:]
        time.sleep(0.5)

    # stopped now, each saves what was written before and after the upgrade
    for user, server, number in (("ann", "lab1", 1), ("dan", "w", 2)):
        hub.stop_workspace(user, server, tokens[user])
        ex = hub.service_call("GET", f"/workspaces/{server}/executions/{number}", tokens[user]).json()
        assert ex["state"] == "stopped" and ex["has_output"], ex
        for name, text in (("before.txt", "before"), ("after.txt", "after")):
            r = hub.service_call("GET", f"/workspaces/{server}/executions/{number}/files/{name}", tokens[user])
            assert r.status_code == 200 and r.text.strip() == text, (user, name, r.status_code, r.text[:200])
    # and a start continues from the latest output, on the new release
    events = hub.start_workspace("dan", "w", tokens["dan"])
    assert "continues from #2" in " ".join(e.get("message", "") for e in events), events
    assert sorted(hub.sh("dan", "w", "ls").split()) == ["after.txt", "before.txt", "first.txt"]
    hub.stop_workspace("dan", "w", tokens["dan"])
