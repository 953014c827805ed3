"""Tasks: executions that run a command to completion instead of a Jupyter server.

A task is started like any start of a workspace (the hub's spawn of its
named server, `user_options["task"]`), so it shares everything an execution
has: the home restored from the chosen execution, datasets at /input0-4, the
queue, GPUs, quotas, the type's maximum run time, and the save of its home as
its output when it ends, however it ends. Its container runs
`workspace.singleuser.task` (the image's runner) instead of the server: the
runner answers the hub's readiness check, runs the command with `bash -lc` in
the home, and exits with the command's code.

Its log is what the container wrote (stdout and stderr, interleaved as
written, each line with the engine's time). While it runs the engine holds it,
bounded by its log rotation (`execution_log_limit`, two files); when it ends the hub
keeps the last `execution_log_limit` bytes in `execution_log_root/<execution id>.log`, with a
first line saying how much was dropped. The runner's last line says how many
bytes the command wrote in all (`[workspace-task] exit=N wrote=BYTES`); it is
the student's own log, so it is parsed strictly and only ever shown to them.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from workspace import i18n, jobs
from workspace.errors import UserError

COMMAND_MAX = 8192
# what the runner prints last (stderr), after the command ended and its output was drained
TRAILER = re.compile(rb"\[workspace-task\] exit=(-?\d{1,4}) wrote=(\d{1,20}) seconds=(\d{1,9}(?:\.\d{1,3})?)\s*$")
DROPPED_PREFIX = b"[workspace] "
CHUNK = 1 << 16


def parse_command(value) -> str:
    """A task's command (run with `bash -lc` in the home), or the user's 400."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        import shlex

        value = shlex.join(value)
    if not isinstance(value, str) or not value.strip():
        raise UserError(400, "A task needs a “command”: what to run in the home, e.g. “python train.py”.")
    if "\0" in value:
        raise UserError(400, "The command must not contain a NUL character.")
    if len(value) > COMMAND_MAX:
        raise UserError(
            400,
            "The command is {length:,} characters long; at most {max_length:,} are allowed. Put it in a script.",
            length=len(value),
            max_length=COMMAND_MAX,
        )
    return value


def log_path(root: str | os.PathLike, execution_id: int, rank: int = 0) -> Path:
    """Where the hub keeps an execution's log (rank K > 0 of a job over several nodes: its own, #31)."""
    return Path(root) / (f"{int(execution_id)}-r{int(rank)}.log" if rank else f"{int(execution_id)}.log")


@dataclass
class KeptLog:
    """What was kept of a task's log: `kept` bytes of the `total` the engine delivered."""

    total: int
    kept: int
    exit_code: int | None = None  # the runner's trailer
    wrote: int | None = None  # bytes the command wrote, as the runner counted them

    @property
    def dropped(self) -> int:
        return max(self.total - self.kept, (self.wrote or 0) - self.kept, 0)


def keep(chunks: Iterable[bytes], path: Path, limit: int) -> KeptLog:
    """Write the last `limit` bytes of a log (from its first whole line) to `path`, in constant memory.

    The chunks are written to a temporary file beside `path` first (the engine
    holds at most about twice the limit), then the tail is copied; the result
    is fsynced and renamed into place, so a crash leaves the old one or none.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    total = 0
    with open(tmp, "w+b") as raw:
        for chunk in chunks:
            raw.write(chunk)
            total += len(chunk)
        start = max(0, total - limit)
        if start:  # from the first whole line of the tail
            raw.seek(start)
            head = raw.read(min(CHUNK, total - start))
            nl = head.find(b"\n")
            start += nl + 1 if nl >= 0 else 0
        raw.seek(max(0, total - 512))
        tail = raw.read()
        trailer = TRAILER.search(tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]) if tail else None
        kept = KeptLog(total=total, kept=total - start)
        if trailer:
            kept.exit_code, kept.wrote = int(trailer.group(1)), int(trailer.group(2))
        final = path.with_suffix(".new")
        with open(final, "wb") as out:
            if kept.dropped:
                out.write(
                    DROPPED_PREFIX
                    + f"{kept.dropped:,} bytes of output were dropped: the log keeps the last "
                    f"{kept.kept:,} bytes.\n".encode()
                )
            raw.seek(start)
            while block := raw.read(CHUNK):
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
    os.replace(final, path)
    tmp.unlink(missing_ok=True)
    return kept


STAMP = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z ")


def stamp_ns(line: bytes) -> int | None:
    """The engine's time at the start of a log line, in nanoseconds since the epoch (None: none)."""
    m = STAMP.match(line)
    if m is None:
        return None
    import calendar
    import time as _time

    seconds = calendar.timegm(_time.strptime(m.group(1).decode(), "%Y-%m-%dT%H:%M:%S"))
    return seconds * 10**9 + int((m.group(2) or b"0").ljust(9, b"0"))


