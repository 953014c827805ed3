"""A job over several nodes (#31): ranks 1..N-1 beside a run's own container (rank 0), started and ended
with it.

Admission placed every rank (limits/fit.py `place_gang`, all at once); here each rank gets a home restored
from the same state as rank 0's (its own copy, dropped at the end: rank 0's home is the job's output), a
container made as rank 0's is (the engine's `create_object` while `_as_rank` names the rank: its name,
its address on the owner's network, its home, its GPUs), and what the frameworks expect
(jobs.rank_environment): rank 0's address, the world's size, its own rank, the hostfile, an SSH entry
for every rank. The ranks start first, so that rank 0's command (mpirun, torchrun's master) finds them;
with `processes` (mpirun) only rank 0 runs the command and the others wait for mpirun's SSH.

One rank ending with a failure (or vanishing) ends the job with that reason (`poll` says rank 0's server
stopped; its post-stop hook saves rank 0's home); any end of rank 0 (its command's end, a cancel, its
run time) removes every rank, keeping each one's log (`<execution id>-r<rank>.log`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from workspace import jobs, ssh_identities, tasks
from workspace.executions import get_or_create_workspace


@dataclass
class Rank:
    """A rank of the current job: where it runs, its home and its container."""

    rank: int
    node: str
    gpu_ids: list[str]
    live_key: str
    container_id: str | None = None


@dataclass
class JobState:
    spec: jobs.JobSpec
    hosts: list[str] = field(default_factory=list)  # rank 0's first: their names on the owner's network
    ranks: list[Rank] = field(default_factory=list)
    ssh: dict = field(default_factory=dict)  # rank SSH entries, once made (ssh_identities.job_env)


WAIT_FOR_MPIRUN = "exec sleep infinity"  # a rank of an mpirun job: sshd runs, mpirun starts the processes


class JobsMixin:
    runs_jobs = False  # an engine that makes a job's ranks says so (DockerWorkspaceSpawner)
    _as_rank: Rank | None = None  # the rank whose container the engine makes now (None: rank 0's own)
    _job_failure: tuple[str, str] | None = None  # (reason, detail) of a rank that ended the job

    def job_alias(self) -> str:
        """This container's name on the owner's network: the server's, with `-rK` for rank K."""
        return f"{self.name}-r{self._as_rank.rank}" if self._as_rank else self.name

    async def _record_ranks(self, plan, spec: jobs.JobSpec | None) -> None:
        """A job's ranks beyond rank 0, recorded before admission places them (all at once)."""
        self.current.job, self._job_failure = None, None
        if spec is None:
            return
        self.current.job = JobState(spec)
        await self.run_blocking(self._add_ranks, plan.execution_id, spec)

    def _add_ranks(self, execution_id: int, spec: jobs.JobSpec) -> None:
        with self.db.session() as s:
            jobs.add_ranks(s, execution_id, spec)

    async def _start_ranks(self, plan, mounts: list[dict]) -> None:
        """After admission, before rank 0's container: each rank's inputs on its node (a swarm's), its home
        and its container."""
        job = self.current.job
        if job is None:
            return
        placed = await self.run_blocking(self._placed_ranks, plan.execution_id)
        job.ranks = [Rank(rank, node, gpus, jobs.rank_live_key(plan.live_key, rank)) for rank, node, gpus in placed]
        job.hosts = [self.name] + [f"{self.name}-r{r.rank}" for r in job.ranks]
        self.emit_progress(
            66,
            self.localized(
                "Starting the job's {count} other rank(s) on {nodes}",
                count=len(job.ranks),
                nodes=", ".join(sorted({r.node for r in job.ranks})),
            ),
        )
        limit = getattr(self.current.home_limit, "bytes", None)
        for rank in job.ranks:
            with self._rank(rank):
                await self.receive_inputs(plan, mounts)  # the snapshot and datasets on the rank's node
                self.current.mounts = self.dataset_mounts(mounts)
                await self.run_blocking(self._rank_home, plan.restore_snapshot, rank, limit)
                rank.container_id = await self.start_rank_object()
            await self.run_blocking(self._note_rank, plan.execution_id, rank)

    def _placed_ranks(self, execution_id: int) -> list[tuple[int, str, list[str]]]:
        with self.db.session() as s:
            return [(r.rank, r.node, list(r.gpu_ids or [])) for r in jobs.ranks_of(s, execution_id)]

    def _rank_home(self, snapshot: str | None, rank: Rank, limit: int | None) -> None:
        store = self.store_of(rank.node or None)
        store.restore(snapshot, rank.live_key)
        store.limit_home(rank.live_key, limit)  # a rank's home is bounded as rank 0's is

    def _note_rank(self, execution_id: int, rank: Rank) -> None:
        with self.db.session() as s:
            jobs.note_container(s, execution_id, rank.rank, rank.container_id)

    @contextlib.contextmanager
    def _rank(self, rank: Rank):
        """While rank `rank`'s container is made: its node, home, GPUs and dataset mounts stand for the
        server's own."""
        current = self.current
        saved = self.node, self.live_key, current.gpu_ids, current.mounts
        self._as_rank = rank
        self.node, self.live_key, current.gpu_ids = rank.node, rank.live_key, rank.gpu_ids
        try:
            yield
        finally:
            self._as_rank = None
            self.node, self.live_key, current.gpu_ids, current.mounts = saved

    def job_env(self, env: dict) -> dict:
        """`env` of a container of the current job: what its rank is told, and SSH to every rank."""
        job = self.current.job
        if job is None or not job.hosts:
            return env
        rank = self._as_rank.rank if self._as_rank else 0
        if not job.ssh and env.get("WORKSPACE_SSH_HOST_KEY"):
            job.ssh = self._job_ssh(env, job.hosts)
        out = {**env, **job.ssh, **jobs.rank_environment(rank, job.hosts, job.spec)}
        out["WORKSPACE_JOB_HOSTFILE_TEXT"] = jobs.hostfile(job.hosts, job.spec)
        if rank and job.spec.processes:  # mpirun on rank 0 starts this rank's processes over SSH
            out["WORKSPACE_TASK_COMMAND"] = WAIT_FOR_MPIRUN
        return out

    def _job_ssh(self, env: dict, hosts: list[str]) -> dict:
        with self.db.session() as s:
            ws = get_or_create_workspace(s, self.user.name, self.workspace_name)
            made = ssh_identities.job_env(s, ws, hosts, env)
        return {k: v for k, v in made.items() if k in ("WORKSPACE_SSH_CONFIG", "WORKSPACE_SSH_KNOWN_HOSTS")}

    # -- its end ------------------------------------------------------------------------------------

    async def poll(self):
        status = await super().poll()
        return await self.job_poll() if status is None else status

    async def job_poll(self) -> int | None:
        """1 (stopped) once a rank of the running job failed or vanished, its reason kept for the end;
        None while every rank runs (or this is no job). An engine whose `poll` is its own ends with it."""
        # not while the hub waits for rank 0 to answer: a stop said then is taken for a failed start (and
        # JupyterHub 5's spawn_single_user asks a pending future for its exception); the next look says it
        if self.current.job is None or self._spawn_pending:
            return None
        failure = await self._failed_rank()
        if failure is None:
            return None
        self._job_failure = failure  # the hub takes the server for stopped: its post-stop hook ends the job
        return 1

    async def _end_execution(self, execution_id, reason, detail, node) -> None:
        await self._end_ranks(execution_id)  # before rank 0's home is saved: the job has ended everywhere
        await super()._end_execution(execution_id, reason, detail, node)

    async def _failed_rank(self) -> tuple[str, str] | None:
        """(reason, detail) when a rank of the current job ended badly or vanished; None while all run."""
        if self.execution_id is None:
            return None
        ranks = await self.run_blocking(self._recorded_ranks, self.execution_id)
        for rank, container_id in ranks:
            if not container_id:
                continue
            running, code = await self.rank_object_state(container_id)
            if running:
                continue
            if code is None:
                return "lost", self.localized("Rank {rank} of the job was lost (its container is gone).", rank=rank)
            if code != 0:
                return "error", self.localized(
                    "Rank {rank} of the job failed (exit code {code}); the other ranks were stopped.",
                    rank=rank,
                    code=code,
                )
        return None

    def _recorded_ranks(self, execution_id: int) -> list[tuple[int, str | None]]:
        with self.db.session() as s:
            return [(r.rank, r.container_id) for r in jobs.ranks_of(s, execution_id)]

    async def _end_ranks(self, execution_id: int | None) -> None:
        """Remove every rank of a job that ended (its log kept first) and drop its home (blocking parts in
        threads); nothing for a start that is no job. Safe to call twice. A rank that cannot be ended (its
        node stopped answering) is logged and left: rank 0's home is saved all the same."""
        if execution_id is None:
            return
        ranks = await self.run_blocking(self._ranks_to_end, execution_id)
        for rank, node, container_id, live_key in ranks:
            try:
                await self._end_rank(execution_id, rank, node, container_id, live_key)
            except Exception:
                self.log.exception("Ending rank %s of execution %s (on %s) failed", rank, execution_id, node)

    async def _end_rank(self, execution_id: int, rank: int, node: str | None, container_id, live_key: str) -> None:
        if container_id:
            running, code = await self.rank_object_state(container_id)
            if running or code is not None:  # not lost: there is a log to keep (a lost rank's node has none)
                path = tasks.log_path(self.execution_log_root, execution_id, rank)
                try:
                    await self.run_blocking(
                        lambda: tasks.keep(self.engine_log(self, container_id), path, self.execution_log_limit)
                    )
                except Exception:  # the log is a courtesy; the rank's removal is not
                    self.log.exception("Keeping the log of rank %s of execution %s failed", rank, execution_id)
            await self.remove_rank_object(container_id)
            await self.run_blocking(self._rank_ended, execution_id, rank, None if running else code)
        if live_key:
            await self.run_blocking(self._release_rank_home, node, live_key)

    def _ranks_to_end(self, execution_id: int) -> list[tuple[int, str | None, str | None, str]]:
        from workspace.executions import Execution

        with self.db.session() as s:
            live = s.get(Execution, execution_id).live_key
            return [
                (r.rank, r.node, r.container_id, jobs.rank_live_key(live, r.rank) if live else "")
                for r in jobs.ranks_of(s, execution_id)
            ]

    def _release_rank_home(self, node: str | None, live_key: str) -> None:
        store = self.store_of(node or None)  # a swarm's: its node's, perhaps through its agent
        if store.has_live(live_key):
            store.release(live_key)

    def _rank_ended(self, execution_id: int, rank: int, code: int | None) -> None:
        with self.db.session() as s:
            jobs.note_end(s, execution_id, rank, code)

    # -- the engine's (DockerWorkspaceSpawner's containers, SwarmWorkspaceSpawner's services) ------------

    async def start_rank_object(self) -> str:
        """Make and start the container of `_as_rank`; its ID."""
        raise NotImplementedError("this engine runs no job over several nodes")

    async def rank_object_state(self, container_id: str) -> tuple[bool, int | None]:
        """(running, exit code) of a rank's container; (False, None) when it is gone."""
        return False, None

    async def remove_rank_object(self, container_id: str) -> None:
        """Stop and remove a rank's container (its state was read before: rank_object_state)."""
