"""The workspace service process, started and proxied by JupyterHub.

    python -m workspace.service --hub-config=/path/to/jupyterhub_config.py

It serves the REST API (workspace/service/api.py) and the pages, and runs the
background job that finishes saves which failed (a full disk) or were
interrupted (a crash): such homes are never left behind.

It is a traitlets Application configured as the hub is (workspace/config.py):
the WORKSPACE_* variables, then the hub's own jupyterhub_config.py, so the
pages and the API apply the resource types, quotas and rules the hub does.
JupyterHub itself sets the JUPYTERHUB_* variables (the service's URL, prefix
and token).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuthCallbackHandler
from jupyterhub.utils import url_path_join
from tornado import web
from tornado.httpserver import HTTPServer
from traitlets import Bool, Dict, Float, Integer, Unicode
from traitlets.config import Application

from workspace import config, lifecycle, replicas, webhooks
from workspace.datasets import DatasetRules
from workspace.db import database
from workspace.deployments.controller import Controller, Hub
from workspace.deployments.policy import DeploymentPolicy
from workspace.images import user as user_images
from workspace.images.builds import ImageBuilder
from workspace.labelling import projects as labelling_projects
from workspace.labelling.policy import LabellingPolicy
from workspace.labelling.team import Addresses, Team
from workspace.limits import queue
from workspace.limits.quotas import StorageQuota
from workspace.prewarm.job import Prewarms
from workspace.process import die_with_the_hub
from workspace.service import (
    accounting_api,
    activity_api,
    courses_api,
    datasets_api,
    deployments_api,
    deployments_page,
    docs_page,
    images_api,
    images_page,
    labelling_api,
    labelling_page,
    labelling_proxy,
    language_page,
    outputs_api,
    outputs_page,
    pages,
    prewarm_api,
    resource_types_api,
    ssh_keys_api,
    ssh_page,
    storage_api,
    streams,
    sweeps_api,
    sweeps_page,
    tasks_api,
    uploads_api,
    webhook_api,
    workspaces_page,
)
from workspace.service.api import handlers
from workspace.service.metrics_api import handlers as metrics_handlers
from workspace.spawner.docker_spawner import engine_client, engine_docker
from workspace.spawner.options import SpawnerOptions
from workspace.store.agent_store import read_token
from workspace.store.homes import BtrfsHomeStore, HomeStore, store_for
from workspace.store.nodes import NodeStores
from workspace.uploads import staging as uploads
from workspace.uploads.receiving import Receiving
from workspace.uploads.sandbox import Sandbox
from workspace.uploads.staging import UploadPolicy

log = logging.getLogger("workspace.service")


class WorkspaceService(Application):
    name = "workspace-service"
    description = "The workspace service: the REST API and the pages of workspaces, datasets, storage and courses."
    classes = [StorageQuota, DatasetRules, UploadPolicy, ImageBuilder, DeploymentPolicy, LabellingPolicy]
    aliases = {"hub-config": "WorkspaceService.hub_config"}

    hub_config = Unicode(
        "",
        config=True,
        help="""The hub's configuration file (jupyterhub_config.py), which the hub
        passes in the service's command line: its options (resource types,
        quotas, dataset rules, courses) are the ones the service applies.""",
    )
    courses = Dict(
        config=True,
        help="""Instructors per course (a JupyterHub group), like
        {"cs101": {"instructors": ["prof"]}}: they set the course up from its
        roster and read (never change) its students' workspaces.
        jupyterhub_config.py gives them the matching roles.""",
    )
    retry_interval = Float(
        60,
        config=True,
        help="""Seconds between two attempts to finish the saves that failed (a
        full disk) or were interrupted (a crash), and to expire abandoned
        uploads and queued starts whose hub is gone.""",
    )
    authenticate_prometheus = Bool(
        True,
        config=True,
        help="""Whether /services/workspace/metrics (Prometheus) asks for a token with
        JupyterHub's `read:metrics` scope, as the hub's own /hub/metrics does
        (`JupyterHub.authenticate_prometheus`). False: anyone who reaches it may
        read it (the figures name no user).""",
    )

    docs_dir = Unicode(
        "",
        config=True,
        help="""The built manual, served at /services/workspace/docs/ (a folder with one
        build of the site per language: en/, zh_CN/). Empty: the repository's
        docs/_build/html, which `make docs` (and `make up`) build.""",
    )

    max_followers_per_user = Integer(
        streams.DEFAULT_LIMIT,
        min=1,
        config=True,
        help="""How many logs (a task's, an image build's) one user may follow
        (`?follow=1`) at once; one more is refused with a 429. A follower ends
        when its client goes.""",
    )

    def initialize(self, argv=None):
        config.load(self, argv)
        self.spawner = SpawnerOptions(self.config)
        self.storage_quota = StorageQuota(parent=self)
        self.dataset_rules = DatasetRules(parent=self)
        self.upload_policy = UploadPolicy(parent=self)
        self.deployment_policy = DeploymentPolicy(parent=self)
        self.labelling_policy = LabellingPolicy(parent=self)
        self.image_builder = ImageBuilder(
            parent=self,
            deployment=self.spawner.deployment,
            log_root=self.spawner.execution_log_root,
        )

    @property
    def image_refs(self) -> dict[str, str]:
        """{the name a user chooses: the engine's image} of the site's images."""
        allowed = self.spawner.allowed_images
        if isinstance(allowed, dict) and allowed:
            return dict(allowed)
        if isinstance(allowed, list) and allowed:
            return {i: i for i in allowed}
        return {self.spawner.image: self.spawner.image}

    @property
    def images(self) -> list[str]:
        return list(self.image_refs)

    @functools.cached_property
    def home_stores(self) -> HomeStores:
        """The home stores, made once: the handlers find them in the app's settings, the retries use them."""
        return home_stores(self.spawner)

    def make_app(self) -> web.Application:
        prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/workspace/")
        return web.Application(
            self.routes(prefix),
            prefix=prefix,
            # an address no handler has: the page's 404 (or the API's JSON one), in the user's language
            default_handler_class=pages.NotFoundPage,
            **self.hub_settings(),
            **self.store_settings(),
            **self.start_settings(),
            **self.image_settings(),
            **self.course_settings(),
            **self.labelling_settings(prefix),
            followers=streams.Followers(self.max_followers_per_user),  # the logs followed now, per user
            deployment_policy=self.deployment_policy,
            webhook_networks=webhooks.networks(self.spawner.webhook_networks),
            cookie_secret=os.urandom(32),
        )

    def routes(self, prefix: str) -> list:
        """Every page and API of the service, under `prefix`."""
        return [
            (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
            *pages.handlers(prefix),
            *workspaces_page.handlers(prefix),
            *language_page.handlers(prefix),
            *docs_page.handlers(prefix, Path(self.docs_dir) if self.docs_dir else docs_page.DOCS_DIR),
            *outputs_page.handlers(prefix),
            *handlers(prefix),
            *datasets_api.handlers(prefix),
            *uploads_api.handlers(prefix),
            *storage_api.handlers(prefix),
            *accounting_api.handlers(prefix),
            *activity_api.handlers(prefix),
            *resource_types_api.handlers(prefix),
            *courses_api.handlers(prefix),
            *prewarm_api.handlers(prefix),
            *outputs_api.handlers(prefix),
            *ssh_keys_api.handlers(prefix),
            *ssh_page.handlers(prefix),
            *tasks_api.handlers(prefix),
            *sweeps_api.handlers(prefix),
            *sweeps_page.handlers(prefix),
            *images_api.handlers(prefix),
            *images_page.handlers(prefix),
            *webhook_api.handlers(prefix),
            *deployments_api.handlers(prefix),
            *deployments_page.handlers(prefix),
            *labelling_api.handlers(prefix),
            *labelling_proxy.handlers(prefix),
            *labelling_page.handlers(prefix),
            *metrics_handlers(prefix, self.authenticate_prometheus),
        ]

    def hub_settings(self) -> dict:
        """Where the hub is, and what it configures that the pages show."""
        return dict(
            hub_prefix=os.environ.get("JUPYTERHUB_BASE_URL", "/").rstrip("/") + "/hub/",
            hub_api_url=os.environ.get("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api"),
            # users' servers on their own subdomains (workspace/origins.py); None: on the hub's origin
            subdomain_host=self.config.JupyterHub.get("subdomain_host") or None,
            # what the hub's pages are given (the navigation they share: NativeAuthenticator's pages)
            template_vars=dict(self.config.JupyterHub.get("template_vars") or {}),
            hub_config=self.config,  # what the hub configures for others: the SSH gateway's address and keys
        )

    def store_settings(self) -> dict:
        """The database and the home stores, and the rules of what users keep there."""
        spawner, stores = self.spawner, self.home_stores
        return dict(
            workspace_db=database(spawner.db_url, spawner.secret_key_file),
            workspace_store=stores.central,
            node_stores=stores.nodes,
            record_store=stores.record,
            own_node_stores=spawner.spawner_class.nodes_have_own_stores,  # a swarm's: replicated to the hub's
            dataset_rules=self.dataset_rules,
            upload_policy=self.upload_policy,
            sandbox=Sandbox(image=spawner.image, deployment=spawner.deployment),
            receiving=Receiving(),  # the uploads being received: one chunk at a time each, hashed as written
            storage_quota=self.storage_quota,
        )

    def start_settings(self) -> dict:
        """What a start may choose and where it runs: the resource types, the engine's nodes and logs."""
        spawner = self.spawner
        return dict(
            resource_types=spawner.parsed_resource_types(),
            default_resource_type=spawner.default_resource_type,
            # the nodes starts are placed on, with their GPUs (blocking: a swarm's manager is asked)
            engine_nodes=functools.partial(spawner.spawner_class.engine_nodes, spawner),
            # a running task's log, from the engine (blocking), and where the hub keeps finished ones
            engine_log=functools.partial(spawner.spawner_class.engine_log, spawner),
            execution_log_root=spawner.execution_log_root,
            max_runs_per_user=spawner.max_runs_per_user,  # a sweep is refused whole past it (#31)
        )

    def course_settings(self) -> dict:
        """The courses' instructors, and their pre-warms where nodes have stores of their own (a swarm)."""
        spawner = self.spawner
        prewarms = None
        if spawner.spawner_class.nodes_have_own_stores:
            prewarms = Prewarms(
                database(spawner.db_url, spawner.secret_key_file),
                self.home_stores.nodes,
                store_of_record(self),
                spawner.parsed_resource_types(),
                lambda name: self.image_refs.get(name, name) if name else spawner.image,
                # the images are copied from the manager's engine, where a start resolves its image's ID
                functools.partial(engine_client, spawner),
            )
        return dict(courses=self.courses, prewarms=prewarms)

    def labelling_settings(self, prefix: str) -> dict:
        """The courses' labelling projects (#36): their Label Studios' containers and where they answer."""
        # one client for the process (the proxy asks where a project answers every few seconds)
        team = Team(
            functools.cache(functools.partial(engine_docker, self.spawner)),
            self.home_stores.central,
            self.spawner.deployment,
            self.labelling_policy.image,
            prefix,
            self.labelling_policy.limits(),
        )
        return dict(labelling_policy=self.labelling_policy, labelling_team=team, labelling_addresses=Addresses(team))

    def image_settings(self) -> dict:
        """The site's images, the users' images and their builder."""
        spawner = self.spawner
        return dict(
            image=spawner.image,
            images=self.images,
            image_refs=self.image_refs,
            # the users' images are offered where workspaces run on the engine that builds them (not a swarm)
            user_images_offered=getattr(spawner.spawner_class, "offers_user_images", False),
            image_builder=self.image_builder,
            image_build_wake=asyncio.Event(),  # set by a build request: the builder looks at once
            # what each image holds (blocking: the engine is asked; cached a minute)
            describe_images=functools.partial(spawner.spawner_class.describe_images, spawner),
        )


@dataclass
class HomeStores:
    """The home stores this process reaches."""

    central: HomeStore  # this host's (the hub's)
    nodes: NodeStores  # each node's: a swarm's nodes have their own; a single host's is `central`
    record: BtrfsHomeStore | None  # the store of record, where saved outputs are copied (None: none configured)


def home_stores(spawner) -> HomeStores:
    central = store_for(spawner.store_root, clean=False, backend=spawner.store_backend)
    record = store_for(spawner.record_store_root, clean=False, backend="btrfs") if spawner.record_store_root else None
    return HomeStores(central, node_stores(spawner, central), record)


def store_of_record(service: WorkspaceService):
    """The store of record as this process reaches it: `record_store_root`'s, else on a swarm the hub's own
    store (through its agent where the nodes have agents); None on a single host without one."""
    spawner, stores = service.spawner, service.home_stores
    if stores.record is not None or not spawner.spawner_class.nodes_have_own_stores:
        return stores.record
    agent = getattr(spawner, "store_agent_url", "")
    return stores.nodes.store(spawner.store_root, agent) if agent else stores.central


def node_stores(spawner, central) -> NodeStores:
    """Every node's store as this process reaches it (mounted, or through the node's store agent)."""
    token = read_token(getattr(spawner, "store_agent_token_file", ""))
    return NodeStores(central, functools.partial(spawner.spawner_class.engine_nodes, spawner), token)


async def retry_saves(service: WorkspaceService) -> None:
    """Forever: finish the saves that failed or were interrupted; end queued starts whose hub is gone."""
    spawner = service.spawner
    db = database(spawner.db_url, spawner.secret_key_file)
    store = service.home_stores.central
    expire_after = service.upload_policy.expire_after
    # each node's store (a swarm's nodes have their own; a single host's is `store`)
    stores = service.home_stores.nodes
    record = store_of_record(service)  # the store of record: outputs whose save did not replicate them
    loop = asyncio.get_running_loop()
    while True:
        try:
            done = await loop.run_in_executor(
                None, lifecycle.finish_pending_saves, db, store, None, None, stores.of, record
            )
            if done:
                log.info("finished %d pending save(s)", len(done))
            gone = await loop.run_in_executor(None, queue.expire_stale_queue, db)
            if gone:
                log.info("%d queued start(s) whose hub had gone left the queue", gone)
            if record is not None:
                own = await loop.run_in_executor(None, stores.own)
                for node, node_store in own or [(lifecycle.NODE, store)]:
                    sent = await loop.run_in_executor(
                        None, functools.partial(replicas.replicate_pending, db, node_store, record, node=node)
                    )
                    if sent:
                        log.info("%d output(s) of %s reached the store of record", sent, node)
                purged = await loop.run_in_executor(None, replicas.purge_deleted_replicas, db, record)
                for node, node_store in own:
                    purged += await loop.run_in_executor(None, replicas.purge_deleted_copies, db, node_store)
                if purged:
                    log.info("removed %d copies of deleted outputs", purged)
            gone = await loop.run_in_executor(None, uploads.expire, store.uploads_dir, expire_after)
            if gone:
                log.info("removed %d abandoned upload(s)", gone)
        except Exception:
            log.exception("retrying pending saves failed")
        await asyncio.sleep(service.retry_interval)


async def build_images(builder: ImageBuilder, db, wake: asyncio.Event) -> None:
    """Forever: build the queued images users defined, one at a time, the users in turn (user_images.build_order)."""
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(1, thread_name_prefix="workspace-image-build")  # hours long: not the shared pool
    try:
        await loop.run_in_executor(None, builder.clean_up, db)
    except Exception:
        log.exception("cleaning up interrupted image builds failed")
    while True:
        try:
            job = await loop.run_in_executor(None, user_images.next_queued, db)
            if job is None:
                wake.clear()
                try:
                    await asyncio.wait_for(wake.wait(), timeout=30)
                except asyncio.TimeoutError:
                    pass
                continue
            log.info("building image %s (build %d)", job["name"], job["build"])
            result = await loop.run_in_executor(pool, builder.build, job, db)
            old = await loop.run_in_executor(None, user_images.finish, db, job["id"], job["build"], result)
            log.info("image %s: %s", job["name"], "built" if result.get("ok") else result.get("error"))
            if old:
                await loop.run_in_executor(None, builder.remove_image, old)
        except Exception:
            log.exception("the image builder failed; trying again in a minute")
            await asyncio.sleep(60)


def start_labelling(app: web.Application) -> None:
    """Run the Label Studio of every labelling project that has none running (one made before the engine's
    restart, or whose container was removed): its data is kept in the store, its container is remade."""
    db, team = app.settings["workspace_db"], app.settings["labelling_team"]
    with db.session() as s:
        found = labelling_projects.all_projects(s)
    for project in found:
        try:
            team.ensure(project)
        except Exception as e:  # one project's failure stops no other, nor the service
            log.warning("could not start the Label Studio of %s: %s", project.key, e)


async def serve(service: WorkspaceService) -> None:
    app = service.make_app()
    url = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:8082"))
    # a body is read in pieces of up to 1 MiB (tornado's default: 64 KiB), so an upload's gigabytes cost
    # fewer rounds of Python per byte (benchmarks/datasets.py)
    server = HTTPServer(app, xheaders=True, chunk_size=1 << 20)
    server.listen(url.port, url.hostname)
    log.info("workspace service listening on %s", url.geturl())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Explicit handlers: a process started in the background by a shell
    # inherits SIGINT ignored, and JupyterHub stops services with SIGINT first.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    retry = asyncio.ensure_future(retry_saves(service))
    # the deployments' replicas (#33), started and stopped through the hub's API with the service's token
    hub = Hub(
        os.environ.get("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api"),
        os.environ.get("JUPYTERHUB_API_TOKEN", ""),
    )
    controller = asyncio.ensure_future(Controller(app.settings["workspace_db"], service.deployment_policy, hub).run())
    # in the background: the service answers while the engine remakes the courses' Label Studios
    labelling = loop.run_in_executor(None, start_labelling, app)
    builds = asyncio.ensure_future(
        build_images(app.settings["image_builder"], app.settings["workspace_db"], app.settings["image_build_wake"])
    )
    await stop.wait()
    log.info("workspace service stopping")
    retry.cancel()
    builds.cancel()
    labelling.cancel()
    controller.cancel()
    # a build under way is stopped (its thread would hold the process up to the end of the build); the next
    # start records it as interrupted
    await loop.run_in_executor(None, app.settings["image_builder"].abort)
    server.stop()


def main(argv=None) -> None:
    # A hub that crashed and restarts starts a new service on the same port.
    die_with_the_hub()
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s")
    service = WorkspaceService()
    service.initialize(sys.argv[1:] if argv is None else argv)
    asyncio.run(serve(service))


if __name__ == "__main__":
    main()
