# JupyterHub configuration of a workspace deployment.
#
# One configuration path (workspace/config.py): the WORKSPACE_* shorthands
# become config first, this file adds the deployment's settings (ports, paths,
# secrets: workspace/settings.py), and the site's
# $WORKSPACE_DATA_DIR/jupyterhub_config.d/*.py come last and win (e.g. a
# production authenticator, see docs/admin/production.md). The workspace service and the culler
# load this same file, so every option reaches every process that applies it.
# The reference of every option: docs/configuration.md (`python -m workspace.setup.reference`).
import faulthandler
import os
import secrets
import sys
from pathlib import Path

# A crash of the hub in native code (a segfault) prints every thread's Python
# stack to the hub log instead of vanishing without a word.
faulthandler.enable()

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from workspace import data_dir  # noqa: E402
from workspace.config import from_environment  # noqa: E402
from workspace.settings import Settings  # noqa: E402
from workspace.setup.engine import bridge_gateway  # noqa: E402

c = get_config()  # noqa: F821
c.merge(from_environment())
settings = Settings.from_env(base=HERE)
data = settings.data_dir

# The data directory is the hub's alone (workspace/data_dir.py, #28): this process and those it starts
# (the proxy, the services, the culler, the SSH gateway; all load this file) create files only root
# reads, and what an older deployment left open (a 0644 database, logs) is closed at each start.
data_dir.restrict_umask()
data_dir.close(data)

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
# `make up` runs the proxy as a process of its own (workspace/setup/proxy.py): a hub that restarts (an
# upgrade, a crash) leaves every route, and every open connection to a workspace, as it was; the hub only
# tells it its routes, with the token they share. Started otherwise (the tests' hubs), the hub starts its own.
if os.environ.get("WORKSPACE_PROXY") == "external" and settings.secrets["WORKSPACE_PROXY_AUTH_TOKEN"]:
    c.ConfigurableHTTPProxy.should_start = False
    c.ConfigurableHTTPProxy.auth_token = settings.secrets["WORKSPACE_PROXY_AUTH_TOKEN"]
elif settings.subdomain_host:
    # the proxy the hub starts gets a token the router knows too: with per-user origins the router keeps a
    # route on each deployment's owner's host (workspace/router/proxy_routes.py; the services get it below)
    c.ConfigurableHTTPProxy.auth_token = os.environ.get("CONFIGPROXY_AUTH_TOKEN") or secrets.token_hex(32)

c.JupyterHub.db_url = settings.hub_db_url  # WORKSPACE_HUB_DB_URL; SQLite in the data dir by default
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
# (WORKSPACE_MAX_WORKSPACES, WORKSPACE_MAX_RUNNING; DockerWorkspaceSpawner.max_running_per_user is 3)
if "named_server_limit_per_user" not in c.JupyterHub:
    c.JupyterHub.named_server_limit_per_user = 50
# Login lands on the hub's home page, where a student picks or creates a
# workspace: no server is spawned behind their back.
c.JupyterHub.redirect_to_server = False
# ... and lands on their workspaces (the service's page), whose navigation the hub's own pages share
# (workspace/hub_templates/page.html extends the hub's page.html)
c.JupyterHub.default_url = "/services/workspace/workspaces"
c.JupyterHub.template_paths = [str(HERE / "workspace" / "hub_templates")]
c.JupyterHub.template_vars = {"ws_prefix": "/services/workspace/"}
# the hub's pages in the user's language: our templates mark their sentences for the catalogues of
# workspace/i18n.py, whose jinja2 extension takes the language from each page's request
c.JupyterHub.jinja_environment_options = {"extensions": ["workspace.i18n.Jinja"]}
# A spawn request returns within a second, after its input is validated (so
# bad input is a 400 and records nothing); the page then follows the progress
# stream, which replays from the first event.
c.JupyterHub.tornado_settings = {"slow_spawn_timeout": 1}
# Every start waits in our own queue (workspace/limits/queue.py: start-up turns, capacity, GPUs) as a
# pending spawn of the hub; the hub's own limit of 100 pending would refuse part of a lecture's burst
# once a few sweeps wait beside it (#31). Each user's waiting runs are bounded (max_runs_per_user).
c.JupyterHub.concurrent_spawn_limit = 1000

c.JupyterHub.spawner_class = "workspace.spawner.DockerWorkspaceSpawner"
if settings.swarm_manager:
    # a cluster is a setting: the same spawner's options, workspaces as services on a swarm's
    # nodes, placed by the nodes' labels (docs/swarm.md)
    c.JupyterHub.spawner_class = "workspace.spawner.SwarmWorkspaceSpawner"
    c.DockerWorkspaceSpawner.client_kwargs = {"base_url": settings.swarm_manager}