class NewLines:
    """What a follower passes on of the engine's log: whole lines, each once (by the engine's time).
    `seen["last"]` is the time of the last one passed on (for `read_after`, once the log is kept)."""

    def __init__(self, seen: dict | None = None):
        self.seen = {} if seen is None else seen
        self.last = None  # ns of the last line passed on
        self.buf = b""

    @property
    def since(self) -> float | None:
        """What to ask the engine for next (seconds; None: all of it)."""
        return self.last / 1e9 - 0.001 if self.last else None

    def feed(self, chunk: bytes) -> list[bytes]:
        """The new whole lines of one more chunk of a read."""
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        new = []
        for line in lines:
            ns = stamp_ns(line)
            if self.last is not None and ns is not None and ns <= self.last:
                continue
            self.last = self.seen["last"] = ns if ns is not None else self.last
            new.append(line + b"\n")
        return new

    def end(self) -> list[bytes]:
        """The end of a read: its unfinished last line, if it is new."""
        buf, self.buf = self.buf, b""
        if buf and (self.last is None or (stamp_ns(buf) or self.last + 1) > self.last):
            self.last = self.seen["last"] = stamp_ns(buf) or self.last
            return [buf + b"\n"]
        return []


def follow(read, running, stopped=lambda: False, pause: float = 1.0, seen: dict | None = None) -> Iterator[bytes]:
    """Follow an engine's log while `running()`: ask `read(since)` for what came since the last line
    passed on, every `pause` seconds, then once more after it stopped; `stopped()` (the reader left)
    ends it at once. Lines are passed on whole, each once (by the engine's time); `seen["last"]` is the
    time of the last one (for `read_after`, once the log is kept). Blocking, a thread's own: the
    service's followers use workspace/service/streams.py (no thread held between reads)."""
    import time as _time

    lines = NewLines(seen)
    while not stopped():
        still = running()
        for chunk in read(lines.since):
            yield from lines.feed(chunk)
            if stopped():
                return
        yield from lines.end()
        if not still:
            return
        _time.sleep(pause)


def read_after(path: Path, after: int | None) -> Iterator[bytes]:
    """The kept log's lines stamped after `after` (ns; None: all of it), line by line."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        for line in f:
            ns = stamp_ns(line)
            if after is None or (ns is not None and ns > after):
                yield line


def read(path: Path, offset: int = 0) -> Iterator[bytes]:
    """The kept log from byte `offset`, in chunks (nothing when there is none)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        f.seek(max(0, offset))
        while block := f.read(CHUNK):
            yield block


LAST_LINE_MAX = 200  # characters of a log's last line on a sweep's page


def last_line(chunks: Iterable[bytes]) -> str | None:
    """The last line a task's command wrote, of a log's tail (the engine's time and the runner's
    trailer taken off), at most LAST_LINE_MAX characters; None when it wrote none. The student's own
    output: only ever shown to them, escaped by the page."""
    tail = bytearray()
    for chunk in chunks:  # whatever the source sends, at most the last 64 KiB are held
        tail += chunk
        del tail[: -(1 << 16)]
    for raw in reversed(bytes(tail).split(b"\n")):
        line = STAMP.sub(b"", raw.rstrip(b"\r"), count=1)
        if not line.strip() or TRAILER.search(line) or line.startswith(DROPPED_PREFIX):
            continue
        text = line.decode("utf-8", "replace").strip()
        return text if len(text) <= LAST_LINE_MAX else text[: LAST_LINE_MAX - 1] + "…"
    return None


