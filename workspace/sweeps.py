"""Sweeps (#31): one command run once per combination of parameters, each a run beside the workspace.

`workspace run W --sweep lr=0.1,0.01 --sweep seed=1,2 -- python train.py --lr {lr} --seed {seed}` makes
four runs. Each `{name}` of the command is replaced by the run's value, shell-quoted (a value with a
space stays one argument; write `{lr}`, not `"{lr}"`); braces that name no parameter are left as they
are (`${HOME}`, awk's `{print}`), and a parameter the command never names is the user's 400, which is
what a typo looks like.

A sweep's runs are started together, each on a JupyterHub server of its own (workspace/tasks.py
`run_spawn`), and wait in the queue as capacity allows: a type's capacity, its per-user limit and
`max_running_per_user` make runs wait, never refuse them (queue.OwnLimits); `max_runs_per_user` bounds
how many of a user's runs may wait or run at once, so a sweep is refused whole, before anything starts,
when it would pass that bound. The records here are the sweep and its runs (their parameters, the
server each was started on, and the hub's sentence where a start was refused); the runs' states, exit
codes and outputs are their executions' (joined by server).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import shlex
from dataclasses import dataclass

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, String, Text, UniqueConstraint, delete, func, select
from sqlalchemy.orm import Mapped, mapped_column

from workspace.db import Base, Database, iso, utcnow
from workspace.errors import UserError
from workspace.executions import ACTIVE, FINAL, Execution, find_workspace

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
MAX_PARAMETERS = 8
MAX_VALUES = 100  # of one parameter
VALUE_MAX = 256  # characters of one value
HARD_MAX_RUNS = 1000  # whatever the site's bound, a sweep never expands past this


class Sweep(Base):
    """A sweep of a workspace: its number (#1, #2 … per workspace), command template and parameters."""

    __tablename__ = "sweeps"
    __table_args__ = (UniqueConstraint("workspace_id", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    command: Mapped[str] = mapped_column(Text)  # with its {name}s
    params: Mapped[list] = mapped_column(JSON)  # [[name, [value, ...]], ...], in the order given
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    cancelled: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class SweepRun(Base):
    """One combination of a sweep: its parameters, its command, and the server its run was started on."""

    __tablename__ = "sweep_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), index=True)
    index: Mapped[int] = mapped_column(Integer)  # 1-based, in the order of the combinations
    server: Mapped[str] = mapped_column(String(64), index=True)
    params: Mapped[dict] = mapped_column(JSON)  # {name: value}
    command: Mapped[str] = mapped_column(Text)
    refused: Mapped[str | None] = mapped_column(Text, nullable=True)  # the hub's sentence: it never started


# -- parsing (pure) ------------------------------------------------------------------------------------


def parse_params(value) -> list[tuple[str, list[str]]]:
    """A sweep's parameters: {"lr": ["0.1", 0.01], ...} (the API), or ["lr=0.1,0.01", ...] (the CLI's
    --sweep, the page's lines); [(name, [value, ...]), ...] in the order given, or the user's 400."""
    if isinstance(value, str):
        value = [line for line in value.splitlines() if line.strip()]
    if isinstance(value, list):
        pairs = []
        for item in value:
            if not isinstance(item, str) or "=" not in item:
                raise UserError(
                    400,
                    "Write each sweep parameter as name=value,value,… (for example lr=0.1,0.01), not {given!r}.",
                    given=str(item)[:60],
                )
            name, _, values = item.partition("=")
            pairs.append((name.strip(), [v.strip() for v in values.split(",")]))
    elif isinstance(value, dict):
        pairs = list(value.items())
    else:
        raise UserError(400, 'A sweep needs its parameters: for example {{"lr": ["0.1", "0.01"]}}.')
    if not pairs:
        raise UserError(400, "A sweep needs at least one parameter, such as lr=0.1,0.01.")
    if len(pairs) > MAX_PARAMETERS:
        raise UserError(
            400, "A sweep has at most {max} parameters; this one has {count}.", max=MAX_PARAMETERS, count=len(pairs)
        )
    out, seen = [], set()
    for name, values in pairs:
        out.append((_name(name, seen), _values(name, values)))
    return out


def _name(name, seen: set) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise UserError(
            400,
            "A sweep parameter's name is letters, digits and _ (not first), at most 32: not {given!r}.",
            given=str(name)[:40],
        )
    if name in seen:
        raise UserError(400, "The sweep parameter “{name}” is given twice; give its values once.", name=name)
    seen.add(name)
    return name


def _values(name: str, values) -> list[str]:
    if not isinstance(values, list) or not values:
        raise UserError(400, "The sweep parameter “{name}” needs a list of values.", name=name)
    if len(values) > MAX_VALUES:
        raise UserError(
            400,
            "The sweep parameter “{name}” has {count} values; at most {max} are allowed.",
            name=name,
            count=len(values),
            max=MAX_VALUES,
        )
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise UserError(400, "The values of “{name}” must be text or numbers.", name=name)
        text = str(v)
        if not text or len(text) > VALUE_MAX or "\0" in text or "\n" in text:
            raise UserError(
                400,
                "Each value of “{name}” is one line of 1 to {max} characters.",
                name=name,
                max=VALUE_MAX,
            )
        out.append(text)
    if len(set(out)) != len(out):
        raise UserError(400, "The sweep parameter “{name}” has a value twice.", name=name)
    return out


def size(params: list[tuple[str, list[str]]]) -> int:
    n = 1
    for _, values in params:
        n *= len(values)
    return n


def expand(command: str, params: list[tuple[str, list[str]]], max_runs: int = HARD_MAX_RUNS) -> list[tuple[dict, str]]:
    """[(the run's {name: value}, its command), ...]: one per combination, the last parameter varying
    fastest; the user's 400 when the command never names a parameter or there are more than `max_runs`."""
    for name, _ in params:
        if "{" + name + "}" not in command:
            raise UserError(
                400,
                "The command never uses the sweep parameter “{name}”: put {{{name}}} where its value goes.",
                name=name,
            )
    count = size(params)
    limit = min(max_runs or HARD_MAX_RUNS, HARD_MAX_RUNS)
    if count > limit:
        raise UserError(
            400, "This sweep would make {count} runs; at most {max} are allowed at once.", count=count, max=limit
        )
    names = [name for name, _ in params]
    pattern = re.compile("|".join(re.escape("{" + n + "}") for n in names))
    runs = []
    for combo in itertools.product(*(values for _, values in params)):
        chosen = dict(zip(names, combo))
        runs.append((chosen, pattern.sub(lambda m: shlex.quote(chosen[m.group(0)[1:-1]]), command)))
    return runs


def label(params: dict) -> str:
    """“lr=0.1 seed=1”: a run's parameters, as the pages and the archive's folders name it."""
    return " ".join(f"{k}={v}" for k, v in params.items())


# -- the records (blocking) ----------------------------------------------------------------------------


def record(db: Database, owner: str, name: str, command: str, params, runs: list[tuple[str, dict, str]]) -> int:
    """Record a new sweep of workspace `name` with its runs [(server, params, command), ...]; its number."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        if ws is None:
            raise UserError(404, "You have no workspace “{name}” to run beside.", name=name)
        number = (s.scalar(select(func.max(Sweep.number)).where(Sweep.workspace_id == ws.id)) or 0) + 1
        sweep = Sweep(workspace_id=ws.id, number=number, command=command, params=[[n, v] for n, v in params])
        s.add(sweep)
        s.flush()
        for i, (server, chosen, cmd) in enumerate(runs, 1):
            s.add(SweepRun(sweep_id=sweep.id, index=i, server=server, params=chosen, command=cmd))
        return number


def refuse(db: Database, owner: str, name: str, number: int, servers: list[str], why: str) -> None:
    """Say on these runs of the sweep that the hub refused their start (`why`, its sentence)."""
    with db.session() as s:
        sweep = _sweep(s, owner, name, number)
        for run in s.scalars(select(SweepRun).where(SweepRun.sweep_id == sweep.id, SweepRun.server.in_(servers))):
            run.refused = why


def forget(db: Database, owner: str, name: str, number: int) -> None:
    """Remove a sweep none of whose runs started (the first start was refused: nothing is kept)."""
    with db.session() as s:
        sweep = _sweep(s, owner, name, number)
        s.execute(delete(SweepRun).where(SweepRun.sweep_id == sweep.id))  # the runs first: they name it
        s.execute(delete(Sweep).where(Sweep.id == sweep.id))


def _sweep(s, owner: str, name: str, number: int) -> Sweep:
    ws = find_workspace(s, owner, name)
    sweep = None
    if ws is not None and 0 < number < 2**31:
        sweep = s.scalar(select(Sweep).where(Sweep.workspace_id == ws.id, Sweep.number == number))
    if sweep is None:
        raise UserError(404, "Workspace “{name}” has no sweep #{number}.", name=name, number=number)
    return sweep


@dataclass
class RunView:
    """A run of a sweep as the pages show it."""

    index: int
    params: dict
    server: str
    command: str
    execution_id: int | None = None
    number: int | None = None  # the execution's number in the workspace
    state: str = "starting"
    exit_code: int | None = None
    seconds: float | None = None  # from its start to its end (or now)
    detail: str | None = None  # how it ended, or why its start was refused
    has_output: bool = False
    record_id: str | None = None  # its container, while it runs (for the last line of its log)

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("execution_id", "record_id")}
        d["label"] = label(self.params)
        return d


def runs_of(s, sweep: Sweep) -> list[RunView]:
    """The sweep's runs with their executions' states (one query each)."""
    runs = s.scalars(select(SweepRun).where(SweepRun.sweep_id == sweep.id).order_by(SweepRun.index)).all()
    executions = {
        ex.server: ex
        for ex in s.scalars(
            select(Execution).where(
                Execution.workspace_id == sweep.workspace_id, Execution.server.in_([r.server for r in runs])
            )
        )
    }
    now = utcnow()
    out = []
    for run in runs:
        view = RunView(run.index, run.params, run.server, run.command, state="starting", detail=run.refused)
        ex = executions.get(run.server)
        if ex is None:  # not started (yet): its start was refused, or the sweep was cancelled first
            view.state = "refused" if run.refused else ("cancelled" if sweep.cancelled else "starting")
        else:
            view.execution_id, view.number, view.state, view.exit_code = ex.id, ex.number, ex.state, ex.exit_code
            view.seconds = ((ex.stopped or now) - ex.started).total_seconds() if ex.started else None
            view.detail, view.has_output = ex.stop_detail or ex.error, ex.has_output
            view.record_id = ex.container_id if ex.state in ACTIVE else None
        out.append(view)
    return out


def summary(db: Database, owner: str, name: str, number: int) -> tuple[dict, list[RunView]]:
    """A sweep (its command, parameters and counts by state) and its runs; the user's 404 (blocking)."""
    with db.session() as s:
        sweep = _sweep(s, owner, name, number)
        runs = runs_of(s, sweep)
        return describe(sweep, name, runs), runs


def describe(sweep: Sweep, name: str, runs: list[RunView]) -> dict:
    counts: dict[str, int] = {}
    for r in runs:
        counts[r.state] = counts.get(r.state, 0) + 1
    done = all(r.state in (*FINAL, "refused", "cancelled") for r in runs)
    return {
        "workspace": name,
        "number": sweep.number,
        "command": sweep.command,
        "params": {n: v for n, v in sweep.params},
        "created": iso(sweep.created),
        "cancelled": iso(sweep.cancelled),
        "runs_total": len(runs),
        "states": counts,
        "succeeded": sum(1 for r in runs if r.state == "stopped" and r.exit_code == 0),
        "done": done,
    }


def listing(db: Database, owner: str, name: str) -> list[dict]:
    """The workspace's sweeps, newest first, with their counts (blocking); [] when it has none."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        if ws is None:
            return []
        sweeps = s.scalars(select(Sweep).where(Sweep.workspace_id == ws.id).order_by(Sweep.number.desc())).all()
        return [describe(sw, name, runs_of(s, sw)) for sw in sweeps]


def cancel(db: Database, owner: str, name: str, number: int) -> list[str]:
    """Mark the sweep cancelled; the servers of its runs that have not ended, to stop (blocking)."""
    with db.session() as s:
        sweep = _sweep(s, owner, name, number)
        sweep.cancelled = sweep.cancelled or utcnow()
        return [r.server for r in runs_of(s, sweep) if r.state not in (*FINAL, "refused", "cancelled")]