c.DockerWorkspaceSpawner.image = settings.image
if len(settings.images) > 1:
    c.DockerWorkspaceSpawner.allowed_images = settings.images
c.DockerWorkspaceSpawner.db_url = settings.db_url
# the key that seals the database's secrets (SSH private keys, webhook secrets: workspace/vault.py), apart
# from the database (WORKSPACE_SECRET_KEY_FILE; <data dir>/secrets/workspace.key, made at the first start)
c.DockerWorkspaceSpawner.secret_key_file = str(settings.secret_key_file)
c.DockerWorkspaceSpawner.store_root = str(settings.store_dir)
c.DockerWorkspaceSpawner.execution_log_root = str(data / "execution-logs")  # ended executions' logs
c.DockerWorkspaceSpawner.deployment = settings.deployment
c.DockerWorkspaceSpawner.network_name = "bridge"
c.DockerWorkspaceSpawner.start_timeout = 180
# Resource types (DockerWorkspaceSpawner.resource_types), storage quotas
# (StorageQuota) and the rest: WORKSPACE_* shorthands or data/jupyterhub_config.d/*.py.
c.DockerWorkspaceSpawner.http_timeout = 120

# -- login: one shared password for users, one for the admin ------------------
# Any user name logs in with the user password, so a class can try it at once.
# For LDAP, OAuth or NativeAuthenticator, see docs/admin/production.md (the manual, "Authentication").
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
    c.JupyterHub.template_paths.append(str(Path(nativeauthenticator.__file__).parent / "templates"))
    c.InstitutionAuthenticator.admin_password = settings.secrets["WORKSPACE_ADMIN_PASSWORD"] or ""
    c.JupyterHub.template_vars["native_auth"] = True  # its pages in the shared navigation
    c.JupyterHub.template_vars["announcement_login"] = (
        'New here? <a href="signup">Sign up</a> with your institution\'s e-mail address.'
    )

# -- services --------------------------------------------------------------------
# workspace: the REST API and the pages; started and proxied by the hub
# at /services/workspace/. workspace-admin: the operator's token, used by
# `make down` and the tests.
# workspace-culler: stops idle workspaces (workspace/culler/app.py; its policy is
# IdlePolicy: WORKSPACE_CULL_*, this file's site files, or data/culler_config.py).
# Both load this file (--hub-config), so they apply the options the hub does;
# the environment carries only what this file itself reads.
service_env = {k: v for k, v in os.environ.items() if k.startswith("WORKSPACE_")} | {
    "WORKSPACE_DATA_DIR": str(data),
    "PYTHONPATH": str(HERE),
}
hub_config = f"--hub-config={Path(__file__).resolve()}"
if "config_file" not in c.Culler:
    c.Culler.config_file = str(data / "culler_config.py")
c.JupyterHub.services = [
    {
        "name": "workspace",
        "url": f"http://127.0.0.1:{settings.service_port}",
        "command": [sys.executable, "-m", "workspace.service", hub_config],
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
        # the address of every deployment (#33): /serve/OWNER/NAME/, a route of the proxy of its own
        # (Proxy.extra_routes below); its login is the hub's (OAuth), finished at /serve/oauth_callback
        "name": "workspace-router",
        "url": f"http://127.0.0.1:{settings.router_port}",
        "command": [sys.executable, "-m", "workspace.router", hub_config],
        "cwd": str(HERE),
        "environment": service_env,
        "oauth_no_confirm": True,
        # on the hub's host (absolute with per-user origins: a user's host is no login's); the router
        # sends this one, not JupyterHub's JUPYTERHUB_OAUTH_CALLBACK_URL (/services/workspace-router/...)
        "oauth_redirect_uri": settings.subdomain_host.rstrip("/") + "/serve/oauth_callback",
        # who the caller is (their name and groups: a course's deployment), nothing more
        "oauth_client_allowed_scopes": ["read:users:groups!user"],
    },
    {
        "name": "workspace-culler",
        "command": [sys.executable, "-m", "workspace.culler", hub_config],
        "cwd": str(HERE),
        "environment": service_env,
    },
]
# /serve/ goes to the router (#33): a route without the hub's mark, which the hub's route check keeps;
# with per-user origins, on the hub's own host (the router sandboxes what it serves there: router/app.py)
serve_route = "/serve/"
if settings.subdomain_host:
    from urllib.parse import urlparse  # noqa: E402

    serve_route = f"{urlparse(settings.subdomain_host).hostname}/serve/"