def read_tail(path: Path, size: int = 1 << 14) -> Iterator[bytes]:
    """The last `size` bytes of the kept log (nothing when there is none)."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - size))
        yield f.read(size)


def describe_end(exit_code: int | None, seconds: float | None, locale: str = "en") -> str:
    """The sentence recorded as a finished task's stop detail (in `locale`: English is what is recorded)."""
    if seconds is None:
        if exit_code is None:
            return i18n.translate(locale, "The task ended; its exit code is unknown.")
        if exit_code == 0:
            return i18n.translate(locale, "The task finished successfully (exit code 0).")
        if exit_code > 128:
            return i18n.translate(
                locale,
                "The task was ended by signal {signal} (exit code {code}).",
                signal=exit_code - 128,
                code=exit_code,
            )
        return i18n.translate(locale, "The task failed with exit code {code}.", code=exit_code)
    took = _duration(seconds, locale)
    if exit_code is None:
        return i18n.translate(locale, "The task ended after {duration}; its exit code is unknown.", duration=took)
    if exit_code == 0:
        return i18n.translate(locale, "The task finished successfully (exit code 0) after {duration}.", duration=took)
    if exit_code > 128:
        return i18n.translate(
            locale,
            "The task was ended by signal {signal} (exit code {code}) after {duration}.",
            signal=exit_code - 128,
            code=exit_code,
            duration=took,
        )
    return i18n.translate(
        locale, "The task failed with exit code {code} after {duration}.", code=exit_code, duration=took
    )


