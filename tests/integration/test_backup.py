"""Backups and restore (workspace-admin backup/restore, #30) on real loop-mounted btrfs filesystems, real databases
and the records' own APIs, and once through a real hub.

A deployment of 20 users' saved outputs is backed up, changed by about 1 %, backed up again (which writes about
1 %), wiped and restored: every output's hash (every path's type, mode, owner, time and bytes, links and hard
links) is equal. A backup taken while saves go on is one consistent moment. Bad input (DEST inside the data
directory, a restore onto a deployment, a backup changed, cut short or with a rewritten manifest, a missing or
wrong key) is one sentence and changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from workspace import dataset_versions, datasets, lifecycle
from workspace.caller import Caller
from workspace.db import Database
from workspace.executions import Execution, Snapshot
from workspace.outputs.saved import delete_output
from workspace.settings import Settings
from workspace.setup import backup, backup_db, restore
from workspace.setup.backup_sets import MANIFEST
from workspace.store.homes import store_for

from .hub import Hub
from .test_homes import build_home, tree_hash
from .test_replication import node  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
MB = 1_000_000


@pytest.fixture
def mounts(node):  # noqa: F811
    """mounts(name, size) -> a store's directory on a btrfs filesystem of its own (a machine's disk)."""
    return lambda name, size="1G": Path(node(name, size).root)


def write(path: Path, size: int) -> None:
    path.write_bytes(os.urandom(size))
    os.chown(path, 1000, 1000)


class Site:
    """A deployment's data as a hub leaves it, made with the real store, database and records APIs."""

    def __init__(self, data_dir: Path, store_dir: Path):
        self.env = {"WORKSPACE_DATA_DIR": str(data_dir), "WORKSPACE_STORE_DIR": str(store_dir)}
        self.settings = Settings.from_env(self.env)

    def create(self) -> "Site":
        s = self.settings
        s.data_dir.mkdir(mode=0o700, parents=True)
        s.generate_missing_secrets()
        (s.data_dir / "jupyterhub_cookie_secret").write_bytes(os.urandom(32).hex().encode())
        (s.data_dir / "jupyterhub_config.d").mkdir()
        (s.data_dir / "jupyterhub_config.d" / "site.py").write_text("c.Authenticator.admin_users = {'it'}\n")
        (s.data_dir / "execution-logs" / "ada").mkdir(parents=True)
        (s.data_dir / "execution-logs" / "ada" / "1.log").write_text("epoch 1 loss 0.3\n")
        with backup_db.sqlite3.connect(s.data_dir / "jupyterhub.sqlite") as hub_db:
            hub_db.execute("CREATE TABLE users (name TEXT)")
            hub_db.executemany("INSERT INTO users VALUES (?)", [(f"u{n}",) for n in range(20)])
        Path(s.store_dir).mkdir(parents=True, exist_ok=True)
        return self.open()

    def open(self) -> "Site":
        self.db = Database(self.settings.db_url, key_file=self.settings.secret_key_file)
        self.store = store_for(self.settings.store_dir)
        return self

    def start(self, owner: str, change=None, name: str = "thesis") -> lifecycle.StartPlan:
        plan = lifecycle.begin(self.db, owner, name, "latest", None)
        lifecycle.restore(self.db, self.store, plan, None)
        if change is not None:
            change(self.store.live_path(plan.live_key))
        lifecycle.transition(self.db, plan.execution_id, "running")
        return plan

    def run(self, owner: str, change, name: str = "thesis") -> str:
        """One execution of owner's workspace: restore the latest output, change the home, save; the output."""
        plan = self.start(owner, change, name)
        assert lifecycle.save(self.db, self.store, plan.execution_id, "user", None) == "stopped"
        lifecycle.record_snapshot_size(self.db, self.store, plan.execution_id)
        return lifecycle.snapshot_key_of(self.db, plan.execution_id)

    def outputs(self) -> dict[str, dict]:
        """Every output and dataset version the records hold (not deleted), hashed as test_homes does."""
        with self.db.session() as s:
            keys = [k for k, d in s.execute(select(Snapshot.key, Snapshot.deleted)) if d is None]
            versions = [v.key for v in s.scalars(select(datasets.DatasetVersion)) if v.deleted is None]
        found = {k: tree_hash(self.store.snapshot_path(k)) for k in keys}
        found.update({k: tree_hash(self.store.dataset_path(k)) for k in versions})
        return found

    def wipe(self) -> None:
        """The machine lost: every output, dataset version and file of the data directory gone."""
        self.db.engine.dispose()
        for area in ("snapshots", "datasets"):
            for path in (Path(self.store.root) / area).iterdir():
                self.store._remove(path)
        shutil.rmtree(self.store.root)
        shutil.rmtree(self.settings.data_dir)

    def admin(self, *args: str, **env) -> subprocess.CompletedProcess:
        """`workspace-admin ARGS` as an operator runs it on this deployment."""
        environ = {k: v for k, v in os.environ.items() if not k.startswith("WORKSPACE_")}
        environ.update(self.env, PYTHONPATH=str(ROOT), **env)
        return subprocess.run(
            [sys.executable, "-m", "workspace.setup.admin", *map(str, args)],
            env=environ,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )


