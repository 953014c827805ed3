# JupyterHub configuration of a workspace deployment.
#
# Values come from the environment and the data directory (see
# workspace/settings.py for every WORKSPACE_* variable). The options of the
# workspace spawner are traitlets with help strings: list them with
#   .venv/bin/python -c "from workspace.spawner import DockerWorkspaceSpawner as S; print(S.class_get_help())"
# Put site-specific changes in $WORKSPACE_DATA_DIR/jupyterhub_config.d/*.py,
# which are loaded last (e.g. a production authenticator, see README).
import faulthandler
import json
import os
import sys
from pathlib import Path

# A crash of the hub in native code (a segfault) prints every thread's Python
# stack to the hub log instead of vanishing without a word.
faulthandler.enable()

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from workspace.settings import Settings  # noqa: E402
from workspace.setup.engine import bridge_gateway  # noqa: E402

c = get_config()  # noqa: F821
settings = Settings.from_env(base=HERE)
data = settings.data_dir

# -- hub, proxy, database ------------------------------------------------------
# The proxy is public on 127.0.0.1; the hub listens on the Docker bridge
# gateway so that containers reach its API.
gateway = bridge_gateway()
c.JupyterHub.ip = settings.ip
c.JupyterHub.port = settings.port
c.JupyterHub.hub_ip = gateway
c.JupyterHub.hub_connect_ip = gateway
c.JupyterHub.hub_port = settings.hub_port
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings.proxy_api_port}"
chp = HERE / ".node" / "node_modules" / ".bin" / "configurable-http-proxy"
if chp.exists():
    c.ConfigurableHTTPProxy.command = [str(chp)]
c.ConfigurableHTTPProxy.pid_file = str(data / "run" / "proxy.pid")

c.JupyterHub.db_url = f"sqlite:///{data / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(data / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(data / "run" / "jupyterhub.pid")

# A hub restart (upgrade, crash) must not stop anyone's workspace: the
# running containers are found again from the spawner state. `make down`
# stops the servers explicitly before it stops the hub.
c.JupyterHub.cleanup_servers = False

# Per-user origins (workspace/origins.py): with WORKSPACE_SUBDOMAIN_HOST (make up:
# http://localhost:8000) each user's servers are on a subdomain of their own, so a
# page a student serves cannot act with the session of an admin who opens it. The
# workspace service stays on the hub's origin.
if settings.subdomain_host:
    c.JupyterHub.subdomain_host = settings.subdomain_host
    from workspace.origins import subdomain_hook  # noqa: E402

    c.JupyterHub.subdomain_hook = subdomain_hook

# -- workspaces: named servers -------------------------------------------------
c.JupyterHub.allow_named_servers = True
# How many workspaces one user may have, and run at once (a student cannot
# start a hundred); resource types may limit further (GPUs per user).
c.JupyterHub.named_server_limit_per_user = int(os.environ.get("WORKSPACE_MAX_WORKSPACES") or 50)
c.DockerWorkspaceSpawner.max_running_per_user = int(os.environ.get("WORKSPACE_MAX_RUNNING") or 3)
# Login lands on the hub's home page, where a student picks or creates a
# workspace: no server is spawned behind their back.
c.JupyterHub.redirect_to_server = False
# A spawn request returns within a second, after its input is validated (so
# bad input is a 400 and records nothing); the page then follows the progress
# stream, which replays from the first event.
c.JupyterHub.tornado_settings = {"slow_spawn_timeout": 1}

c.JupyterHub.spawner_class = "workspace.spawner.DockerWorkspaceSpawner"
c.DockerWorkspaceSpawner.image = settings.image
if len(settings.images) > 1:
    c.DockerWorkspaceSpawner.allowed_images = settings.images
c.DockerWorkspaceSpawner.db_url = settings.db_url
c.DockerWorkspaceSpawner.store_root = str(settings.store_dir)
c.DockerWorkspaceSpawner.deployment = settings.deployment
c.DockerWorkspaceSpawner.network_name = "bridge"
c.DockerWorkspaceSpawner.start_timeout = 180
# Resource types (see the help of WorkspaceMixin.resource_types), e.g. in
# data/jupyterhub_config.d/types.py, or as JSON in WORKSPACE_RESOURCE_TYPES.
if os.environ.get("WORKSPACE_RESOURCE_TYPES"):
    c.DockerWorkspaceSpawner.resource_types = json.loads(os.environ["WORKSPACE_RESOURCE_TYPES"])
