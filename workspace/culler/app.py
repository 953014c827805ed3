"""The idle culler: a JupyterHub service that stops workspaces nobody uses.

    python -m workspace.culler        (started by the hub, see jupyterhub_config.py)

Once a cycle (`interval`) it takes every ready server from the hub's REST
API (`hub_api.py`) and, for each, observes:

- the browser: kernel and terminal websockets and the last browser request,
  from the workspace extension in the container (`api/workspace/activity`,
  workspace/singleuser), asked directly at the server's address from the
  hub's proxy table so that the culler's own requests never count as the
  user's activity; the hub's `last_activity` when the extension cannot answer.
  The culler shows the extension the execution's own report key, never its
  hub token: the student controls whatever listens on that port
  (`extension.py`). Reports are hostile input (`report.clean_report`), and
  one workspace's bad answer affects only its own verdict;
- CPU from the container's cgroup counters on this host (workspace/usage.py;
  `docker stats` would take a second per container), or the extension's own
  figure where the container runs elsewhere;
- GPU utilisation, from NVML inside the container (the extension reports it).

`workspace/culler/idle.py` decides. A warning goes to the workspace first (a
JupyterLab notification and a line in every terminal) and is withdrawn on
activity. A cull records the reason (`idle`, `max_runtime`) and its evidence
on the execution, then asks the hub to stop the server: the normal stop
path, which saves the home first.

It also writes one usage sample per execution every `sample_interval`
(the execution page draws them), with the size of the home of an execution
that has a home size limit, and warns that workspace as its home nears the
limit (`homes.py`, `quotas.home_notice`; btrfs enforces the limit, a copying
store only measures it). Its role holds only the scopes it needs
(see jupyterhub_config.py).

Once a cycle it hands the running workspaces to workspace/task_news.py, which
tells owners in them (and through their webhooks) of their tasks that ended.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import select
from tornado.httpclient import HTTPClientError
from traitlets import Float, Int, Unicode

from workspace import config, i18n, lifecycle, webhooks
from workspace.culler.extension import WorkspaceExtension
from workspace.culler.homes import HomeWatch
from workspace.culler.hub_api import HubApi, Server
from workspace.culler.idle import Observation, Verdict, Watch
from workspace.culler.report import epoch
from workspace.db import database, utcnow
from workspace.executions import FINAL, Execution, UsageSample, Workspace
from workspace.limits.runtime import IdlePolicy
from workspace.spawner.options import SpawnerOptions
from workspace.store.agent_store import read_token
from workspace.task_news import TaskNews
from workspace.usage import ContainerCgroup, CpuMeter

log = logging.getLogger("workspace.culler")

STOP_TIMEOUT = 60  # seconds to wait for the hub's answer to a stop


@dataclass
class Tracked:
    watch: Watch
    meter: CpuMeter | None
    last_sample: float = 0.0
    sample_cpu: list = field(default_factory=list)  # CPU readings since the last sample
    home_notice: str | None = None  # the home-limit notice the workspace shows now
    files_notice: str | None = None  # the file-count notice it shows now
    files_counted: float = 0.0  # when its home's files were last counted
    bytes_walked: float = 0.0  # when its home was last walked for its bytes (a store that keeps no count)
    home_bytes: int | None = None  # what that walk found


class Culler(HubApi, WorkspaceExtension, HomeWatch, config.HubService):
    name = "workspace-culler"
    description = "Stops idle workspaces (closed tab AND low CPU) after a warning; records usage."
    classes = [IdlePolicy]

    interval = Float(60, config=True, help="Seconds between two cycles (observations of every workspace).")
    sample_interval = Float(60, config=True, help="Seconds between two usage samples kept per execution.")
    concurrency = Int(32, config=True, help="Workspaces asked for their activity at the same time.")
    request_timeout = Float(10, config=True, help="Seconds to wait for a workspace or the hub to answer.")
    db_url = Unicode(config=True, help="The workspace database (default: the spawner's db_url).")
    store_dir = Unicode(
        config=True, help="The home store, where live homes are measured (default: the spawner's store_root)."
    )
    home_warn_fraction = Float(
        0.9, config=True, help="Warn a workspace when its home passes this fraction of its limit."
    )
    files_interval = Float(
        600,
        config=True,
        help="""Seconds between two counts of a running home's files against its
        limit (a count stops at the limit, so it costs at most that many
        entries; WORKSPACE_HOME_FILES_INTERVAL), and between two walks of a
        home for its bytes on a store that keeps no count of them (the copy
        store; btrfs counts them, and is read at every usage sample).""",
    )
    cgroup_root = Unicode("/sys/fs/cgroup", config=True, help="Where the host's cgroup filesystem is mounted.")
    config_file = Unicode(
        config=True,
        help="""A traitlets config file of the culler's own, loaded after the hub's,
        e.g. IdlePolicy.overrides per resource type, group or user (default
        <data dir>/culler_config.py; it need not exist).""",
    )
    aliases = {"hub-config": "Culler.hub_config"}

    def initialize(self, argv=None):
        # configured as the hub is (workspace/config.py), then by its own file, if there is one
        config.load(self, argv)
        if self.config_file and Path(self.config_file).is_file():
            self.load_config_file(self.config_file)
        spawner = SpawnerOptions(self.config)
        self.db_url = self.db_url or spawner.db_url
        self._key_file = spawner.secret_key_file
        self.store_dir = self.store_dir or spawner.store_root
        self._engine_nodes = functools.partial(spawner.spawner_class.engine_nodes, spawner)
        self._agent_token = read_token(getattr(spawner, "store_agent_token_file", ""))
        self.task_news = TaskNews(
            functools.partial(database, self.db_url, self._key_file), webhooks.networks(spawner.webhook_networks)
        )
        self.policy = IdlePolicy(parent=self)
        self.tracked: dict[int, Tracked] = {}
        self._unrouted: set[int] = set()  # executions whose server the proxy's table did not show
        self._http = None
        self._semaphore = asyncio.Semaphore(self.concurrency)
        self.clock = time.time

    # -- the workspace database --------------------------------------------------------

    def _attach_executions(self, servers: list[Server]) -> None:
        db = database(self.db_url, self._key_file)
        with db.session() as s:
            rows = s.execute(
                select(Execution, Workspace.owner, Workspace.name)
                .join(Workspace, Execution.workspace_id == Workspace.id)
                .where(Execution.state == "running")
            ).all()
            # a run beside a workspace (#31) is the hub's server of its own name (Execution.server)
            running = {(owner, ex.server or name): ex for ex, owner, name in rows}
            for server in servers:
                ex = running.get((server.user, server.name))
                if ex is not None:
                    server.execution_id, server.number = ex.id, ex.number
                    server.container_id, server.started = ex.container_id, epoch(ex.started)
                    server.resource_type, server.max_runtime = ex.resource_type, ex.max_runtime
                    server.live_key, server.home_limit, server.node = ex.live_key, ex.home_limit, ex.node
                    server.home_files = ex.home_files
                    server.report_key = ex.report_key
                    server.task = ex.kind in ("task", "serve")  # a deployment's replica (#33) serves as a task runs
                    server.serve = ex.kind == "serve"
                    server.locale = ex.locale if ex.locale in i18n.LOCALES else i18n.DEFAULT

    def _record(self, samples: list[UsageSample], culls: list[tuple[int, str, str]]) -> None:
        db = database(self.db_url, self._key_file)
        with db.session() as s:
            s.add_all(samples)
            for execution_id, reason, evidence in culls:
                ex = s.get(Execution, execution_id)
                if ex is not None and ex.state == "running":
                    ex.stop_reason, ex.stop_detail = reason, evidence

    def _ended_runs(self, limit: int = 50) -> list[tuple[int, str, str]]:
        """(execution id, owner, server) of runs beside a workspace (#31) that ended and whose hub record
        is still there."""
        db = database(self.db_url, self._key_file)
        with db.session() as s:
            return list(
                s.execute(
                    select(Execution.id, Workspace.owner, Execution.server)
                    .join(Workspace, Execution.workspace_id == Workspace.id)
                    .where(
                        Execution.server.is_not(None),
                        Execution.server_gone.is_(None),
                        Execution.state.in_(FINAL),
                    )
                    .limit(limit)
                )
            )

    def _gone(self, execution_id: int) -> None:
        db = database(self.db_url, self._key_file)
        with db.session() as s:
            s.get(Execution, execution_id).server_gone = utcnow()

    async def forget_ended_runs(self) -> None:
        """Remove the hub's records of runs that ended (their own named servers): a user's ended runs never
        count against the hub's named-server limit, and their list stays the workspaces'."""
        loop = asyncio.get_running_loop()
        for execution_id, owner, server in await loop.run_in_executor(None, self._ended_runs):
            path = f"/users/{quote(owner, safe='')}/servers/{quote(server, safe='')}"
            try:
                await self.hub("DELETE", path, {"remove": True})
            except HTTPClientError as e:
                if e.code not in (404,):  # 400: still stopping; asked again next cycle
                    log.info("%s:%s: its record stays for now: %s", owner, server, e)
                    continue
            except OSError as e:
                log.warning("%s:%s: the hub did not answer: %s", owner, server, e)
                return
            await loop.run_in_executor(None, self._gone, execution_id)

    # -- one cycle -------------------------------------------------------------------

    async def cycle(self) -> dict:
        """Observe every ready workspace once; warn, withdraw and cull. Returns counts."""
        servers = await self.servers()
        await asyncio.get_running_loop().run_in_executor(None, self._attach_executions, servers)
        servers = [s for s in servers if s.execution_id is not None]
        await self.task_news.announce(servers, self.show_notice)
        await self.forget_ended_runs()
        reports = await asyncio.gather(*(self._no_report() if s.task else self.activity(s) for s in servers))
        now = self.clock()
        samples, culls, actions, samples_by_server = [], [], [], []
        for server, report in zip(servers, reports):
            try:
                verdict, sample = self._judge(server, report, now)
            except Exception:  # one workspace's trouble never stops the others' culling
                log.exception("%s: could not be judged this cycle", server.label)
                samples_by_server.append(None)
                continue
            samples_by_server.append(sample)
            if sample is not None:
                samples.append(sample)
            if server.serve:  # a deployment's replica (#33): its usage is sampled; its deployment decides its life
                continue
            if verdict.action == "cull":
                culls.append((server.execution_id, verdict.reason, verdict.evidence))
            if verdict.action != "keep":
                actions.append((server, verdict))
        homes = [
            (server, sample)
            for server, sample in zip(servers, samples_by_server)
            if sample is not None and (server.home_limit or server.home_files)
        ]
        if homes:
            await asyncio.gather(
                *(self._watch_home(server, sample) for server, sample in homes), return_exceptions=True
            )
        if samples or culls:
            await asyncio.get_running_loop().run_in_executor(None, self._record, samples, culls)
        counts = {"servers": len(servers), "warned": 0, "withdrawn": 0, "culled": 0}
        for result in await asyncio.gather(
            *(self._act(server, verdict, counts) for server, verdict in actions), return_exceptions=True
        ):
            if isinstance(result, Exception):
                log.error("acting on a verdict failed: %r", result)
        live = {s.execution_id for s in servers}
        for gone in set(self.tracked) - live:
            del self.tracked[gone]
        self._unrouted &= live
        return counts

    def _judge(self, server: Server, report: dict | None, now: float) -> tuple[Verdict, UsageSample | None]:
        tracked = self.tracked.get(server.execution_id)
        if tracked is None:
            meter = None
            if server.container_id:
                meter = CpuMeter(ContainerCgroup(server.container_id, root=Path(self.cgroup_root)), clock=self.clock)
                meter.sample()
                if meter.last is None:
                    meter = None  # its cgroup is not on this host (another node): the extension's figure
            tracked = Tracked(watch=None, meter=meter, last_sample=now)
            cpu = None  # the first reading of the counter: no rate yet (counts as busy)
        else:
            cpu = tracked.meter.sample() if tracked.meter is not None else None
        if tracked.meter is None:
            cpu = report["cpu_percent"] if report else None
        gpus = report["gpus"] if report else []
        obs = Observation(
            now=now,
            started=server.started or now,
            # a task runs whether or not anyone looks: as if a browser were always attached
            browser_connections=1 if server.task else report["browser_connections"] if report else 0,
            last_browser=now if server.task else report["last_browser"] if report else server.last_activity,
            cpu_percent=cpu,
            gpu_percent=max((g["utilization_percent"] for g in gpus), default=None),
        )
        limits = self.policy.limits(
            server.user,
            server.groups,
            server.resource_type,
            kind="task" if server.task else "workspace",
            type_max_runtime=server.max_runtime,
        )
        if tracked.watch is None:
            tracked.watch = Watch.start(obs)
            self.tracked[server.execution_id] = tracked
        verdict = tracked.watch.decide(obs, limits, server.locale)

        sample = None
        if cpu is not None:
            tracked.sample_cpu.append(cpu)
        if now - tracked.last_sample >= self.sample_interval:
            memory = tracked.meter.cgroup.memory_bytes() if tracked.meter is not None else None
            sample = UsageSample(
                execution_id=server.execution_id,
                at=utcnow(),
                cpu_percent=round(sum(tracked.sample_cpu) / len(tracked.sample_cpu), 2) if tracked.sample_cpu else None,
                memory_bytes=memory if memory is not None else (report["memory_bytes"] if report else None),
                gpu_percent=obs.gpu_percent,
                gpu_memory_bytes=sum(g["memory_used_bytes"] for g in gpus) if gpus else None,
                browser=now - tracked.watch.last_browser < self.interval * 1.5,
            )
            tracked.last_sample, tracked.sample_cpu = now, []
        return verdict, sample

    @staticmethod
    async def _no_report() -> None:
        return None

    async def _act(self, server: Server, verdict: Verdict, counts: dict) -> None:
        notice_id = f"cull-{verdict.reason}"
        if verdict.action in ("warn", "withdraw") and server.task:
            return  # nobody to warn inside a task; its log says why it ended
        if verdict.action in ("warn", "withdraw"):
            log.info("%s #%s: %s: %s", server.label, server.number, verdict.action, verdict.message)
            await self.notify(server, verdict, notice_id)
            counts["warned" if verdict.action == "warn" else "withdrawn"] += 1
            return
        log.info("%s #%s: stopping (%s): %s", server.label, server.number, verdict.reason, verdict.evidence)
        path = f"/users/{quote(server.user, safe='')}/server" + (
            f"s/{quote(server.name, safe='')}" if server.name else ""
        )
        try:
            # the hub answers a stop once it is done or after its slow_stop_timeout (10 s), while the home
            # is saved: waiting only request_timeout took a slow stop for a refused one and dropped its reason
            await self.hub("DELETE", path, timeout=max(self.request_timeout, STOP_TIMEOUT))
        except (HTTPClientError, OSError) as e:
            log.error("%s: the hub did not stop it: %s", server.label, e)
            # the execution goes on, without a stop reason
            await asyncio.get_running_loop().run_in_executor(
                None,
                lifecycle.record_stop_reason,
                database(self.db_url, self._key_file),
                server.user,
                server.name,
                None,
                None,
                server.execution_id,
            )
            return
        counts["culled"] += 1
        self.tracked.pop(server.execution_id, None)

    # -- forever ------------------------------------------------------------------------

    async def run(self) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        log.info("culler: every %g s; %s", self.interval, self.policy.limits())
        while not stop.is_set():
            started = time.monotonic()
            try:
                counts = await self.cycle()
                if counts["warned"] or counts["withdrawn"] or counts["culled"]:
                    log.info("cycle: %s in %.2f s", counts, time.monotonic() - started)
            except Exception:
                log.exception("culler cycle failed; trying again next cycle")
            try:
                await asyncio.wait_for(stop.wait(), max(0.1, self.interval - (time.monotonic() - started)))
            except asyncio.TimeoutError:
                pass
        log.info("culler stopping")


def main(argv=None) -> None:
    from workspace.process import die_with_the_hub

    die_with_the_hub()
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s")
    app = Culler()
    app.initialize(sys.argv[1:] if argv is None else argv)
    asyncio.run(app.run())


if __name__ == "__main__":
    main()
