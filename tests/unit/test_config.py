"""The one configuration path (workspace/config.py): environment -> hub config file -> every process."""

from pathlib import Path

import pytest
from jupyterhub.app import JupyterHub

from workspace import config
from workspace.auth import InstitutionAuthenticator
from workspace.culler.app import Culler
from workspace.service.app import WorkspaceService
from workspace.setup import reference
from workspace.spawner.options import SpawnerOptions

ROOT = Path(__file__).resolve().parents[2]


def test_every_shorthand_names_an_option_that_exists():
    classes = {cls.__name__: cls for cls in [*reference.configurables(), JupyterHub, InstitutionAuthenticator, Culler]}
    from workspace.limits.runtime import IdlePolicy

    classes["IdlePolicy"] = IdlePolicy
    for var in config.ENVIRONMENT:
        traits = classes[var.section].class_traits(config=True)
        assert var.trait in traits, f"{var.name} sets c.{var.section}.{var.trait}, which is no option"


def test_the_reference_is_generated_from_the_help_strings():
    """docs/configuration.md is what `python -m workspace.setup.reference` writes: regenerate it after changing an
    option."""
    assert (ROOT / "docs" / "configuration.md").read_text() == reference.reference()


def test_a_bad_value_names_its_variable():
    with pytest.raises(SystemExit, match="WORKSPACE_RESOURCE_TYPES must be a JSON list"):
        config.from_environment({"WORKSPACE_RESOURCE_TYPES": "[{"})
    with pytest.raises(SystemExit, match="WORKSPACE_MAX_RUNNING must be a whole number"):
        config.from_environment({"WORKSPACE_MAX_RUNNING": "three"})
    # empty is unset, except where empty is a value (no storage quota)
    assert config.from_environment({"WORKSPACE_MAX_RUNNING": "", "WORKSPACE_QUOTA_BYTES": ""}) == {
        "StorageQuota": {"bytes": ""}
    }


def hub_config(tmp_path: Path, body: str) -> str:
    path = tmp_path / "jupyterhub_config.py"
    path.write_text("c = get_config()\n" + body)
    return str(path)


def test_the_service_applies_what_the_hub_file_and_the_environment_say(tmp_path, monkeypatch):
    """What used to be re-serialised into the services' environment: a site's quota, types, rules, courses."""
    monkeypatch.setenv("WORKSPACE_QUOTA_FILES", "77")
    monkeypatch.setenv("WORKSPACE_DATASET_SMALL_FILES_MIN_TOTAL", "123")
    path = hub_config(
        tmp_path,
        'c.JupyterHub.spawner_class = "workspace.spawner.DockerWorkspaceSpawner"\n'
        'c.DockerWorkspaceSpawner.resource_types = [{"name": "small", "cpu": 1}, {"name": "big", "cpu": 8}]\n'
        'c.DockerWorkspaceSpawner.default_resource_type = "big"\n'
        'c.DockerWorkspaceSpawner.db_url = "sqlite:///' + str(tmp_path / "w.sqlite") + '"\n'
        'c.StorageQuota.bytes = "7G"\n'
        "c.StorageQuota.files = 5\n"  # the file wins over the environment
        "c.DatasetRules.small_files_rule = False\n"
        "c.UploadPolicy.max_pending = 9\n"
        'c.WorkspaceService.courses = {"cs101": {"instructors": ["prof"]}}\n'
        'c.JupyterHub.subdomain_host = "http://localhost:8000"\n',
    )
    service = WorkspaceService()
    service.initialize([f"--hub-config={path}"])
    assert [t.name for t in service.spawner.parsed_resource_types()] == ["small", "big"]
    assert service.spawner.default_resource_type == "big"
    assert service.storage_quota.default_limit().bytes == 7 << 30
    assert service.storage_quota.files == 5
    assert service.dataset_rules.small_files_rule is False
    assert service.dataset_rules.small_files_min_total == 123  # from the environment
    assert service.upload_policy.max_pending == 9
    assert service.courses == {"cs101": {"instructors": ["prof"]}}
    app = service.make_app()
    assert app.settings["subdomain_host"] == "http://localhost:8000"
    assert app.settings["storage_quota"] is service.storage_quota
    assert app.settings["dataset_rules"] is service.dataset_rules
    assert app.settings["default_resource_type"] == "big"


def test_the_culler_applies_the_hub_file_then_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSPACE_CULL_CPU_WINDOW", "600")
    own = tmp_path / "culler_config.py"
    own.write_text('c = get_config()\nc.IdlePolicy.overrides = {"user:ann": {"browser_timeout": 60}}\n')
    path = hub_config(
        tmp_path,
        'c.DockerWorkspaceSpawner.db_url = "sqlite:///' + str(tmp_path / "w.sqlite") + '"\n'
        'c.DockerWorkspaceSpawner.store_root = "' + str(tmp_path / "store") + '"\n'
        "c.IdlePolicy.browser_timeout = 120\n"
        f'c.Culler.config_file = "{own}"\n',
    )
    culler = Culler()
    culler.initialize([f"--hub-config={path}"])
    assert culler.db_url.endswith("w.sqlite") and culler.store_dir == str(tmp_path / "store")
    assert culler.policy.browser_timeout == 120 and culler.policy.cpu_window == 600
    assert culler.policy.limits(user="ann").browser_timeout == 60


def test_the_spawner_options_are_read_as_the_spawner_reads_them():
    from traitlets.config import Config

    c = Config()
    c.WorkspaceMixin.gpu_inventory = ["0"]
    c.DockerSpawner.image = "mine:1"
    c.DockerWorkspaceSpawner.resource_types = [{"name": "x"}]
    c.Spawner.start_timeout = 5
    options = SpawnerOptions(c)
    assert options.gpu_inventory == ["0"] and options.image == "mine:1" and options.start_timeout == 5
    assert [t.name for t in options.parsed_resource_types()] == ["x"]
    assert options.max_running_per_user == 3  # the default
    with pytest.raises(AttributeError):
        options.no_such_option


def test_the_projects_own_hub_file_reaches_the_service_with_a_site_file(tmp_path, monkeypatch):
    """jupyterhub_config.py as the hub passes it: the environment, then the site's jupyterhub_config.d."""
    monkeypatch.setenv("WORKSPACE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("WORKSPACE_RESOURCE_TYPES", '[{"name": "small", "cpu": 1}]')
    monkeypatch.setenv("WORKSPACE_COURSES", '{"cs101": {"instructors": ["prof"]}}')
    site = tmp_path / "jupyterhub_config.d"
    site.mkdir()
    (site / "quota.py").write_text('c.StorageQuota.groups = {"staff": {"bytes": "1T"}}\n')
    service = WorkspaceService()
    service.initialize([f"--hub-config={ROOT / 'jupyterhub_config.py'}"])
    assert [t.name for t in service.spawner.parsed_resource_types()] == ["small"]
    assert service.spawner.db_url == f"sqlite:///{tmp_path / 'workspace.sqlite'}"
    assert service.storage_quota.limit_for("ann", {"staff"}).bytes == 1 << 40
    assert service.courses == {"cs101": {"instructors": ["prof"]}}
    assert "instructor-cs101" in {r["name"] for r in service.config.JupyterHub.load_roles}
