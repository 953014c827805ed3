"""The one configuration path: environment -> traitlets config -> every process.

Every option of the deployment is a traitlet with a help string, on the class
that applies it (the spawner, StorageQuota, DatasetRules, UploadPolicy,
IdlePolicy, the culler, the workspace service). The WORKSPACE_* variables
below are shorthands for some of them: `from_environment()` turns them into
config, which jupyterhub_config.py starts from; the site's
`jupyterhub_config.d/*.py` come after and win.

The hub, the workspace service and the culler all load that same file (the
services get its path in their command line, `--config-file`), so an option
set there reaches every process that applies it: the pages show the resource
types and quotas the spawner enforces because both read the same config, not
a copy passed along in the environment.

    python -m workspace.config      the reference (docs/configuration.md), from the help strings
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Callable

from traitlets import Unicode, default
from traitlets.config import Application, Config


def _bool(text: str) -> bool:
    return text.strip().lower() not in ("0", "false", "off", "no", "")


def _list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


@dataclass(frozen=True)
class Variable:
    """A WORKSPACE_* variable that sets one traitlet."""

    name: str
    section: str  # the configurable class, as in `c.<section>.<trait>`
    trait: str
    parse: Callable[[str], object] = str
    # whether an empty value is a value ("" = no storage quota) or the same as unset
    empty_counts: bool = False
    what: str = "a value"  # for the error on a value that does not parse

    def parsed(self, text: str):
        try:
            return self.parse(text)
        except (ValueError, TypeError) as e:
            raise SystemExit(f"{self.name} must be {self.what}, not {text!r} ({e})") from None


SPAWNER = "DockerWorkspaceSpawner"
SECONDS = "a number of seconds"

ENVIRONMENT: tuple[Variable, ...] = (
    Variable("WORKSPACE_RESOURCE_TYPES", SPAWNER, "resource_types", json.loads, what="a JSON list of resource types"),
    Variable("WORKSPACE_DEFAULT_RESOURCE_TYPE", SPAWNER, "default_resource_type"),
    Variable("WORKSPACE_GPU_INVENTORY", SPAWNER, "gpu_inventory", _list),
    Variable("WORKSPACE_GPU_DEVICE_MODE", SPAWNER, "gpu_device_mode"),
    Variable("WORKSPACE_RECORD_STORE", SPAWNER, "record_store_root"),
    Variable("WORKSPACE_MAX_RUNNING", SPAWNER, "max_running_per_user", int, what="a whole number"),
    Variable("WORKSPACE_WEBHOOK_NETWORKS", SPAWNER, "webhook_networks", _list),
    Variable("WORKSPACE_EGRESS_ALLOWED", "Egress", "allowed", _list),
    Variable("WORKSPACE_LOG_LIMIT", SPAWNER, "execution_log_limit", int, what="a number of bytes"),
    Variable("WORKSPACE_MAX_WORKSPACES", "JupyterHub", "named_server_limit_per_user", int, what="a whole number"),
    Variable("WORKSPACE_QUOTA_BYTES", "StorageQuota", "bytes", empty_counts=True),
    Variable("WORKSPACE_QUOTA_FILES", "StorageQuota", "files", int, what="a whole number"),
    Variable("WORKSPACE_DATASET_SMALL_FILES_RULE", "DatasetRules", "small_files_rule", _bool),
    Variable("WORKSPACE_DATASET_SMALL_FILES_MIN_TOTAL", "DatasetRules", "small_files_min_total", int, what="bytes"),
    Variable("WORKSPACE_DATASET_SMALL_FILES_MIN_AVERAGE", "DatasetRules", "small_files_min_average", int, what="bytes"),
    Variable("WORKSPACE_UPLOAD_EXPIRE_AFTER", "UploadPolicy", "expire_after", float, what=SECONDS),
    Variable("WORKSPACE_UPLOAD_MAX_PENDING", "UploadPolicy", "max_pending", int, what="a whole number"),
    Variable("WORKSPACE_COURSES", "WorkspaceService", "courses", json.loads, what="a JSON object of courses"),
    Variable("WORKSPACE_SAVE_RETRY_INTERVAL", "WorkspaceService", "retry_interval", float, what=SECONDS),
    Variable("WORKSPACE_CULL_BROWSER_TIMEOUT", "IdlePolicy", "browser_timeout", float, what=SECONDS),
    Variable("WORKSPACE_CULL_CPU_THRESHOLD", "IdlePolicy", "cpu_threshold", float, what="a number (percent)"),
    Variable("WORKSPACE_CULL_CPU_WINDOW", "IdlePolicy", "cpu_window", float, what=SECONDS),
    Variable("WORKSPACE_CULL_GPU_THRESHOLD", "IdlePolicy", "gpu_threshold", float, what="a number (percent)"),
    Variable("WORKSPACE_CULL_MAX_RUNTIME", "IdlePolicy", "max_runtime", float, what=SECONDS),
    Variable("WORKSPACE_CULL_WARN_BEFORE", "IdlePolicy", "warn_before", float, what=SECONDS),
    Variable("WORKSPACE_CULL_INTERVAL", "Culler", "interval", float, what=SECONDS),
    Variable("WORKSPACE_USAGE_SAMPLE_INTERVAL", "Culler", "sample_interval", float, what=SECONDS),
    Variable("WORKSPACE_HOME_FILES_INTERVAL", "Culler", "files_interval", float, what=SECONDS),
    Variable("WORKSPACE_CULLER_CONFIG", "Culler", "config_file"),
    Variable("WORKSPACE_EMAIL_DOMAINS", "InstitutionAuthenticator", "email_domains", _list),
)


def from_environment(environ=os.environ) -> Config:
    """The config the WORKSPACE_* variables of ENVIRONMENT set (a bad value stops with its name)."""
    config = Config()
    for var in ENVIRONMENT:
        text = environ.get(var.name)
        if text is None or (text == "" and not var.empty_counts):
            continue
        config[var.section][var.trait] = var.parsed(text)
    return config


def variables_of(section: str) -> dict[str, str]:
    """{trait: variable} of one class's shorthands (for the reference)."""
    return {v.trait: v.name for v in ENVIRONMENT if v.section == section}


