"""Tasks (#17) in the REST API: run one, follow its log, cancel it.

    POST /api/workspaces/{name}/tasks                       run a command as a new execution of `name`
    POST /api/workspaces/{name}/runs                        run one beside `name` (open or not; #31); with
                                                            "job": {"nodes": N, "processes": P} over N nodes
    GET  /api/workspaces/{name}/executions/{n}/logs         its log (text; `?follow=1` streams it live);
                                                            a server's too (its start script's output)
    POST /api/workspaces/{name}/executions/{n}/cancel       stop it (its home is saved)

A task is started as the hub starts any workspace (with the caller's own
token, so the hub applies its own permission rules, and the spawner checks
the options: queue, type, datasets, quota); the rules are in workspace/tasks.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from urllib.parse import quote

from tornado import web

from workspace import tasks
from workspace.db import utcnow
from workspace.errors import UserError
from workspace.executions import ACTIVE, FINAL, check_workspace_name, number_of
from workspace.service import streams
from workspace.service.api import APIHandler

OPTIONS = ("continue_from", "datasets", "resource_type", "image")
# how long a follower waits for a task's log to be kept after its container ended
KEEP_WAIT = 60.0


class TaskStartHandler(APIHandler):
    """What a task's start and a run's share: the hub's refusal said, the record waited for, the answer."""

    @staticmethod
    def refused(code: int, answer, fallback: UserError) -> None:
        """The hub's refusal of a start as the caller's error: its own sentence (in the user's language:
        hub_fetch sends it on), else `fallback`."""
        message = (answer or {}).get("message")
        status = code if 400 <= code < 500 else 502
        if message:
            raise web.HTTPError(status, message)
        fallback.status_code = status
        raise fallback

    async def recorded(self, find) -> dict | None:
        """The new execution's record, once the spawner made it (`find()`, blocking; None: not yet)."""
        record = None
        for _ in range(100):  # the spawner records the execution as its start begins
            record = await self.blocking(find)
            if record is not None:
                break
            await asyncio.sleep(0.1)
        return record

    def started(self, name: str, record: dict | None, **extra) -> None:
        base = f"{self.settings['prefix']}api/workspaces/{quote(name, safe='')}/executions"
        self.write_json(
            {
                "workspace": name,
                **extra,
                "execution": record,
                "logs_url": f"{base}/{record['number']}/logs?follow=1" if record else None,
            },
            status=202,
        )


class TasksHandler(TaskStartHandler):
    async def post(self, name: str):
        owner = await self.owner()
        check_workspace_name(name)
        body = self.body()
        unknown = set(body) - {"command", *OPTIONS}
        if unknown:
            raise UserError(
                400,
                "Unknown field(s) {unknown}; a task takes command, {fields}.",
                unknown=", ".join(sorted(unknown)),
                fields=", ".join(OPTIONS),
            )
        command = tasks.parse_command(body.get("command"))
        options = {k: body[k] for k in OPTIONS if body.get(k) is not None}
        options["task"] = {"command": command}
        busy = UserError(
            409,
            "“{name}” is running or starting; a task is a new execution of it. Stop it first, "
            "or run the task in another workspace.",
            name=name,
        )
        token = self.hub_auth.get_token(self)
        # the hub answers a start of a server already starting with 202 (the same start): ask first
        code, model = await self.hub_fetch(token, "GET", f"/users/{quote(owner, safe='')}")
        if code == 200 and name in ((model or {}).get("servers") or {}):
            raise busy
        asked = utcnow() - dt.timedelta(seconds=1)
        code, answer = await self.hub_fetch(
            token,
            "POST",
            f"/users/{quote(owner, safe='')}/servers/{quote(name, safe='')}",
            {"user_options": options, "display_name": name},
        )
        if code not in (201, 202):
            if code == 400 and "already" in ((answer or {}).get("message") or "").lower():
                raise busy
            self.refused(code, answer, UserError(502, "The hub refused to start the task ({code}).", code=code))
        record = await self.recorded(lambda: tasks.started_task(self.db, owner, name, asked))
        if record is not None and record["command"] != command:
            raise busy  # another request's start, begun between the look and the start
        self.started(name, record)


