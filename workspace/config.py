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

    python -m workspace.setup.reference   the reference (docs/configuration.md), from the help strings
"""

from __future__ import annotations

import json
import os
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
    Variable(
        "WORKSPACE_GPU_DRIVER", SPAWNER, "gpu_driver", json.loads, what='a JSON object: {"version": ..., "cuda": ...}'
    ),
    Variable("WORKSPACE_RECORD_STORE", SPAWNER, "record_store_root"),
    Variable("WORKSPACE_MAX_RUNNING", SPAWNER, "max_running_per_user", int, what="a whole number"),
    Variable("WORKSPACE_MAX_RUNS", SPAWNER, "max_runs_per_user", int, what="a whole number"),
    Variable("WORKSPACE_STARTUP_SLOTS", SPAWNER, "startup_slots", int, what="a whole number"),
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