def _duration(seconds: float, locale: str = "en") -> str:
    seconds = int(round(seconds))
    if seconds < 120:
        return i18n.translate(locale, "{seconds} s", seconds=seconds)
    if seconds < 7200:
        return i18n.translate(locale, "{minutes} min {seconds} s", minutes=seconds // 60, seconds=seconds % 60)
    return i18n.translate(locale, "{hours} h {minutes} min", hours=seconds // 3600, minutes=seconds % 3600 // 60)


def _ended(ex, name: str, locale: str) -> str:
    """The notice of a task's end: how it ended (the recorded detail, else its error or state) and its output."""
    how = ex.stop_detail or ex.error or ex.state
    if ex.has_output:
        return i18n.translate(
            locale, "Task #{number} of “{name}” ended: {how} Its output is saved.", number=ex.number, name=name, how=how
        )
    return i18n.translate(
        locale, "Task #{number} of “{name}” ended: {how} It has no saved output.", number=ex.number, name=name, how=how
    )


# -- the records (blocking) ------------------------------------------------------------


@dataclass
class LogSource:
    """Where an execution's log is to be read now (rank K > 0 of a job over several nodes: that rank's)."""

    execution_id: int
    kind: str
    state: str
    record_id: str | None  # the engine's container (or service) while it runs
    kept: bool  # the hub kept its log (it ended)
    rank: int = 0


def log_source(db, owner: str, name: str, number: int, rank: int = 0) -> LogSource:
    """An execution's log source (of its job's rank `rank`), or the user's 404 (blocking)."""
    from workspace.executions import _numbered, find_workspace

    with db.session() as s:
        ex = _numbered(s, find_workspace(s, owner, name), name, number)
        if not rank:
            return LogSource(ex.id, ex.kind or "workspace", ex.state, ex.container_id, ex.log_kept is not None)
        found = jobs.rank_of(s, ex.id, rank)
        if found is None:
            raise UserError(404, "“{name}” #{number} has no rank {rank}.", name=name, number=number, rank=rank)
        return LogSource(ex.id, "task", ex.state, found.container_id, found.ended is not None, rank)


def state_of(db, execution_id: int, rank: int = 0) -> tuple[str, bool]:
    """(state, log kept) of an execution, or of its job's rank `rank` (blocking)."""
    from workspace.executions import Execution

    with db.session() as s:
        ex = s.get(Execution, execution_id)
        if rank:
            found = jobs.rank_of(s, execution_id, rank)
            return ex.state, found is not None and found.ended is not None
        return ex.state, ex.log_kept is not None


def started_task(db, owner: str, name: str, after) -> dict | None:
    """The newest task of a workspace recorded at or after `after` (what a task request started), or None."""
    from sqlalchemy import select

    from workspace.executions import Execution, find_workspace

    with db.session() as s:
        ws = find_workspace(s, owner, name)
        if ws is None:
            return None
        ex = s.scalar(
            select(Execution)
            .where(Execution.workspace_id == ws.id, Execution.kind == "task", Execution.created >= after)
            .order_by(Execution.number.desc())
        )
        return ex.as_dict() if ex is not None else None


def run_spawn(name: str, command: str, options: dict) -> tuple[str, dict]:
    """(its server's name, the hub's spawn body) of a run beside workspace `name` (#31): a task on a
    JupyterHub server of its own, whose options name the workspace; `options`: continue_from, datasets,
    resource_type, image."""
    from workspace.executions import new_run_server

    user_options = {**options, "task": {"command": command}, "beside": name}
    return new_run_server(), {"user_options": user_options, "display_name": f"{name} · run"}


def started_run(db, owner: str, name: str, server: str) -> dict | None:
    """The run beside workspace `name` started on hub server `server` (#31), once recorded; else None."""
    from sqlalchemy import select

    from workspace.executions import Execution, find_workspace

    with db.session() as s:
        ws = find_workspace(s, owner, name)
        if ws is None:
            return None
        ex = s.scalar(select(Execution).where(Execution.workspace_id == ws.id, Execution.server == server))
        return ex.as_dict() if ex is not None else None


def cancellable(db, owner: str, name: str, number: int) -> str:
    """The hub server to stop to cancel execution `number`, a task of the workspace (its own server, or a
    run's beside it); the user's 404/409 otherwise (blocking)."""
    from workspace.executions import ACTIVE, _numbered, find_workspace

    with db.session() as s:
        ex = _numbered(s, find_workspace(s, owner, name), name, number)
        if (ex.kind or "workspace") != "task":
            raise UserError(
                409,
                "#{number} of “{name}” is a workspace, not a task; stop it from its page.",
                number=number,
                name=name,
            )
        if ex.state not in ACTIVE:
            raise UserError(
                409,
                "Task #{number} of “{name}” is not running any more ({state}).",
                number=number,
                name=name,
                state=ex.state,
            )
        return ex.server or name


def ended_since(db, since, owner: str | None = None, limit: int = 50, locale: str = "en") -> list[dict]:
    """Tasks that ended (saved or failed) after `since`, newest first: {owner, workspace, number, execution_id,
    stopped, message} (blocking; `message` in `locale`). For the notices of a task's end on the pages."""
    from sqlalchemy import select

    from workspace.executions import FINAL, Execution, Workspace

    query = (
        select(Execution, Workspace.owner, Workspace.name)
        .join(Workspace, Execution.workspace_id == Workspace.id)
        .where(Execution.kind == "task", Execution.state.in_(FINAL), Execution.stopped > since)
        .order_by(Execution.stopped.desc())
        .limit(limit)
    )
    if owner is not None:
        query = query.where(Workspace.owner == owner)
    return _ends(db, query, locale)


NEWS_WITHIN = dt.timedelta(days=1)  # an end older than this is not told any more (it is on the pages)


def untold_ends(db, limit: int = 50) -> list[dict]:
    """Tasks that ended (in the last NEWS_WITHIN) and were not told yet to their owners' workspaces and
    webhooks, oldest first; as `ended_since`. Told or not is in the record (`news_told`), so a culler that
    restarts (a hub's restart, an upgrade) tells what ended while it was away, and nothing twice."""
    from sqlalchemy import select

    from workspace.db import utcnow
    from workspace.executions import FINAL, Execution, Workspace

    query = (
        select(Execution, Workspace.owner, Workspace.name)
        .join(Workspace, Execution.workspace_id == Workspace.id)
        .where(Execution.kind == "task", Execution.state.in_(FINAL), Execution.news_told.is_(None))
        .where(Execution.stopped > utcnow() - NEWS_WITHIN)
        .order_by(Execution.stopped, Execution.id)
        .limit(limit)
    )
    return _ends(db, query, "en")


def mark_told(db, execution_ids: list[int]) -> None:
    """Record that these tasks' ends were told (untold_ends passes them over from now on)."""
    from sqlalchemy import update

    from workspace.db import utcnow
    from workspace.executions import Execution

    with db.session() as s:
        s.execute(update(Execution).where(Execution.id.in_(execution_ids)).values(news_told=utcnow()))


def _ends(db, query, locale: str) -> list[dict]:
    from workspace.db import iso

    with db.session() as s:
        return [
            {
                "owner": who,
                "workspace": name,
                "number": ex.number,
                "execution_id": ex.id,
                "stopped": ex.stopped,
                "stopped_at": iso(ex.stopped),
                "success": ex.exit_code == 0 and ex.stop_reason == "completed",
                "exit_code": ex.exit_code,
                "stop_reason": ex.stop_reason,
                "message": _ended(ex, name, locale),
            }
            for ex, who, name in s.execute(query).all()
        ]
