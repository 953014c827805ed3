"""Sweeps (#31) in the REST API: one command once per combination of parameters, each a run beside the
workspace; the rules are in workspace/sweeps.py.

    POST /api/workspaces/{name}/sweeps                  {command, sweep: {name: [values]}, from, datasets,
                                                        resource_type, image}: start them all (202)
    GET  /api/workspaces/{name}/sweeps                  the workspace's sweeps, newest first
    GET  /api/workspaces/{name}/sweeps/{n}              one, with each run's parameters, state, place in
                                                        the queue, exit code, duration and last log line
    POST /api/workspaces/{name}/sweeps/{n}/cancel       stop every run that has not ended (homes saved)
    GET  /api/workspaces/{name}/sweeps/{n}/outputs      every run's output as one archive (?archive=zip)

The runs are started with the caller's own token, so the hub applies its own permission rules and the
spawner checks each start (queue, type, datasets, quota), in the order of the combinations: each start is
sent once the one before it is recorded (its place in the queue taken) or refused.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote

from tornado import web

from workspace import i18n, sweeps, tasks
from workspace.errors import UserError
from workspace.executions import check_workspace_name, number_of
from workspace.limits import queue_views
from workspace.outputs import sweep_archive
from workspace.service.api import APIHandler
from workspace.service.outputs_api import OutputsHandler
from workspace.start_request import runs_within
from workspace.tasks import run_spawn

log = logging.getLogger("workspace.service")

OPTIONS = ("from", "datasets", "resource_type", "image", "job")  # job: each run over several nodes
LAST_LINES = 20  # of a running run's log, the engine sends these to find its last line (a page reads it often)


class SweepStarts:
    """Starting a sweep's runs (the API's and the page's): mixed into an APIHandler."""

    async def launch(self, owner: str, name: str, command: str, params, options: dict) -> int:
        """Record the sweep and start its runs in order; its number. The first start's refusal is the
        caller's error and leaves nothing; a later one is said on that run and those after it."""
        bound = 0 if self.caller().get("admin") else self.settings["max_runs_per_user"]
        runs = sweeps.expand(command, params, bound)
        if bound:
            await self.blocking(runs_within, self.db, owner, len(runs), bound)
        spawns = [(*run_spawn(name, cmd, options), chosen, cmd) for chosen, cmd in runs]
        number = await self.blocking(
            sweeps.record, self.db, owner, name, command, params, [(srv, ch, cmd) for srv, _, ch, cmd in spawns]
        )
        token = self.hub_auth.get_token(self)
        for i, (server, body, _, _) in enumerate(spawns):
            path = f"/users/{quote(owner, safe='')}/servers/{server}"
            answer = asyncio.ensure_future(self.hub_fetch(token, "POST", path, body))
            while not answer.done() and not await self.blocking(tasks.started_run, self.db, owner, name, server):
                await asyncio.sleep(0.05)
            if answer.done():
                code, reply = answer.result()
                if code not in (201, 202):
                    why = (reply or {}).get("message") or i18n.translate(
                        self.lang, "The hub refused to start the run ({code}).", code=code
                    )
                    if i == 0:
                        await self.blocking(sweeps.forget, self.db, owner, name, number)
                        status = code if 400 <= code < 500 else 502
                        raise web.HTTPError(status, why)
                    rest = [srv for srv, *_ in spawns[i:]]
                    await self.blocking(sweeps.refuse, self.db, owner, name, number, rest, why)
                    log.info("sweep %s/%s #%d: run %d of %d refused: %s", owner, name, number, i + 1, len(spawns), why)
                    break
            else:
                answer.add_done_callback(_answered)
        return number


def _answered(fut: asyncio.Future) -> None:
    """A run's start answered after its record was made: its errors are the run's (its record says)."""
    if not fut.cancelled() and fut.exception() is not None:
        log.warning("a sweep's run start: %s", fut.exception())


