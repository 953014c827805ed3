"""The container that runs a labelling project's Label Studio: the labelling image in team mode.

One container per project, named `<deployment>-labelling-<key>`, on an internal network of its own
(`<deployment>-labelling`: no way out of the host, while the service on the host reaches it), as uid 1000
with every capability dropped, under memory, CPU and process limits. What it keeps (Label Studio's
database, its exports) is a live home of the store (`labelling-<key>`) under a size limit, mounted at
/label-studio; the dataset version it labels is mounted read-only at /inputs/input0. Docker restarts it when it
stops (its engine's restart included); the service starts any that is missing when it starts.

It knows the project's secret (in its environment: the one thing it trusts a user's name from) and
nothing of the hub's: no token, no cookie, no address of the hub's API.
"""

from __future__ import annotations

import logging
import time

import docker

from workspace.errors import UserError

log = logging.getLogger("workspace.labelling")
PORT = 8080
DATA = "/label-studio"
SOURCE = "/inputs/input0"  # Label Studio serves files below its document root (/inputs), not the root
NETWORK_LABEL = "workspace.labelling-network"
UNREACHABLE = "Label Studio's engine did not answer; try again in a minute, or tell your administrator."


class Team:
    """The labelling projects' containers, on the engine of this host."""

    def __init__(self, client_factory, store, deployment: str, image: str, prefix: str, limits: dict):
        self.client_factory, self.store = client_factory, store
        self.deployment, self.image, self.prefix = deployment, image, prefix
        # memory (bytes), cpus, pids, data (bytes of the live home)
        self.limits = limits

    @property
    def network(self) -> str:
        return f"{self.deployment}-labelling"

    def name(self, key: str) -> str:
        return f"{self.deployment}-labelling-{key}"

    @staticmethod
    def live(key: str) -> str:
        return f"labelling-{key}"

    def path(self, key: str) -> str:
        """Where browsers reach the project's Label Studio (the proxy takes this prefix off)."""
        return f"{self.prefix}labelling/{key}"

    def ensure(self, project) -> None:
        """Run the project's container, made if missing and started if stopped (blocking); the user's 503
        when the engine does not answer."""
        try:
            client = self.client_factory()
            try:
                container = client.containers.get(self.name(project.key))
            except docker.errors.NotFound:
                container = self._create(client, project)
            if container.status != "running":
                container.start()
        except docker.errors.DockerException as e:
            log.warning("Label Studio of %s: %s", project.key, e)
            raise UserError(503, UNREACHABLE) from e

    def _create(self, client, project):
        live = self.live(project.key)
        if not self.store.has_live(live):
            self.store.restore(None, live)
        self.store.limit_home(live, self.limits["data"])
        self._network(client)
        return client.containers.create(
            self.image,
            ["workspace-label-studio-team"],
            name=self.name(project.key),
            user="1000:1000",
            environment={
                "WORKSPACE_LABEL_STUDIO_MODE": "team",
                "WORKSPACE_LABEL_STUDIO_PREFIX": self.path(project.key),
                "WORKSPACE_LABEL_STUDIO_SECRET": project.secret,
                "WORKSPACE_LABEL_STUDIO_MANAGER": project.creator,
                "WORKSPACE_LABEL_STUDIO_TITLE": project.title,
                "WORKSPACE_LABEL_STUDIO_CONFIG": project.config,
                "WORKSPACE_LABEL_STUDIO_SOURCE": SOURCE,
                "LABEL_STUDIO_BASE_DATA_DIR": DATA,
            },
            volumes={
                str(self.store.live_path(live)): {"bind": DATA, "mode": "rw"},
                str(self.store.dataset_path(project.dataset_key)): {"bind": SOURCE, "mode": "ro"},
            },
            network=self.network,
            labels={"workspace.deployment": self.deployment, "workspace.labelling": project.key},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=self.limits["memory"],
            memswap_limit=self.limits["memory"],
            nano_cpus=int(self.limits["cpus"] * 1e9),
            pids_limit=self.limits["pids"],
            restart_policy={"Name": "unless-stopped"},
            log_config=docker.types.LogConfig(type="json-file", config={"max-size": "10m", "max-file": "2"}),
        )

    def _network(self, client) -> None:
        try:
            client.networks.get(self.network)
        except docker.errors.NotFound:
            try:
                client.networks.create(
                    self.network,
                    driver="bridge",
                    internal=True,
                    labels={"workspace.deployment": self.deployment, NETWORK_LABEL: "1"},
                    check_duplicate=True,
                )
            except docker.errors.APIError as e:
                if e.status_code != 409:  # made by another start at the same time
                    raise

    def trouble(self, key: str) -> str | None:
        """Why the project's container does not run, from its own last words (a setup that fails, like a
        configuration Label Studio refuses, restarts in a loop); None while it runs or starts (blocking)."""
        try:
            container = self.client_factory().containers.get(self.name(key))
            state = container.attrs["State"]
            if not (state.get("Restarting") or (state.get("Status") == "exited" and state.get("ExitCode"))):
                return None
            return reason_from(container.logs(tail=40).decode(errors="replace"))
        except docker.errors.NotFound:
            return "its container is missing; it is made again when the service starts"
        except docker.errors.DockerException:
            return None

    def address(self, key: str) -> str | None:
        """`http://IP:8080` of the project's running container, or None (blocking)."""
        try:
            container = self.client_factory().containers.get(self.name(key))
        except docker.errors.DockerException:
            return None
        if container.status != "running":
            return None
        ip = (container.attrs["NetworkSettings"]["Networks"].get(self.network) or {}).get("IPAddress")
        return f"http://{ip}:{PORT}" if ip else None


def remove_networks(client, deployment: str) -> int:
    """The labelling network of a deployment, once no container uses it (`make down`, the tests' hubs)."""
    gone = 0
    for network in client.networks.list(filters={"label": [f"workspace.deployment={deployment}", NETWORK_LABEL]}):
        try:
            network.remove()
            gone += 1
        except docker.errors.APIError:
            pass  # a container still on it
    return gone


def reason_from(log: str) -> str:
    """What a container that fails to start last said: the setup's own sentence (`CommandError: …`) if it
    said one, else its last line; bounded."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith("CommandError:")]
    return (said or lines or ["(no output)"])[-1][:300]


class Addresses:
    """The containers' addresses, asked of the engine at most every few seconds per project (the proxy
    asks at every request: images of a task page come by the dozen)."""

    def __init__(self, team: Team, max_age: float = 5.0):
        self.team, self.max_age = team, max_age
        self.kept: dict[str, tuple[float, str | None]] = {}

    def get(self, key: str) -> str | None:
        now = time.monotonic()
        hit = self.kept.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        address = self.team.address(key)
        if len(self.kept) > 10_000:
            self.kept.clear()
        self.kept[key] = (now + (self.max_age if address else 1.0), address)
        return address