def load(app, argv=None) -> None:
    """Configure a traitlets Application of ours as the hub is configured: the WORKSPACE_* variables,
    then the hub's file (`app.hub_config`, which the hub passes in the command line), then the
    command line itself, each winning over the one before."""
    app.parse_command_line([] if argv is None else argv)
    app.update_config(from_environment())
    if app.hub_config:
        app.load_config_file(app.hub_config)
    app.update_config(app.cli_config)


class HubService(Application):
    """What every JupyterHub service of ours that is its own process (the culler, the SSH gateway) has:
    the hub's API and the service's token, as the hub hands them over, and the hub's configuration file,
    which the hub passes in the command line (`--hub-config`), so the service applies the options the hub
    does (`load`)."""

    hub_api_url = Unicode(config=True, help="The hub's REST API (JupyterHub sets JUPYTERHUB_API_URL).")
    api_token = Unicode(config=True, help="The service's token (JupyterHub sets JUPYTERHUB_API_TOKEN).")
    hub_config = Unicode("", config=True, help="The hub's configuration file (jupyterhub_config.py).")

    @default("hub_api_url")
    def _default_hub_api_url(self):
        return os.environ.get("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api")

    @default("api_token")
    def _default_api_token(self):
        return os.environ.get("JUPYTERHUB_API_TOKEN", "")