def details(db, settings, owner: str, name: str, number: int) -> dict:
    """A sweep with its runs as the API and the page show them: their places in the queue and the last
    line of each log (blocking; `settings`: the service's, with its engine's log and the kept logs)."""
    sweep, runs = sweeps.summary(db, owner, name, number)
    positions = {}
    if any(view.state == "queued" for view in runs):
        with db.session() as s:
            positions = queue_views.queue_positions(s)
    rows = []
    for view in runs:
        row = view.as_dict()
        place = positions.get(view.execution_id) if view.state == "queued" else None
        row["queue"] = {"position": place[0], "waiting": place[1]} if place else None
        row["last_line"] = _last_line(view, settings["engine_log"], settings["execution_log_root"])
        rows.append(row)
    return {**sweep, "runs": rows}


def _last_line(view: sweeps.RunView, engine_log, log_root) -> str | None:
    if view.execution_id is None:
        return None
    if view.record_id:  # running: the last lines its container wrote
        try:
            return tasks.last_line(engine_log(view.record_id, tail=LAST_LINES))
        except Exception:  # the engine's log is a courtesy here; the run's page has the whole of it
            return None
    return tasks.last_line(tasks.read_tail(tasks.log_path(log_root, view.execution_id)))


class SweepsHandler(SweepStarts, APIHandler):
    async def get(self, name: str):
        owner = await self.owner()
        check_workspace_name(name)
        self.write_json(await self.blocking(sweeps.listing, self.db, owner, name))

    async def post(self, name: str):
        owner = await self.owner()
        check_workspace_name(name)
        body = self.body()
        unknown = set(body) - {"command", "sweep", *OPTIONS}
        if unknown:
            raise UserError(
                400,
                "Unknown field(s) {unknown}; a sweep takes command, sweep, {fields}.",
                unknown=", ".join(sorted(unknown)),
                fields=", ".join(OPTIONS),
            )
        command = tasks.parse_command(body.get("command"))
        params = sweeps.parse_params(body.get("sweep"))
        options = {k: body[k] for k in OPTIONS[1:] if body.get(k) is not None}
        if body.get("from") is not None:
            options["continue_from"] = body["from"]
        number = await self.launch(owner, name, command, params, options)
        self.write_json(await self.blocking(details, self.db, self.settings, owner, name, number), status=202)


class SweepHandler(APIHandler):
    async def get(self, name: str, number: str):
        owner = await self.owner()
        check_workspace_name(name)
        self.write_json(await self.blocking(details, self.db, self.settings, owner, name, number_of(number)))


class SweepCancelHandler(APIHandler):
    async def post(self, name: str, number: str):
        owner = await self.owner()
        check_workspace_name(name)
        servers = await self.blocking(sweeps.cancel, self.db, owner, name, number_of(number))
        stopped = await stop_runs(self, owner, servers)
        self.write_json({"workspace": name, "number": number_of(number), "cancelled": stopped}, status=202)


async def stop_runs(handler: APIHandler, owner: str, servers: list[str]) -> int:
    """Stop these run servers of the owner (pending starts too: the hub cancels them); how many it took."""
    token = handler.hub_auth.get_token(handler)
    codes = await asyncio.gather(
        *(handler.hub_fetch(token, "DELETE", f"/users/{quote(owner, safe='')}/servers/{s}") for s in servers)
    )
    return sum(1 for code, _ in codes if code in (202, 204))


class SweepOutputsHandler(OutputsHandler):
    async def get(self, name: str, number: str):
        owner = await self.owner()
        check_workspace_name(name)
        kind = self.archive_format("tar.gz")
        sweep, items = await self.blocking(
            sweep_archive.collect,
            self.db,
            self.store,
            self.node_stores,
            owner,
            name,
            number_of(number),
            self.record_store,
            self.lang,
        )
        top = f"{name}-sweep-{sweep['number']}"
        await self.stream_archive(
            lambda w, check: sweep_archive.write(w, sweep, items, top, check, self.lang), kind, top
        )


def handlers(prefix: str) -> list:
    return [
        (rf"{prefix}api/workspaces/([^/]+)/sweeps/?", SweepsHandler),
        (rf"{prefix}api/workspaces/([^/]+)/sweeps/(\d+)/?", SweepHandler),
        (rf"{prefix}api/workspaces/([^/]+)/sweeps/(\d+)/cancel/?", SweepCancelHandler),
        (rf"{prefix}api/workspaces/([^/]+)/sweeps/(\d+)/outputs/?", SweepOutputsHandler),
    ]
