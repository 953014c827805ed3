"""The deployments' controller (#33): a loop in the workspace service that keeps each deployment's replicas
as its records want them (rollout.py decides; this module reads, checks, writes and calls the hub).

Each round, for every deployment with work to do (one at a time per deployment, under a lease in its
record, as replicas.py's sender holds one): its replicas' readiness paths are asked (`GET`, 2 s, only the
status is read: the app is its owner's code), the plan is made and written, then replicas' servers are
started (`POST /users/OWNER/servers/serve-<hex>` with the service's token) or stopped and removed. A start
the hub refuses (a full queue's 409, a limit) is tried again later, and its sentence is the deployment's
message.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import secrets
from dataclasses import dataclass
from functools import partial
from urllib.parse import quote

from sqlalchemy import delete, func, or_, select
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from workspace import i18n, process
from workspace.db import Database, utcnow
from workspace.executions import Execution, find_workspace

from . import rollout
from .policy import DeploymentPolicy
from .records import Deployment, DeploymentTraffic, Replica

log = logging.getLogger("workspace.deployments")

LEASE = dt.timedelta(seconds=30)
CHECK_TIMEOUT = 2.0  # s, a readiness check
CONCURRENCY = 16  # deployments worked on at once


@dataclass
class Work:
    """One deployment as a round reads it: the view to plan with, and what the I/O needs beside it."""

    view: rollout.DeploymentView
    owner: str
    key: str
    ready_paths: dict[int, str]  # version -> its readiness path


class Hub:
    """The hub's REST API, with the service's own token (its role may start and stop users' servers)."""

    def __init__(self, api_url: str, token: str):
        self.api_url, self.token = api_url.rstrip("/"), token

    async def call(self, method: str, path: str, body=None) -> tuple[int, dict | None]:
        req = HTTPRequest(
            self.api_url + path,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            body=None if body is None else json.dumps(body),
            allow_nonstandard_methods=True,
            request_timeout=60,
        )
        resp = await AsyncHTTPClient().fetch(req, raise_error=False)
        try:
            return resp.code, json.loads(resp.body) if resp.body else None
        except ValueError:
            return resp.code, None


async def ready(address: str, path: str) -> bool:
    """Whether the app at `address` answers `path` with a status below 400 (its body is not read)."""
    req = HTTPRequest(
        f"http://{address}{path}",
        connect_timeout=CHECK_TIMEOUT,
        request_timeout=CHECK_TIMEOUT,
        follow_redirects=False,
        streaming_callback=lambda chunk: None,  # the body is the app's: never kept
        headers={"User-Agent": "workspace-deployments-check"},
    )
    try:
        resp = await AsyncHTTPClient().fetch(req, raise_error=False)
    except Exception:
        return False
    return 200 <= resp.code < 400


class Controller:
    def __init__(self, db: Database, policy: DeploymentPolicy, hub: Hub, checker=ready, owner: str | None = None):
        self.db, self.policy, self.hub, self.checker = db, policy, hub, checker
        self.owner = owner or process.identity()  # the lease's holder
        self.rules = rollout.Rules(
            ready_timeout=policy.ready_timeout,
            failures_before_giving_up=policy.failures_before_giving_up,
            drain_seconds=policy.drain_seconds,
            restart_backoff_max=policy.restart_backoff_max,
        )

    async def blocking(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(None, partial(fn, *args))

    async def run(self) -> None:
        """Forever: a round each `check_interval` (at most a second apart)."""
        interval = min(1.0, self.policy.check_interval)
        while True:
            try:
                await self.round()
            except Exception:
                log.exception("a round of the deployments' controller failed")
            await asyncio.sleep(interval)

    async def round(self) -> None:
        ids = await self.blocking(self._with_work)
        limit = asyncio.Semaphore(CONCURRENCY)

        async def one(dep_id: int) -> None:
            async with limit:
                try:
                    await self.reconcile(dep_id)
                except Exception:
                    log.exception("deployment %s: this round failed", dep_id)

        await asyncio.gather(*(one(i) for i in ids))

    def _with_work(self) -> list[int]:
        """The deployments that run, or have replicas to stop, or records to remove."""
        with self.db.session() as s:
            running = select(Deployment.id).where(or_(Deployment.running.is_(True), Deployment.deleted.is_not(None)))
            with_replicas = select(Replica.deployment_id).distinct()
            return sorted(set(s.scalars(running)) | set(s.scalars(with_replicas)))

    async def reconcile(self, dep_id: int) -> None:
        work = await self.blocking(self._claim_and_load, dep_id)
        if work is None:
            return
        await self._check(work)
        plan = rollout.plan(work.view, utcnow(), self.rules)
        servers = await self.blocking(self._write, dep_id, plan)
        for replica in plan.ask:
            await self._start(work, replica)
        for replica in plan.stop:
            await self._stop(work, replica.server)
        if servers:
            log.info("deployment %s/%s: %d new replica(s)", work.owner, dep_id, len(servers))

    # -- reading ------------------------------------------------------------------------

    def _claim_and_load(self, dep_id: int) -> Work | None:
        now = utcnow()
        with self.db.session() as s:
            dep = s.get(Deployment, dep_id)
            if dep is None:
                return None
            held = dep.lease_owner not in (None, self.owner) and dep.lease_until and dep.lease_until > now
            if held and not process.gone(dep.lease_owner):
                return None
            dep.lease_owner, dep.lease_until = self.owner, now + LEASE
            runs = self._runs(s, dep)
            view = rollout.DeploymentView(
                id=dep.id,
                running=dep.running,
                deleted=dep.deleted is not None,
                replicas=dep.replicas,
                serving=dep.serving,
                rolling=dep.rolling,
                rolling_since=dep.rolling_since,
                asleep=dep.asleep,
                woken=dep.woken,
                idle_seconds=dep.idle_seconds,
                last_request=dep.last_request,
                failed_starts={v.number: v.failed_starts or 0 for v in dep.versions},
                replica_list=[
                    rollout.ReplicaView(
                        id=r.id,
                        server=r.server,
                        version=r.version,
                        state=r.state,
                        address=r.address,
                        run_state=runs.get(r.server, (None, None))[0],
                        run_detail=runs.get(r.server, (None, None))[1],
                        restarts=r.restarts,
                        failed_checks=r.failed_checks,
                        created=r.created,
                        ready_at=r.ready_at,
                        not_before=r.not_before,
                    )
                    for r in dep.replica_records
                ],
            )
            return Work(view, dep.owner, dep.key, {v.number: v.ready_path for v in dep.versions})

    @staticmethod
    def _runs(session, dep: Deployment) -> dict[str, tuple[str, str | None]]:
        """{replica server: (its newest execution's state, why it ended)}."""
        ws = find_workspace(session, dep.owner, dep.workspace)
        if ws is None:
            return {}
        newest = (
            select(Execution.server, func.max(Execution.number).label("number"))
            .where(Execution.workspace_id == ws.id, Execution.server.is_not(None))
            .group_by(Execution.server)
            .subquery()
        )
        rows = session.execute(
            select(Execution.server, Execution.state, Execution.stop_detail, Execution.error)
            .join(
                newest,
                (Execution.server == newest.c.server) & (Execution.number == newest.c.number),
            )
            .where(Execution.workspace_id == ws.id)
        )
        return {server: (state, i18n.said(i18n.DEFAULT, detail) or error) for server, state, detail, error in rows}

    async def _check(self, work: Work) -> None:
        """This round's readiness checks: replicas whose app has an address and whose execution runs."""
        todo = [
            r
            for r in work.view.replica_list
            if r.state in ("starting", "ready", "unready") and r.address and r.run_state == "running"
        ]
        results = await asyncio.gather(*(self.checker(r.address, work.ready_paths[r.version]) for r in todo))
        for r, ok in zip(todo, results):
            r.check = ok

    # -- writing ------------------------------------------------------------------------

    def _write(self, dep_id: int, plan: rollout.Plan) -> list[str]:
        """The plan into the records; the new replicas' servers."""
        with self.db.session() as s:
            dep = s.get(Deployment, dep_id)
            if plan.forget:
                s.execute(delete(Replica).where(Replica.id.in_(plan.forget)))
            for replica_id, fields in plan.changes.items():
                replica = s.get(Replica, replica_id)
                if replica is not None:
                    for name, value in fields.items():
                        setattr(replica, name, value)
            for number, fields in plan.versions.items():
                version = dep.version(number)
                for name, value in fields.items():
                    setattr(version, name, value)
            for name, value in plan.deployment.items():
                setattr(dep, name, value)
            dep.restarts = (dep.restarts or 0) + plan.restarted
            servers = []
            for version, restarts, not_before in plan.new:
                server = f"serve-{secrets.token_hex(6)}"
                s.add(
                    Replica(
                        deployment_id=dep.id,
                        version=version,
                        server=server,
                        state="waiting",
                        restarts=restarts,
                        not_before=not_before,
                    )
                )
                servers.append(server)
            if plan.remove:
                s.execute(delete(Replica).where(Replica.deployment_id == dep.id))
                s.execute(delete(DeploymentTraffic).where(DeploymentTraffic.deployment_id == dep.id))
                s.delete(dep)
            else:
                dep.lease_owner, dep.lease_until = None, None
            return servers

    # -- the hub ------------------------------------------------------------------------

    async def _start(self, work: Work, replica: rollout.ReplicaView) -> None:
        path = f"/users/{quote(work.owner, safe='')}/servers/{replica.server}"
        body = {"user_options": {"serve": {"deployment": work.key}}}
        try:
            code, answer = await self.hub.call("POST", path, body)
        except Exception as e:
            code, answer = 599, {"message": str(e)}
        if code in (201, 202):
            return
        message = (answer or {}).get("message") or f"HTTP {code}"
        log.info("deployment %s: the hub did not start %s: %s %s", work.key, replica.server, code, message)
        await self.blocking(self._refused, replica.server, message, code)

    def _refused(self, server: str, message: str, code: int) -> None:
        """A start the hub refused: asked again in a while (a minute for the user's refusal, 5 s for a hub
        that did not answer), its sentence the deployment's message."""
        wait = 5 if code >= 500 else 60
        with self.db.session() as s:
            replica = s.scalar(select(Replica).where(Replica.server == server))
            if replica is None:
                return
            replica.state, replica.not_before = "waiting", utcnow() + dt.timedelta(seconds=wait)
            replica.message = message
            if code < 500:
                replica.deployment.message = i18n.kept(
                    "The hub did not start a replica: {reason} It is tried again in a minute.", reason=message
                )
                version = replica.deployment.version(replica.version)
                if version is not None and replica.version == replica.deployment.rolling:
                    # past `failures_before_giving_up`, the rollout is given up (rollout._given_up)
                    version.failed_starts = (version.failed_starts or 0) + 1

    async def _stop(self, work: Work, server: str) -> None:
        path = f"/users/{quote(work.owner, safe='')}/servers/{server}"
        try:
            code, answer = await self.hub.call("DELETE", path, {"remove": True})
        except Exception as e:
            code, answer = 599, {"message": str(e)}
        if code == 404:  # its server is gone already: nothing of it runs
            await self.blocking(self._forget, server)
        elif code not in (202, 204):
            log.info("deployment %s: stopping %s: %s %s", work.key, server, code, (answer or {}).get("message"))

    def _forget(self, server: str) -> None:
        with self.db.session() as s:
            s.execute(delete(Replica).where(Replica.server == server, Replica.state == "stopping"))
