import stat

from workspace.settings import SECRET_NAMES, Settings


def test_defaults(tmp_path):
    s = Settings.from_env({}, base=tmp_path)
    assert s.data_dir == tmp_path / "data"
    assert s.url == "http://127.0.0.1:8000"
    assert (s.port, s.hub_port, s.proxy_api_port) == (8000, 8081, 8001)
    assert s.admin_user == "admin"
    assert s.image == "workspace-base:latest"
    assert s.db_url == f"sqlite:///{tmp_path / 'data' / 'workspace.sqlite'}"
    assert s.hub_db_url == f"sqlite:///{tmp_path / 'data' / 'jupyterhub.sqlite'}"


def test_both_databases_can_be_postgresql(tmp_path):
    env = {
        "WORKSPACE_DB_URL": "postgresql+psycopg://workspace@db/workspace",
        "WORKSPACE_HUB_DB_URL": "postgresql+psycopg://hub@db/jupyterhub",
    }
    s = Settings.from_env(env, base=tmp_path)
    assert (s.db_url, s.hub_db_url) == (env["WORKSPACE_DB_URL"], env["WORKSPACE_HUB_DB_URL"])


def test_relative_data_dir_is_taken_from_the_project(tmp_path):
    s = Settings.from_env({"WORKSPACE_DATA_DIR": "state"}, base=tmp_path)
    assert s.data_dir == tmp_path / "state"


def test_missing_secrets_are_generated_once_and_kept(tmp_path):
    s = Settings.from_env({}, base=tmp_path)
    assert s.generate_missing_secrets() == list(SECRET_NAMES)
    assert len(s.secrets["WORKSPACE_ADMIN_PASSWORD"]) >= 32  # SharedPasswordAuthenticator's rule
    assert len(s.secrets["WORKSPACE_USER_PASSWORD"]) >= 8
    assert stat.S_IMODE(s.secrets_file.stat().st_mode) == 0o600

    again = Settings.from_env({}, base=tmp_path)
    assert again.generate_missing_secrets() == []
    assert again.secrets == s.secrets


def test_environment_wins_over_the_stored_secrets(tmp_path):
    Settings.from_env({}, base=tmp_path).generate_missing_secrets()
    s = Settings.from_env({"WORKSPACE_USER_PASSWORD": "class-of-2026"}, base=tmp_path)
    assert s.secrets["WORKSPACE_USER_PASSWORD"] == "class-of-2026"
    assert s.generate_missing_secrets() == []


def test_only_unset_secrets_are_generated(tmp_path):
    s = Settings.from_env({"WORKSPACE_ADMIN_PASSWORD": "a" * 40}, base=tmp_path)
    assert s.generate_missing_secrets() == [
        "WORKSPACE_USER_PASSWORD",
        "WORKSPACE_ADMIN_API_TOKEN",
        "WORKSPACE_PROXY_AUTH_TOKEN",
    ]
    assert s.secrets["WORKSPACE_ADMIN_PASSWORD"] == "a" * 40