def twenty_users(site: Site) -> None:
    """20 users, each with two executions (the second continues the first); about 1 MB each, a dataset."""
    for n in range(20):

        def first(home: Path, n=n) -> None:
            if n == 0:
                build_home(home)  # links out of the home, hard links, a fifo, odd names, modes, times
            write(home / "model.bin", MB)

        site.run(f"u{n}", first)
        site.run(f"u{n}", lambda home: write(home / "notes.txt", 1000))
    host = site.settings.data_dir.parent / "mnist"
    (host / "train").mkdir(parents=True)
    write(host / "train" / "a.bin", 300_000)
    datasets.create(site.db, "u0", "mnist", "", "private")
    admin = Caller("root", admin=True)
    dataset_versions.add(site.db, site.store, datasets.DatasetRules(), "u0", "mnist", {"from_path": str(host)}, admin)


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in [root, *root.rglob("*")]}


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def refused(result: subprocess.CompletedProcess, words: str) -> str:
    """The one sentence a refusal is: exit status 1, `error: ...` naming `words`, no traceback."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and words in result.stderr, result.stderr
    return result.stderr


# -- the round trip -------------------------------------------------------------------------------------


def test_twenty_users_back_up_incrementally_then_wipe_and_restore_with_every_output_equal(mounts, tmp_path):
    site = Site(tmp_path / "data", mounts("disk", "2G")).create()
    twenty_users(site)
    dest, keys = tmp_path / "backups", tmp_path / "keys"

    out = ok(site.admin("backup", dest, "--key-dest", keys))
    assert "40 saved outputs and 1 dataset versions (41 sent, 0 already in the backup)" in out, out
    (first,) = backup.sets(dest)
    full = first[1].stats["sent_bytes"]
    assert full > 20 * MB

    # about 1 %: each user continues with a change of 1 % of their home
    for n in range(20):
        site.run(f"u{n}", lambda home: write(home / "results.csv", 10_000))
    out = ok(site.admin("backup", dest, "--key-dest", keys))
    second = backup.sets(dest)[-1][1]
    assert second.stats["sent"] == 20 and second.stats["reused"] == 41, out
    ratio = second.stats["sent_bytes"] / full
    incremental = second.stats["sent_bytes"]
    print(f"backup_delta_ratio={ratio:.4f} (full {full / MB:.1f} MB, incremental {incremental / MB:.2f} MB)")
    assert 0.005 < ratio < 0.02, ratio
    streams = [i for i in second.items if i.since == second.name]
    assert all(i.parent is not None for i in streams)  # each a delta from the output it continued

    # nothing in the backups, nor the key apart, is another account's to read
    assert stat.S_IMODE(dest.stat().st_mode) == 0o700 and stat.S_IMODE(keys.stat().st_mode) == 0o700
    for path in [*dest.glob("*/db/*"), *dest.glob("*/secrets/*.env"), *dest.glob("pool/*/*.stream"), *keys.iterdir()]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert (
        not list(dest.rglob("*.key"))
        and "WORKSPACE_ADMIN_PASSWORD" not in (dest / second.name / "config/environment.env").read_text()
    )

    before, secrets = site.outputs(), site.settings.secrets_file.read_bytes()
    assert len(before) == 61
    site.wipe()
    (key,) = keys.iterdir()
    out = ok(site.admin("restore", dest, "--key", key))
    assert "restored 61 outputs" in out, out

    # the data directory is the hub's alone again (what a restore wrote, before this test opens anything)
    assert stat.S_IMODE(site.settings.data_dir.stat().st_mode) == 0o700
    assert {p: m for p, m in modes(site.settings.data_dir).items() if m & 0o077 and not p.startswith("store")} == {}
    site.open()
    assert site.outputs() == before
    assert site.settings.secrets_file.read_bytes() == secrets
    assert (site.settings.data_dir / "jupyterhub_config.d" / "site.py").read_text().startswith("c.Authenticator")
    assert (site.settings.data_dir / "execution-logs" / "ada" / "1.log").read_text() == "epoch 1 loss 0.3\n"
    with site.db.session() as s:  # the sealed secrets open with the restored key
        assert all(ex.report_key for ex in s.scalars(select(Execution)))
    # the restored deployment goes on: a next start continues from the restored output
    assert (site.store.snapshot_path(site.run("u3", lambda home: None)) / "results.csv").stat().st_size == 10_000


def test_pruning_keeps_every_backup_that_is_left_restorable(mounts, tmp_path):
    site = Site(tmp_path / "data", mounts("disk")).create()
    dest = tmp_path / "backups"
    first = site.run("ada", lambda home: write(home / "model.bin", 2 * MB))
    site.run("ada", lambda home: write(home / "a.txt", 1000))
    ok(site.admin("backup", dest))
    # the first output is deleted: the second's stream is a delta from it, so the pool keeps it
    delete_output(site.db, site.store, "ada", "thesis", 1)
    ok(site.admin("backup", dest))
    site.run("ada", lambda home: write(home / "b.txt", 1000))
    out = ok(site.admin("backup", dest, "--keep", "1"))
    assert "pruned 2 old backup(s)" in out, out
    (only,) = backup.sets(dest)
    assert [i.key for i in only[1].items if not i.kept] == [first]
    assert (dest / "pool" / "snapshots" / f"{first}.stream").is_file()

    before = site.outputs()
    key = tmp_path / "key-apart"  # kept apart by hand: as good as one --key-dest wrote
    shutil.copy(site.settings.secret_key_file, key)
    site.wipe()
    refused(site.admin("restore", dest), "give its copy with --key FILE")
    assert not site.settings.data_dir.exists()
    ok(site.admin("restore", dest, "--key", key))
    assert site.open().outputs() == before
    assert not site.store.has_snapshot(first)  # received as the second's parent, then deleted again


def test_a_copying_store_backs_up_as_plain_files_and_restores_equal(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the store runs as root (it chowns homes)")
    site = Site(tmp_path / "data", tmp_path / "data" / "store").create()
    assert site.store.kind == "copy"
    for n in range(3):
        site.run(f"u{n}", lambda home: (build_home(home), write(home / "model.bin", MB)))
        site.run(f"u{n}", lambda home: write(home / "b.txt", 1000))
    dest, keys = tmp_path / "backups", tmp_path / "keys"
    ok(site.admin("backup", dest, "--key-dest", keys))
    ((_, m),) = backup.sets(dest)
    assert {i.form for i in m.items} == {"tree"}
    # the second output's copy shares the first's unchanged files (hard links in the pool)
    pool = dest / "pool" / "snapshots"
    later = [i for i in m.items if i.parent]
    assert len(later) == 3 and all((pool / i.key / "model.bin").stat().st_nlink == 2 for i in later)
    before = site.outputs()
    site.wipe()
    ok(site.admin("restore", dest / m.name, "--key", next(keys.iterdir())))  # SRC: one backup's directory
    assert site.open().outputs() == before


# -- consistency while the deployment runs ----------------------------------------------------------------


def test_a_backup_taken_while_workspaces_run_and_save_is_one_consistent_moment(mounts, tmp_path, monkeypatch):
    site = Site(tmp_path / "data", mounts("disk")).create()
    for n in range(6):
        site.run(f"u{n}", lambda home: write(home / "model.bin", 300_000))
    running = site.start("u0", lambda home: write(home / "live.bin", 1000))  # its home is live: not an output yet
    doomed = lifecycle.snapshot_key_of(site.db, 3)

    saves, stop = [], threading.Event()

    def keep_saving() -> None:  # a workspace that saves again and again while the backup runs
        while not stop.is_set():
            saves.append(site.run("busy", lambda home: write(home / f"{len(saves)}.bin", 200_000)))

    real_copy = backup_db.copy

    def copy_then_delete(url, target, name, records=False):
        found = real_copy(url, target, name, records)
        if name == "workspace":  # after the backup's moment, its owner deletes an output (its tree goes at once)
            delete_output(site.db, site.store, "u2", "thesis", 1)
            assert not site.store.has_snapshot(doomed)
        return found

    monkeypatch.setattr(backup_db, "copy", copy_then_delete)
    saver = threading.Thread(target=keep_saving)
    saver.start()
    try:
        while len(saves) < 3:  # saves are going on
            threading.Event().wait(0.05)
        manifest = backup.backup(site.settings, tmp_path / "backups", tmp_path / "keys")
        after = len(saves)
        while len(saves) <= after:  # one more save, begun after the backup's moment
            threading.Event().wait(0.05)
    finally:
        stop.set()
        saver.join()
    assert manifest.missing == [{"area": "snapshots", "key": doomed, "reason": manifest.missing[0]["reason"]}]
    assert "deleted" in manifest.missing[0]["reason"]
    source = {k: tree_hash(site.store.snapshot_path(k)) for k in site.outputs()}  # the doomed one is gone

    target = Site(tmp_path / "new", mounts("new-disk"))
    restore.restore(target.settings, tmp_path / "backups", key=next((tmp_path / "keys").iterdir()))
    target.open()
    # every output the restored records hold is there and equal, and the store holds nothing else
    restored = target.outputs()
    on_disk = {p.name for p in (Path(target.store.root) / "snapshots").iterdir()}
    assert set(restored) == on_disk and restored == {k: source[k] for k in restored}
    assert doomed not in restored and len(restored) >= 5 + 3  # six outputs less the deleted, saves before the copy
    assert saves[after] not in restored  # saved after the backup's moment: the next backup's
    with target.db.session() as s:
        assert s.scalar(select(Snapshot.deleted).where(Snapshot.key == doomed)) is not None
        live = s.get(Execution, running.execution_id)
        assert live.state == "stopped" and live.stop_reason == "lost" and manifest.name in live.error
        assert live.snapshot is None
    # the restored deployment's next start continues from the last output it has
    key = target.run("u0", lambda home: None)
    assert (target.store.snapshot_path(key) / "model.bin").stat().st_size == 300_000


# -- bad input: one sentence, nothing changed -----------------------------------------------------------


@pytest.fixture
def small(mounts, tmp_path):
    """A deployment of three users (the second output of each a delta) backed up with its key apart."""
    site = Site(tmp_path / "data", mounts("disk")).create()
    for n in range(3):
        site.run(f"u{n}", lambda home: write(home / "model.bin", 500_000))
        site.run(f"u{n}", lambda home: write(home / "notes.txt", 1000))
    ok(site.admin("backup", tmp_path / "backups", "--key-dest", tmp_path / "keys"))
    return site


def state(root: Path) -> dict:
    """Every path under `root` with its type, mode and content hash: what 'nothing changed' compares."""
    if not root.exists():
        return {}
    out = {}
    for p in [root, *root.rglob("*")]:
        st = p.lstat()
        data = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
        out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), data)
    return out


def _streams(dest: Path) -> list[Path]:
    return sorted((dest / "pool" / "snapshots").glob("*.stream"), key=lambda p: p.stat().st_size)


def _set_dir(dest: Path) -> Path:
    (set_dir,) = [p for p in dest.iterdir() if (p / MANIFEST).is_file()]
    return set_dir


def _edit_manifest(dest: Path, change) -> None:
    data = json.loads((_set_dir(dest) / MANIFEST).read_text())
    change(data)
    (_set_dir(dest) / MANIFEST).write_text(json.dumps(data))


def _link_out(dest: Path) -> None:
    stream = _streams(dest)[0]
    stream.unlink()
    os.symlink("/etc/hostname", stream)


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _swap_streams(dest: Path) -> None:
    """An attacker who rewrites the manifest to match: two outputs' streams exchanged, their checksums too."""
    a, b = [p for p in _streams(dest)][-2:]
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)

    def fix(data):
        for item in data["items"]:
            path = dest / f"pool/snapshots/{item['key']}.stream"
            item["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()

    _edit_manifest(dest, fix)


TAMPERING = {
    "a stream changed": (lambda d: _flip(_streams(d)[-1]), "does not match its manifest"),
    "a stream cut short": (lambda d: os.truncate(_streams(d)[-1], 1000), "does not match its manifest"),
    "a stream removed": (lambda d: _streams(d)[0].unlink(), "is missing"),
    "a stream made a link to a host file": (_link_out, "is missing"),
    "two streams swapped, the manifest rewritten to match": (_swap_streams, "is not the stream of"),
    "a key that leads out of the store": (
        lambda d: _edit_manifest(d, lambda data: data["items"][0].update(key="../../etc")),
        "manifest.json is damaged",
    ),
    "a secret written to a path out of the data directory": (
        lambda d: _edit_manifest(d, lambda data: data["files"][0].update(to="../../root/.ssh/authorized_keys")),
        "is not inside the backup",
    ),
    "a secret changed": (
        lambda d: (_set_dir(d) / "secrets/secrets.env").write_text("WORKSPACE_ADMIN_PASSWORD=x\n"),
        "secrets.env does not match its manifest",
    ),
    "the database cut short": (
        lambda d: os.truncate(_set_dir(d) / "db/workspace.sqlite", 4096),
        "workspace.sqlite does not match its manifest",
    ),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_a_backup_changed_or_cut_short_is_refused_before_anything_is_written(small, mounts, tmp_path, case):
    tamper, words = TAMPERING[case]
    dest = tmp_path / "backups"
    tamper(dest)
    target = Site(tmp_path / "new", mounts("new-disk"))
    before = state(target.settings.data_dir), state(Path(target.settings.store_dir))
    sentence = refused(target.admin("restore", dest, "--key", next((tmp_path / "keys").iterdir())), words)
    assert "restore from another backup" in sentence or "damaged" in sentence, sentence
    assert (state(target.settings.data_dir), state(Path(target.settings.store_dir))) == before


def test_a_backup_goes_only_where_it_may_and_a_restore_never_onto_a_deployment(small, tmp_path):
    site, data, store = small, small.settings.data_dir, Path(small.settings.store_dir)
    before = state(data), {p.name for p in (store / "snapshots").iterdir()}
    stranger = tmp_path / "photos"
    stranger.mkdir()
    (stranger / "cat.jpg").write_bytes(b"meow")
    for dest, words in (
        (data / "backups", "inside the data directory"),
        (store / "backups", "inside the home store"),
        (data.parent, "contains the data directory"),
        (stranger, "holds other files and is not a backup"),
        (data / "secrets.env", "inside the data directory"),
    ):
        refused(site.admin("backup", dest), words)
    assert not (data / "backups").exists() and not (store / "backups").exists()
    assert state(stranger) == {".": state(stranger)["."], "cat.jpg": state(stranger)["cat.jpg"]}
    refused(site.admin("backup", tmp_path / "elsewhere", "--key-dest", tmp_path / "elsewhere" / "k"), "apart from")
    refused(site.admin("backup", tmp_path / "elsewhere", "--keep", "0"), "at least one")

    with backup.locked(tmp_path / "backups"):  # a backup into the same DEST is running
        refused(site.admin("backup", tmp_path / "backups"), "Another backup")

    key = next((tmp_path / "keys").iterdir())
    refused(site.admin("restore", tmp_path / "backups", "--key", key), "is not empty")  # the deployment itself
    refused(site.admin("restore", tmp_path / "photos", "--key", key), "is not a backup")
    wrong = tmp_path / "wrong.key"
    wrong.write_text("ZmFrZWtleWZha2VrZXlmYWtla2V5ZmFrZWtleWZha2U=\n")
    refused(site.admin("restore", tmp_path / "backups", "--key", wrong), "is not the key")
    assert (state(data), {p.name for p in (store / "snapshots").iterdir()}) == before


# -- through a real hub ------------------------------------------------------------------------------------


def test_a_running_hub_s_deployment_backed_up_wiped_and_restored_starts_where_it_was(start_hub, tmp_path):
    hub = start_hub()
    token = hub.user_token("ada")
    hub.start_workspace("ada", "thesis", token)
    hub.sh(
        "ada", "thesis", "echo saved > saved.txt && head -c 200000 /dev/urandom > data.bin && sha256sum data.bin > sum"
    )
    hub.stop_workspace("ada", "thesis", token)
    hub.start_workspace("ada", "thesis", token)  # running while the backup is taken
    hub.sh("ada", "thesis", "echo live > live.txt")
    site = Site(hub.settings.data_dir, Path(hub.settings.store_dir))
    site.env = hub.env
    dest, keys = tmp_path / "backups", tmp_path / "keys"
    out = ok(site.admin("backup", dest, "--key-dest", keys))
    assert "1 saved outputs" in out, out
    hub.stop_workspace("ada", "thesis", token)  # its output is saved after the backup: not in it

    hub.stop()  # the machine is lost
    # every service ended on the hub's signals (the SSH gateway once ignored SIGINT and held the stop 30 s)
    assert not hub.killed, hub.log_tail()
    site.open().wipe()
    out = ok(site.admin("restore", dest, "--key", next(keys.iterdir())))
    assert "1 executions that were running ended" in out, out

    again = Hub(hub.data_dir, store_dir=Path(hub.settings.store_dir))
    try:
        again.start()  # as `make up` starts the restored deployment
        token = again.user_token("ada")  # the user is in the restored JupyterHub database
        events = again.start_workspace("ada", "thesis", token)
        assert "Execution #3 continues from #1" in "\n".join(e.get("message", "") for e in events), events
        out = again.sh("ada", "thesis", "cat saved.txt && sha256sum -c sum && ls")
        assert out.startswith("saved\n") and "data.bin: OK" in out and "live.txt" not in out, out
        again.stop_workspace("ada", "thesis", token)
        states = [
            (e["number"], e["state"], e["stop_reason"], e["has_output"]) for e in again.executions("ada", "thesis")
        ]
        assert states == [(1, "stopped", "user", True), (2, "stopped", "lost", False), (3, "stopped", "user", True)]
    finally:
        again.stop()


def test_every_backs_up_at_once_then_on_its_schedule_keeping_the_newest(small, tmp_path):
    dest = tmp_path / "backups"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("WORKSPACE_")}
    environ.update(small.env, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "workspace.setup.admin", "backup", str(dest), "--every", "1m", "--keep", "1"]
    loop = subprocess.Popen(cmd, env=environ, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        # its first backup made, the one before pruned (names only: the loop may be removing one meanwhile)
        while sorted(p.name[:4] for p in dest.glob("0*") if (p / MANIFEST).exists()) != ["0002"]:
            assert loop.poll() is None and time.monotonic() < deadline, loop.stdout.read() if loop.poll() else ""
            time.sleep(0.2)
    finally:
        loop.terminate()
        out = loop.communicate(timeout=30)[0]
    assert "every 60 s" in out and "pruned 1 old backup(s)" in out, out
