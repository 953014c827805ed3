"""Secrets sealed at rest (#28, workspace/vault.py): the key file, the sealing, and the database's secret columns on
SQLite and on PostgreSQL, including rows written in plain text before migration 0019."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import text

from workspace import ssh_identities, vault, webhooks
from workspace.db import MIGRATIONS, Database, make_engine
from workspace.executions import get_or_create_workspace, new_execution

# (table, secret column) of every secret the database keeps
SECRET_COLUMNS = (
    ("workspace_host_keys", "private_key"),
    ("owner_key_pairs", "private_key"),
    ("webhooks", "secret"),
    ("executions", "report_key"),
)


def test_the_key_file_is_made_once_root_s_alone_and_the_same_for_processes_starting_together(tmp_path):
    path = tmp_path / "secrets" / "workspace.key"
    with ThreadPoolExecutor(8) as pool:
        vaults = list(pool.map(lambda _: vault.Vault.from_file(path), range(8)))
    sealed = vaults[0].seal("a private key")
    assert all(v.open(sealed) == "a private key" for v in vaults)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert os.listdir(path.parent) == ["workspace.key"]  # no temporary file left


def test_a_sealed_value_hides_its_plain_text_differs_each_time_and_opens_only_with_its_key(tmp_path):
    v = vault.Vault.from_file(tmp_path / "key")
    one, two = v.seal("s3cret-value"), v.seal("s3cret-value")
    assert one != two and "s3cret" not in one and vault.is_sealed(one)
    assert v.open(one) == v.open(two) == "s3cret-value"
    with pytest.raises(vault.VaultError, match="does not open"):
        vault.Vault.from_file(tmp_path / "another key").open(one)
    with pytest.raises(vault.VaultError, match="not sealed"):
        v.open("s3cret-value")  # a plain value is refused, never taken as it is


def test_a_new_key_first_in_the_file_seals_and_the_old_one_still_opens(tmp_path):
    path = tmp_path / "key"
    old = vault.Vault.from_file(path)
    sealed = old.seal("kept")
    path.write_text(vault.new_key() + "\n" + path.read_text())
    rotated = vault.Vault.from_file(path)
    assert rotated.open(sealed) == "kept"
    with pytest.raises(vault.VaultError):
        old.open(rotated.seal("new"))


def _stored(db: Database) -> dict:
    """What the database itself holds in each secret column (no vault between)."""
    with db.engine.connect() as conn:
        return {
            (table, column): [row[0] for row in conn.execute(text(f"SELECT {column} FROM {table}"))]
            for table, column in SECRET_COLUMNS
        }


def test_the_database_keeps_every_secret_sealed_and_the_models_read_them_plain(database):
    with database.session() as s:
        ws = get_or_create_workspace(s, "ada", "thesis")
        host = ssh_identities.host_key(s, ws).private_key
        pair = ssh_identities.owner_pair(s, "ada").private_key
        report = new_execution(s, ws, None, None).report_key
    hook = webhooks.set_url(database, "ada", "https://example.org/hook")["secret"]
    stored = _stored(database)
    for plain, where in (
        (host, ("workspace_host_keys", "private_key")),
        (pair, ("owner_key_pairs", "private_key")),
        (hook, ("webhooks", "secret")),
        (report, ("executions", "report_key")),
    ):
        (value,) = stored[where]
        assert vault.is_sealed(value) and plain not in value, where
    assert "PRIVATE KEY" not in repr(stored)
    with database.session() as s:  # read back through the models: the plain values
        ws = get_or_create_workspace(s, "ada", "thesis")
        assert ssh_identities.host_key(s, ws).private_key == host
        assert ssh_identities.public_of(ssh_identities.owner_pair(s, "ada").private_key)
        assert ws.executions[0].report_key == report
    assert webhooks.of_owners(database, {"ada"})["ada"][1] == hook


def test_a_database_opened_without_the_key_refuses_its_secrets(database):
    with database.session() as s:
        ssh_identities.owner_pair(s, "ada")
    keyless = Database(database.url, migrate=False)
    try:
        with pytest.raises(vault.VaultError, match="without the key"), keyless.session() as s:
            ssh_identities.owner_pair(s, "ada")
    finally:
        keyless.engine.dispose()


def test_migration_0019_seals_the_secrets_written_in_plain_text_before(database_url, tmp_path):
    engine = make_engine(database_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:  # a database as a deployment before #28 left it
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0017")
        conn.execute(
            text("INSERT INTO workspaces (id, owner, name, created) VALUES (1, 'ada', 'thesis', '2026-01-01')")
        )
        conn.execute(
            text(
                "INSERT INTO workspace_host_keys (workspace_id, private_key, public_key, fingerprint, created) "
                "VALUES (1, 'PLAIN-HOST-KEY', 'ssh-ed25519 AAAA', 'SHA256:x', '2026-01-01')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO owner_key_pairs (id, owner, private_key, public_key, fingerprint, created) "
                "VALUES (1, 'ada', 'PLAIN-OWNER-KEY', 'ssh-ed25519 AAAA', 'SHA256:y', '2026-01-01')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO webhooks (owner, url, secret, updated) "
                "VALUES ('ada', 'https://example.org/', 'PLAIN-WEBHOOK-SECRET', '2026-01-01')"
            )
        )
    engine.dispose()
    db = Database(database_url, key_file=tmp_path / "key")  # the upgrade seals them
    try:
        stored = _stored(db)
        assert not any("PLAIN" in value for values in stored.values() for value in values), stored
        assert all(vault.is_sealed(v) for values in stored.values() for v in values)
        with db.session() as s:
            ws = get_or_create_workspace(s, "ada", "thesis")
            assert ssh_identities.host_key(s, ws).private_key == "PLAIN-HOST-KEY"
            assert ssh_identities.owner_pair(s, "ada").private_key == "PLAIN-OWNER-KEY"
        assert webhooks.of_owners(db, {"ada"})["ada"][1] == "PLAIN-WEBHOOK-SECRET"
        long_secret = "x" * 64  # a secret of the old column's whole width, sealed: text, not 64 characters
        with db.session() as s:
            s.get(webhooks.Webhook, "ada").secret = long_secret
        assert webhooks.of_owners(db, {"ada"})["ada"][1] == long_secret
    finally:
        db.engine.dispose()
