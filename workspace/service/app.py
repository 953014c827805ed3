"""The workspace service process, started and proxied by JupyterHub.

    python -m workspace.service

It serves the REST API (workspace/service/api.py) and runs the background
job that finishes saves which failed (a full disk) or were interrupted (a
crash): such homes are never left behind.

Configuration comes from the environment: JupyterHub sets JUPYTERHUB_*, and
the WORKSPACE_* variables are those of workspace/settings.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from urllib.parse import urlparse

from jupyterhub.services.auth import HubOAuthCallbackHandler
from jupyterhub.utils import url_path_join
from tornado import web
from tornado.httpserver import HTTPServer

from .. import lifecycle, uploads
from ..datasets import DatasetRules
from ..db import database
from ..homes import store_for
from ..process import die_with_the_hub
from ..quotas import StorageQuota
from ..resource_types import ResourceType
from ..sandbox import Sandbox
from ..settings import Settings
from ..uploads import UploadPolicy
from . import accounting_api, courses_api, datasets_api, pages, resource_types_api, storage_api, uploads_api
from .api import handlers

log = logging.getLogger("workspace.service")

# Saves that failed are retried this often (seconds).
RETRY_INTERVAL = float(os.environ.get("WORKSPACE_SAVE_RETRY_INTERVAL", "60"))


def make_app(settings: Settings) -> web.Application:
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/workspace/")
    db = database(settings.db_url)
    return web.Application(
        [
            (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
            *pages.handlers(prefix),
            *handlers(prefix),
            *datasets_api.handlers(prefix),
            *uploads_api.handlers(prefix),
            *storage_api.handlers(prefix),
            *accounting_api.handlers(prefix),
            *resource_types_api.handlers(prefix),
            *courses_api.handlers(prefix),
        ],
        prefix=prefix,
        hub_prefix=os.environ.get("JUPYTERHUB_BASE_URL", "/").rstrip("/") + "/hub/",
        hub_api_url=os.environ.get("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api"),
        workspace_db=db,
        workspace_store=store_for(settings.store_dir, clean=False),
        dataset_rules=dataset_rules(),
        upload_policy=upload_policy(),
        sandbox=Sandbox(image=settings.image, deployment=settings.deployment),
        # the policy the hub applies, passed by jupyterhub_config.py
        storage_quota=StorageQuota.from_env(),
        resource_types=[
            ResourceType.from_config(d) for d in json.loads(os.environ.get("WORKSPACE_RESOURCE_TYPES") or "[]")
        ],
        default_resource_type=os.environ.get("WORKSPACE_DEFAULT_RESOURCE_TYPE") or None,
        image=settings.image,
        images=settings.images,
        # users' servers on their own subdomains (workspace/origins.py); None: on the hub's origin
        subdomain_host=os.environ.get("WORKSPACE_SUBDOMAIN_HOST") or None,
        courses=json.loads(os.environ.get("WORKSPACE_COURSES") or "{}"),
        gpu_inventory=[g for g in os.environ.get("WORKSPACE_GPU_INVENTORY", "").split(",") if g],
        cookie_secret=os.urandom(32),
    )


def dataset_rules() -> DatasetRules:
    """The dataset rules, with the thresholds an admin set in the environment."""
    env = os.environ
    rules = DatasetRules()
    if "WORKSPACE_DATASET_SMALL_FILES_RULE" in env:
        rules.small_files_rule = env["WORKSPACE_DATASET_SMALL_FILES_RULE"].lower() not in ("0", "false", "off", "no")
    if "WORKSPACE_DATASET_SMALL_FILES_MIN_TOTAL" in env:
        rules.small_files_min_total = int(env["WORKSPACE_DATASET_SMALL_FILES_MIN_TOTAL"])
    if "WORKSPACE_DATASET_SMALL_FILES_MIN_AVERAGE" in env:
        rules.small_files_min_average = int(env["WORKSPACE_DATASET_SMALL_FILES_MIN_AVERAGE"])
    return rules


def upload_policy() -> UploadPolicy:
    env, policy = os.environ, UploadPolicy()
    if env.get("WORKSPACE_UPLOAD_EXPIRE_AFTER"):
        policy.expire_after = float(env["WORKSPACE_UPLOAD_EXPIRE_AFTER"])
    if env.get("WORKSPACE_UPLOAD_MAX_PENDING"):
        policy.max_pending = int(env["WORKSPACE_UPLOAD_MAX_PENDING"])
    return policy


async def retry_saves(settings: Settings) -> None:
    """Forever: finish the saves that failed or were interrupted; end queued starts whose hub is gone."""
    db = database(settings.db_url)
    store = store_for(settings.store_dir, clean=False)
    expire_after = upload_policy().expire_after
    loop = asyncio.get_running_loop()
    while True:
        try:
            done = await loop.run_in_executor(None, lifecycle.finish_pending_saves, db, store)
            if done:
                log.info("finished %d pending save(s)", len(done))
            gone = await loop.run_in_executor(None, lifecycle.expire_stale_queue, db)
            if gone:
                log.info("%d queued start(s) whose hub had gone left the queue", gone)
            gone = await loop.run_in_executor(None, uploads.expire, store.uploads_dir, expire_after)
            if gone:
                log.info("removed %d abandoned upload(s)", gone)
        except Exception:
            log.exception("retrying pending saves failed")
        await asyncio.sleep(RETRY_INTERVAL)


async def serve(settings: Settings) -> None:
    app = make_app(settings)
    url = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:8082"))
    server = HTTPServer(app, xheaders=True)
    server.listen(url.port, url.hostname)
    log.info("workspace service listening on %s", url.geturl())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Explicit handlers: a process started in the background by a shell
    # inherits SIGINT ignored, and JupyterHub stops services with SIGINT first.
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    retry = asyncio.ensure_future(retry_saves(settings))
    await stop.wait()
    log.info("workspace service stopping")
    retry.cancel()
    server.stop()


def main() -> None:
    # A hub that crashed and restarts starts a new service on the same port.
    die_with_the_hub()
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s")
    asyncio.run(serve(Settings.from_env()))


if __name__ == "__main__":
    main()