c.Proxy.extra_routes = {serve_route: f"http://127.0.0.1:{settings.router_port}"}
if settings.subdomain_host:
    # ... and the router's own route on each owner's host: the proxy's token, to the router alone
    router = next(s for s in c.JupyterHub.services if s["name"] == "workspace-router")
    router["environment"] = service_env | {"CONFIGPROXY_AUTH_TOKEN": c.ConfigurableHTTPProxy.auth_token}
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
        "scopes": ["self", "access:services!service=workspace", "access:services!service=workspace-router"],
    },
    {
        "name": "workspace-service",
        "description": "The workspace service: read users (to tell admins from others) and groups "
        "(an instructor's course page lists the course's members); a course set-up "
        "creates the roster's users and the course's group and sets its members; "
        "the deployments' replicas are started and stopped.",
        # read:roles:users: a roster may name only students (no admin, instructor or other role)
        "scopes": [
            "list:users",
            "read:users",
            "read:roles:users",
            "list:groups",
            "read:groups",
            "admin:users",
            "admin:groups",
            # the deployments' controller (#33) starts and stops their replicas, each a server of their owner
            "servers",
            "delete:servers",
        ],
        "services": ["workspace"],
    },
    {
        "name": "workspace-router",
        "description": "The deployments' router: who a visitor it knows by its own login on an owner's host "
        "is now (their name and groups, for a course's deployment).",
        "scopes": ["read:users:name", "read:users:groups"],
        "services": ["workspace-router"],
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
                # the proxy's keeper (workspace/setup/proxy.py) asks for the routes again after a restart
                "proxy",
            ],
            "services": ["workspace-admin"],
        }
    )

# workspace-ssh-gateway: `ssh -p 2222 you+workspace@host` (workspace/gateway/, docs/ssh.md). Its
# client key's public half is authorized in every workspace (only from the gateway's address); its
# private keys stay in data/gateway. It reads the users' keys and where each running workspace's sshd
# answers from the workspace database, asks the hub whether a workspace is ready, and starts one on `+start`.
if settings.ssh_port:
    from workspace.gateway_keys import ensure as ensure_gateway_keys  # noqa: E402

    gateway_keys = ensure_gateway_keys(data / "gateway")
    c.DockerWorkspaceSpawner.ssh_gateway_key = gateway_keys.client_public()
    c.SshGateway.ip = settings.ssh_ip
    c.SshGateway.port = settings.ssh_port
    c.SshGateway.keys_dir = str(gateway_keys.directory)
    c.JupyterHub.services.append(
        {
            "name": "workspace-ssh-gateway",
            "command": [sys.executable, "-m", "workspace.gateway", hub_config],
            "cwd": str(HERE),
            "environment": service_env,
        }
    )
    c.JupyterHub.load_roles.append(
        {
            "name": "workspace-ssh-gateway",
            "description": "The SSH gateway: is a workspace ready; start one on +start.",
            "scopes": ["read:users:name", "read:servers", "servers"],
            "services": ["workspace-ssh-gateway"],
        }
    )

# -- site overrides -------------------------------------------------------------
for extra in sorted((data / "jupyterhub_config.d").glob("*.py")):
    load_subconfig(str(extra))  # noqa: F821

# Egress (workspace/egress.py): the rules that keep workspaces off the site's networks are made at the
# hub's start (after the site's files: c.Egress.allowed may be there), so a changed allow-list reaches the
# running workspaces at once; each start makes them again. Only the hub: the services load this file too.
# On a swarm they are the nodes' to make (SECURITY.md, "Egress").
from jupyterhub.app import JupyterHub  # noqa: E402
from traitlets.config import Application  # noqa: E402

if Application.initialized() and isinstance(Application.instance(), JupyterHub) and not settings.swarm_manager:
    from workspace.spawner.docker_spawner import guard_egress_at_hub_start  # noqa: E402

    guard_egress_at_hub_start(c, f"http://{gateway}:{settings.hub_port}/hub/api")

# Instructors: c.WorkspaceService.courses (or WORKSPACE_COURSES='{"cs101": {"instructors": ["prof"]}}')
# gives each instructor read-only access to the workspaces of the members of the JupyterHub group of
# the course, the group's member list, and the right to set the course up (its roster and template,
# courses.py). After the site's files, so that a course set there gets its roles too.
for course, spec in c.WorkspaceService.get("courses", {}).items():
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