class SpawnerOptions:
    """The spawner's options as the hub applies them (resource types, images, the store, the
    database), for the processes that show or act on them without spawning.

    A spawner cannot be made without a user, so this reads the config as traitlets
    would for it: `c.<class>.<option>` of every class of the spawner's, the most
    derived winning, else the option's default.
    """

    def __init__(self, config: Config):
        from traitlets.utils.importstring import import_item

        from workspace.spawner import DockerWorkspaceSpawner, WorkspaceMixin

        cls = config.JupyterHub.get("spawner_class", DockerWorkspaceSpawner)
        if isinstance(cls, str):
            try:
                cls = import_item(cls)
            except ImportError:
                cls = DockerWorkspaceSpawner
        if not (isinstance(cls, type) and issubclass(cls, WorkspaceMixin)):
            cls = DockerWorkspaceSpawner
        self.spawner_class = cls
        self._traits = cls.class_traits(config=True)
        self._values = Config()
        for section in cls.section_names():  # base classes first: the most derived wins
            if section in config:
                self._values.merge(config[section])

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._traits:
            raise AttributeError(name)
        return self._values[name] if name in self._values else self._traits[name].default()

    def parsed_resource_types(self):
        from workspace.limits.resource_types import ResourceType

        return [ResourceType.from_config(d) for d in self.resource_types]


def configurables() -> list[type]:
    """Every class whose options make up this deployment's configuration, in the reference's order."""
    from workspace.datasets import DatasetRules
    from workspace.egress import Egress
    from workspace.images.builds import ImageBuilder
    from workspace.limits.quotas import StorageQuota
    from workspace.service.app import WorkspaceService
    from workspace.spawner import DockerWorkspaceSpawner, SwarmWorkspaceSpawner, WorkspaceMixin
    from workspace.uploads.staging import UploadPolicy

    return [
        WorkspaceMixin,
        DockerWorkspaceSpawner,
        SwarmWorkspaceSpawner,
        StorageQuota,
        DatasetRules,
        UploadPolicy,
        ImageBuilder,
        Egress,
        WorkspaceService,
    ]


def reference() -> str:
    """docs/configuration.md: every option of ours, from its help string, with its WORKSPACE_* shorthand."""
    from workspace.culler.app import Culler
    from workspace.culler.idle import IdlePolicy
    from workspace.gateway.server import SshGateway

    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m workspace.config` from the options' help strings; do not edit. -->",
        "",
        "Every option is a traitlet, set in `jupyterhub_config.py` or a site file in",
        "`$WORKSPACE_DATA_DIR/jupyterhub_config.d/*.py` as `c.<Class>.<option> = value`. The hub, the",
        "workspace service, the culler and the SSH gateway all load that file, so an option set there",
        "reaches every process that applies it. Some options have an environment variable as a shorthand",
        "(listed with them); a site file wins over it. Deployment settings (ports, paths, passwords) are in",
        "workspace/settings.py.",
        "",
    ]
    for cls in [*configurables(), IdlePolicy, HubService, Culler, SshGateway]:
        own = cls.class_own_traits(config=True)
        if not own:
            continue
        env = variables_of(cls.__name__)
        if cls.__name__ == "WorkspaceMixin":
            env = variables_of(SPAWNER)
        doc = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
        if cls.__name__ == "WorkspaceMixin":
            doc += f" Set these on the spawner class, as `c.{SPAWNER}.<option>` (jupyterhub_config.py does)."
        lines += [f"## {cls.__name__}", "", doc, ""]
        for name, trait in sorted(own.items()):
            default = trait.default_value_repr()
            shorthand = f" (environment: `{env[name]}`)" if name in env else ""
            lines.append(f"- **`c.{cls.__name__}.{name}`** = `{default}`{shorthand}  ")
            help_text = " ".join((trait.help or "").split())
            lines.append(f"  {help_text}" if help_text else "  (no help)")
        lines.append("")
    lines += [
        "## Environment shorthands",
        "",
        "Each sets one option (a value that does not parse stops the process with the variable's name).",
        "",
        "| variable | option |",
        "|---|---|",
        *(f"| `{v.name}` | `c.{v.section}.{v.trait}` |" for v in ENVIRONMENT),
    ]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