class RunsHandler(TaskStartHandler):
    """A run beside workspace `name` (#31): a task started on a JupyterHub server of its own, so it runs
    while the workspace is open and beside its other runs; an execution of the workspace all the same,
    a branch of its lineage ("latest" never continues from it)."""

    async def post(self, name: str):
        owner = await self.owner()
        check_workspace_name(name)
        body = self.body()
        unknown = set(body) - {"command", "from", "job", *OPTIONS}
        if unknown:
            raise UserError(
                400,
                "Unknown field(s) {unknown}; a run takes command, from, job, {fields}.",
                unknown=", ".join(sorted(unknown)),
                fields=", ".join(OPTIONS[1:]),
            )
        command = tasks.parse_command(body.get("command"))
        options = {k: body[k] for k in (*OPTIONS, "job") if body.get(k) is not None}  # job: the spawner checks it
        if body.get("from") is not None:  # now, latest, #k: the spawner checks it (start_request)
            options["continue_from"] = body["from"]
        server, spawn = tasks.run_spawn(name, command, options)
        code, answer = await self.hub_fetch(
            self.hub_auth.get_token(self), "POST", f"/users/{quote(owner, safe='')}/servers/{server}", spawn
        )
        if code not in (201, 202):
            self.refused(code, answer, UserError(502, "The hub refused to start the run ({code}).", code=code))
        self.started(name, await self.recorded(lambda: tasks.started_run(self.db, owner, name, server)), server=server)


class LogsHandler(APIHandler):
    """The log of an execution (a task's output; a server's log): the engine's while it runs, the kept one
    after; `?follow=1` until it ends."""

    async def get(self, name: str, number: str):
        owner = await self.owner()
        follow = self.get_argument("follow", "0") in ("1", "true", "yes")
        rank = rank_of(self.get_argument("rank", "0"))  # a job's rank over several nodes (#31); 0: its own
        source = await self.blocking(tasks.log_source, self.db, owner, name, number_of(number), rank)
        # a follower is one of the caller's few (streams.py), until its client goes
        with self.settings["followers"].held(self.caller()["name"]) if follow else contextlib.nullcontext():
            await self.send_log(owner, name, number, source, follow)

    async def send_log(self, owner: str, name: str, number: str, source: tasks.LogSource, follow: bool):
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        while follow and not source.kept and source.state not in FINAL and not source.record_id:
            # queued or preparing: wait for its container (or its end)
            await asyncio.sleep(1.0)
            if self.closed:
                return
            source = await self.blocking(tasks.log_source, self.db, owner, name, number_of(number), source.rank)
        if source.record_id and not source.kept:
            engine_log, db, record = self.settings["engine_log"], self.db, source.record_id
            if not follow:
                await self.relay(engine_log(record))
                return self.finish()

            def running() -> bool:
                return tasks.state_of(db, source.execution_id, source.rank)[0] in ACTIVE

            seen: dict = {}
            await self.relay(
                streams.follow(lambda since: engine_log(record, since), running, self.gone, self.blocking, seen=seen)
            )
            # its container is gone (what it wrote last may have gone with it): once the hub has kept the
            # log, what came after the last line passed on
            deadline = asyncio.get_running_loop().time() + KEEP_WAIT
            state, kept = await self.blocking(tasks.state_of, self.db, source.execution_id, source.rank)
            while not kept and state not in FINAL and asyncio.get_running_loop().time() < deadline:
                if self.closed:
                    return
                await asyncio.sleep(0.5)
                state, kept = await self.blocking(tasks.state_of, self.db, source.execution_id, source.rank)
            if kept:
                path = tasks.log_path(self.settings["execution_log_root"], source.execution_id, source.rank)
                await self.relay(tasks.read_after(path, seen.get("last")))
            return self.finish()
        path = tasks.log_path(self.settings["execution_log_root"], source.execution_id, source.rank)
        await self.relay(tasks.read(path))
        self.finish()


def rank_of(value: str) -> int:
    """`?rank=`: a job's rank (0: rank 0, the execution's own log), or the user's 400."""
    if not value.isdigit() or len(value) > 4:
        raise UserError(400, "“rank” is a rank of the job: a whole number from 0.")
    return int(value)


class CancelHandler(APIHandler):
    async def post(self, name: str, number: str):
        owner = await self.owner()
        server = await self.blocking(tasks.cancellable, self.db, owner, name, number_of(number))
        code, answer = await self.hub_fetch(
            self.hub_auth.get_token(self),
            "DELETE",
            f"/users/{quote(owner, safe='')}/servers/{quote(server, safe='')}",
        )
        if code not in (202, 204):
            message = (answer or {}).get("message")
            status = code if 400 <= code < 500 else 502
            if message:  # the hub's sentence, in the user's language (hub_fetch sends it on)
                raise web.HTTPError(status, message)
            raise UserError(status, "The hub did not stop the task ({code}).", code=code)
        self.write_json({"workspace": name, "number": number_of(number), "cancelled": True}, status=202)


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}api/workspaces/([^/]+)/tasks/?", TasksHandler),
        (rf"{prefix}api/workspaces/([^/]+)/runs/?", RunsHandler),
        (rf"{prefix}api/workspaces/([^/]+)/executions/(\d+)/logs/?", LogsHandler),
        (rf"{prefix}api/workspaces/([^/]+)/executions/(\d+)/cancel/?", CancelHandler),
    ]
