"""Settings of one deployment, read from the environment and the data directory.

Shared by `jupyterhub_config.py` and the setup commands so that both agree on
ports, paths and secrets. Every variable is optional. (The WORKSPACE_*
shorthands of options, such as WORKSPACE_RESOURCE_TYPES or WORKSPACE_CULL_*,
are in workspace/config.py and docs/configuration.md.)

- `WORKSPACE_DATA_DIR`        all state: database, homes, logs, secrets (default `./data`)
- `WORKSPACE_PORT`            public port of the proxy on 127.0.0.1 (default 8000)
- `WORKSPACE_IP`              public address of the proxy (default 127.0.0.1)
- `WORKSPACE_HUB_PORT`        hub port on the Docker bridge address (default 8081)
- `WORKSPACE_PROXY_API_PORT`  proxy's REST API port on 127.0.0.1 (default 8001)
- `WORKSPACE_ADMIN_USER`      the admin's user name (default `admin`)
- `WORKSPACE_ADMIN_PASSWORD`  the admin's password (32+ characters)
- `WORKSPACE_USER_PASSWORD`   the password every other user logs in with (8+ characters)
- `WORKSPACE_IMAGE`           single-user image (default `workspace-base:latest`)
- `WORKSPACE_DEPLOYMENT`      name that labels this deployment's containers (default `workspace`)
- `WORKSPACE_BUILD_IMAGES`    the image definitions (`images/*`) `make images`/`make up`/`make test` build,
                              comma-separated (default `base,scientific,labelling`; `pytorch` adds 5 GB of CUDA)
- `WORKSPACE_IMAGES`          images a user may choose, comma-separated (default: WORKSPACE_IMAGE and
                              the other built ones)
- `WORKSPACE_STORE_DIR`       the home store (default `<data dir>/store`; a btrfs image is
                              mounted there by `make up` when the data dir is not on btrfs)
- `WORKSPACE_STORE_SIZE`      size of that sparse btrfs image (default 200G; takes only what is used)
- `WORKSPACE_SERVICE_PORT`    port of the workspace service (REST API) on 127.0.0.1 (default 8082)
- `WORKSPACE_ROUTER_PORT`     port of the deployments' router (`/serve/`, #33) on 127.0.0.1 (default 8083)
- `WORKSPACE_DB_URL`          the workspace database (default SQLite `<data dir>/workspace.sqlite`)
- `WORKSPACE_HUB_DB_URL`      JupyterHub's own database (default SQLite `<data dir>/jupyterhub.sqlite`);
                              production: PostgreSQL for both, e.g. `postgresql+psycopg://hub@db/jupyterhub`
- `WORKSPACE_SECRET_KEY_FILE` the key that seals the secrets in the workspace database (SSH private keys,
                              webhook secrets; workspace/vault.py), made at the first start (default
                              `<data dir>/secrets/workspace.key`, 0600); keep it out of the database's backups
- `WORKSPACE_SWARM_MANAGER`   a Docker Swarm's manager (e.g. `unix:///run/manager.sock`,
                              `tcp://10.0.0.1:2376`): workspaces run as services on its nodes
                              (SwarmWorkspaceSpawner; docs/swarm.md); unset: containers on this host
- `WORKSPACE_SSH_PORT`        port of the SSH gateway (default 2222; `ssh -p 2222 you+workspace@host`,
                              docs/ssh.md); 0: no gateway and no sshd in the workspaces
- `WORKSPACE_SSH_IP`          address the SSH gateway listens on (default: WORKSPACE_IP; a campus: 0.0.0.0)
- `WORKSPACE_AUTH`            `native`: self sign-up with an institution e-mail and admin approval
                              (workspace/auth.py); unset: one shared password (for trying only)
- `WORKSPACE_SUBDOMAIN_HOST`  users' servers on their own subdomains of this origin, like
                              `http://localhost:8000` (make up's default; `WORKSPACE_SUBDOMAIN_HOST=`
                              for one origin); a campus: `https://jupyter.uni.example.edu` with
                              wildcard DNS and TLS (SECURITY.md)

Passwords and the admin API token that are not set are generated once and
kept in `<data dir>/secrets.env` (mode 600).

The data directory is the hub's alone (#28): `data_dir.close()` makes it 0700 and what the hub keeps
in it 0600 (0700 directories) at every start, and every process we start runs with a umask of 077.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

# WORKSPACE_PROXY_AUTH_TOKEN: what the hub and the proxy `make up` runs apart from it share (setup/proxy.py)
SECRET_NAMES = (
    "WORKSPACE_ADMIN_PASSWORD",
    "WORKSPACE_USER_PASSWORD",
    "WORKSPACE_ADMIN_API_TOKEN",
    "WORKSPACE_PROXY_AUTH_TOKEN",
)


def _generate(name: str) -> str:
    if name == "WORKSPACE_USER_PASSWORD":
        # short enough to read out to a class, long enough for the authenticator
        return secrets.token_urlsafe(9)
    return secrets.token_urlsafe(33)  # admin password needs 32+ characters


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                key, value = line.split("=", 1)
                values[key.strip()] = value.strip()
    return values


@dataclass
class Settings:
    data_dir: Path
    ip: str = "127.0.0.1"
    port: int = 8000
    hub_port: int = 8081
    proxy_api_port: int = 8001
    service_port: int = 8082
    router_port: int = 8083  # the deployments' router (workspace/router/)
    admin_user: str = "admin"
    image: str = "workspace-base:latest"
    deployment: str = "workspace"
    images: list[str] = field(default_factory=list)
    build_images: list[str] = field(default_factory=list)
    store_dir: Path | None = None
    store_size: str = "200G"
    subdomain_host: str = ""  # users' servers on <user>.<host> (workspace/origins.py); "" for one origin
    db_url: str = ""
    secret_key_file: Path | None = None  # seals the database's secrets (workspace/vault.py)
    hub_db_url: str = ""
    swarm_manager: str = ""  # a Docker Swarm manager's URL: workspaces run as services on its nodes
    ssh_ip: str = "127.0.0.1"
    ssh_port: int = 2222  # the SSH gateway's; 0: none
    secrets: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ=os.environ, base: Path | None = None) -> "Settings":
        base = base or Path.cwd()
        data_dir = Path(environ.get("WORKSPACE_DATA_DIR") or base / "data")
        if not data_dir.is_absolute():
            data_dir = base / data_dir
        s = cls(
            data_dir=data_dir.resolve(),
            ip=environ.get("WORKSPACE_IP", "127.0.0.1"),
            port=int(environ.get("WORKSPACE_PORT", 8000)),
            hub_port=int(environ.get("WORKSPACE_HUB_PORT", 8081)),
            proxy_api_port=int(environ.get("WORKSPACE_PROXY_API_PORT", 8001)),
            service_port=int(environ.get("WORKSPACE_SERVICE_PORT", 8082)),
            router_port=int(environ.get("WORKSPACE_ROUTER_PORT", 8083)),
            admin_user=environ.get("WORKSPACE_ADMIN_USER", "admin"),
            image=environ.get("WORKSPACE_IMAGE", "workspace-base:latest"),
            deployment=environ.get("WORKSPACE_DEPLOYMENT", "workspace"),
            store_size=environ.get("WORKSPACE_STORE_SIZE", "200G"),
        )
        s.subdomain_host = environ.get("WORKSPACE_SUBDOMAIN_HOST", "").rstrip("/")
        s.build_images = [
            i.strip() for i in environ.get("WORKSPACE_BUILD_IMAGES", "base,scientific,labelling").split(",")
        ]
        s.build_images = [i for i in s.build_images if i]
        built = [f"workspace-{name}:latest" for name in s.build_images]
        s.images = [i.strip() for i in environ.get("WORKSPACE_IMAGES", "").split(",") if i.strip()] or [
            s.image,
            *(i for i in built if i != s.image),
        ]
        s.store_dir = Path(environ.get("WORKSPACE_STORE_DIR") or s.data_dir / "store")
        s.db_url = environ.get("WORKSPACE_DB_URL") or f"sqlite:///{s.data_dir / 'workspace.sqlite'}"
        s.secret_key_file = Path(environ.get("WORKSPACE_SECRET_KEY_FILE") or s.data_dir / "secrets" / "workspace.key")
        s.swarm_manager = environ.get("WORKSPACE_SWARM_MANAGER", "")
        s.ssh_ip = environ.get("WORKSPACE_SSH_IP") or s.ip
        s.ssh_port = int(environ.get("WORKSPACE_SSH_PORT") or 2222)
        s.hub_db_url = environ.get("WORKSPACE_HUB_DB_URL") or f"sqlite:///{s.data_dir / 'jupyterhub.sqlite'}"
        stored = read_env_file(s.secrets_file)
        s.secrets = {n: environ.get(n) or stored.get(n, "") for n in SECRET_NAMES}
        return s

    @property
    def secrets_file(self) -> Path:
        return self.data_dir / "secrets.env"

    @property
    def url(self) -> str:
        """Where the hub answers: the subdomain host's origin when users have their own."""
        return self.subdomain_host or f"http://{self.ip}:{self.port}"

    def path(self, *parts: str) -> Path:
        return self.data_dir.joinpath(*parts)

    def generate_missing_secrets(self) -> list[str]:
        """Generate the secrets that are unset, store them, and return their names."""
        missing = [n for n in SECRET_NAMES if not self.secrets.get(n)]
        for name in missing:
            self.secrets[name] = _generate(name)
        if missing:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.secrets_file.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write("# Generated by `make up`; environment variables of the same name win.\n")
                for name in SECRET_NAMES:
                    f.write(f"{name}={self.secrets[name]}\n")
            os.replace(tmp, self.secrets_file)
        return missing