if os.environ.get("WORKSPACE_DEFAULT_RESOURCE_TYPE"):
    c.DockerWorkspaceSpawner.default_resource_type = os.environ["WORKSPACE_DEFAULT_RESOURCE_TYPE"]
if os.environ.get("WORKSPACE_GPU_INVENTORY"):
    c.DockerWorkspaceSpawner.gpu_inventory = os.environ["WORKSPACE_GPU_INVENTORY"].split(",")
if os.environ.get("WORKSPACE_GPU_DEVICE_MODE"):
    c.DockerWorkspaceSpawner.gpu_device_mode = os.environ["WORKSPACE_GPU_DEVICE_MODE"]
c.DockerWorkspaceSpawner.http_timeout = 120
# Storage quotas per user (see the help of workspace.quotas.StorageQuota), with
# group and user overrides in data/jupyterhub_config.d/*.py.
if os.environ.get("WORKSPACE_QUOTA_BYTES") is not None:
    c.StorageQuota.bytes = os.environ["WORKSPACE_QUOTA_BYTES"]
if os.environ.get("WORKSPACE_QUOTA_FILES"):
    c.StorageQuota.files = int(os.environ["WORKSPACE_QUOTA_FILES"])

# -- login: one shared password for users, one for the admin ------------------
# Any user name logs in with the user password, so a class can try it at once.
# For LDAP, OAuth or NativeAuthenticator, see README ("Authentication").
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = settings.secrets["WORKSPACE_USER_PASSWORD"] or None
c.SharedPasswordAuthenticator.admin_password = settings.secrets["WORKSPACE_ADMIN_PASSWORD"] or None
c.Authenticator.admin_users = {settings.admin_user}
c.Authenticator.allow_all = True
# WORKSPACE_AUTH=native: self sign-up with the institution's e-mail address
# (WORKSPACE_EMAIL_DOMAINS), each account approved by an administrator on
# /hub/authorize (workspace/auth.py); the admin's account has the admin password.
if os.environ.get("WORKSPACE_AUTH") == "native":
    import nativeauthenticator

    c.JupyterHub.authenticator_class = "workspace.auth.InstitutionAuthenticator"
    c.JupyterHub.template_paths = [str(Path(nativeauthenticator.__file__).parent / "templates")]
    c.InstitutionAuthenticator.email_domains = [
        d.strip() for d in os.environ.get("WORKSPACE_EMAIL_DOMAINS", "").split(",") if d.strip()
    ]
    c.InstitutionAuthenticator.admin_password = settings.secrets["WORKSPACE_ADMIN_PASSWORD"] or ""
    c.JupyterHub.template_vars = {
        "announcement_login": 'New here? <a href="signup">Sign up</a> with your institution\'s e-mail address.'
    }

# -- services --------------------------------------------------------------------
# workspace: the REST API and the pages; started and proxied by the hub
# at /services/workspace/. workspace-admin: the operator's token, used by
# `make down` and the tests.
# workspace-culler: stops idle workspaces (workspace/culler.py; its policy is
# set with WORKSPACE_CULL_* or data/culler_config.py).
service_env = {k: v for k, v in os.environ.items() if k.startswith("WORKSPACE_")} | {
    "WORKSPACE_DATA_DIR": str(data),
    "PYTHONPATH": str(HERE),
}
c.JupyterHub.services = [
    {
        "name": "workspace",
        "url": f"http://127.0.0.1:{settings.service_port}",
        "command": [sys.executable, "-m", "workspace.service"],
        "cwd": str(HERE),
        "environment": service_env,
        "oauth_no_confirm": True,
        # the pages start and stop workspaces with the user's OAuth token, which
        # JupyterHub limits to these scopes AND the user's own rights: a
        # student's own servers, an admin's all (the admin page)
        "oauth_client_allowed_scopes": ["servers", "read:servers", "custom:workspaces:read", "custom:courses:manage"],
        "display": True,
    },
    {
        "name": "workspace-culler",
        "command": [sys.executable, "-m", "workspace.culler"],
        "cwd": str(HERE),
        "environment": service_env,
    },
]
# Reading other users' workspaces (never changing them): the service checks this scope.
c.JupyterHub.custom_scopes = {
    "custom:workspaces:read": {
        "description": "Read users' workspaces, executions, usage, storage and accounting (read-only).",
    },
    "custom:courses:manage": {
        "description": "Set a course up: its roster (the group's members) and the workspace its students get.",
    },
}
c.JupyterHub.load_roles = [
    {
        # every user may use the workspace service (with their own rights there)
        "name": "user",
        "scopes": ["self", "access:services!service=workspace"],
    },
    {
        "name": "workspace-service",
        "description": "The workspace service: read users (to tell admins from others) and groups "
        "(an instructor's course page lists the course's members); a course set-up "
        "creates the roster's users and the course's group and sets its members.",
        # read:roles:users: a roster may name only students (no admin, instructor or other role)
        "scopes": [
            "list:users",
            "read:users",
            "read:roles:users",
            "list:groups",
            "read:groups",
            "admin:users",
            "admin:groups",
        ],
        "services": ["workspace"],
    },
    {
        "name": "workspace-culler",
        "description": "The idle culler: read servers and their activity, ask workspaces, stop idle ones.",
        "scopes": [
            "list:users",
            "read:users:name",
            "read:users:groups",
            "read:users:activity",
            "read:servers",
            "delete:servers",
            # the servers' addresses, to ask the workspace extension directly (not through
            # the proxy) with each execution's report key: no hub token goes to a workspace
            "proxy",
        ],
        "services": ["workspace-culler"],
    },
]
if settings.secrets["WORKSPACE_ADMIN_API_TOKEN"]:
    c.JupyterHub.services.append(
        {"name": "workspace-admin", "api_token": settings.secrets["WORKSPACE_ADMIN_API_TOKEN"]}
    )
    c.JupyterHub.load_roles.append(
        {
            "name": "workspace-admin",
            "description": "Operator tasks: create users and groups, start and stop any server.",
            "scopes": [
                "admin:users",
                "admin:servers",
                "admin:groups",
                "list:users",
                "read:users",
                "tokens",
                "access:services!service=workspace",
            ],
            "services": ["workspace-admin"],
        }
    )

# Instructors: WORKSPACE_COURSES='{"cs101": {"instructors": ["prof"]}}' gives each instructor
# read-only access to the workspaces of the members of the JupyterHub group of the course, the
# group's member list, and the right to set the course up (its roster and template, courses.py).
# (A site can write such roles itself in jupyterhub_config.d.)
for course, spec in json.loads(os.environ.get("WORKSPACE_COURSES") or "{}").items():
    c.JupyterHub.load_roles.append(
        {
            "name": f"instructor-{course}",
            "description": f"Instructors of {course}: read their students' workspaces.",
            "scopes": [
                f"custom:workspaces:read!group={course}",
                f"custom:courses:manage!group={course}",
                f"read:groups!group={course}",
                f"list:users!group={course}",
                f"read:users:name!group={course}",
            ],
            "users": list(spec.get("instructors", [])),
        }
    )

# -- site overrides -------------------------------------------------------------
for extra in sorted((data / "jupyterhub_config.d").glob("*.py")):
    load_subconfig(str(extra))  # noqa: F821

# The services do not read this file: they get the effective policy (after the
# site overrides) in their environment, so the pages and the API show the same
# resource types and quotas the spawner applies.
service_env["WORKSPACE_STORAGE_QUOTA"] = json.dumps(dict(c.StorageQuota))
if "resource_types" in c.DockerWorkspaceSpawner:
    service_env["WORKSPACE_RESOURCE_TYPES"] = json.dumps(c.DockerWorkspaceSpawner.resource_types)
for name, key in (
    ("default_resource_type", "WORKSPACE_DEFAULT_RESOURCE_TYPE"),
    ("gpu_inventory", "WORKSPACE_GPU_INVENTORY"),
):
    if name in c.DockerWorkspaceSpawner:
        value = c.DockerWorkspaceSpawner[name]
        service_env[key] = ",".join(value) if isinstance(value, list) else str(value)
